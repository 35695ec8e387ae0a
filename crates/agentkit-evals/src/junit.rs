//! JUnit XML, as CI systems read it: one `<testcase>` per case and
//! iteration, a `<failure>` carrying every failed expectation.

use crate::report::Report;

/// The report as a JUnit XML document.
pub fn junit_xml(report: &Report) -> String {
    let secs = |ms: u64| format!("{:.3}", ms as f64 / 1000.0);
    let tests: usize = report.summary.runs;
    let failures: usize = report
        .cases
        .iter()
        .flat_map(|c| &c.runs)
        .filter(|r| !r.outcome.passed())
        .count();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    out.push_str(&format!(
        "<testsuites name=\"agentkit eval\" tests=\"{tests}\" failures=\"{failures}\" time=\"{}\">\n",
        secs(report.duration_ms)
    ));
    out.push_str(&format!(
        "  <testsuite name=\"{}\" tests=\"{tests}\" failures=\"{failures}\" errors=\"0\" skipped=\"0\" time=\"{}\" timestamp=\"{}\">\n",
        esc(&report.agent),
        secs(report.duration_ms),
        esc(&report.started_at)
    ));
    for case in &report.cases {
        let classname = match case.id.rsplit_once('/') {
            Some((file, _)) => format!("{}.{}", report.agent, file.replace('/', ".")),
            None => report.agent.clone(),
        };
        for run in &case.runs {
            let name = if case.iterations > 1 {
                format!("{} [{}/{}]", case.id, run.iteration, case.iterations)
            } else {
                case.id.clone()
            };
            out.push_str(&format!(
                "    <testcase classname=\"{}\" name=\"{}\" time=\"{}\"",
                esc(&classname),
                esc(&name),
                secs(run.duration_ms)
            ));
            let failed = Report::failures(run);
            if run.outcome.passed() {
                out.push_str("/>\n");
                continue;
            }
            out.push_str(">\n");
            let first = failed
                .first()
                .cloned()
                .unwrap_or_else(|| "failed".to_owned());
            out.push_str(&format!(
                "      <failure message=\"{}\" type=\"expectation\">{}</failure>\n",
                esc(&first),
                esc(&failed.join("\n"))
            ));
            if let Some(session) = &run.session_id {
                out.push_str(&format!(
                    "      <system-out>session {}</system-out>\n",
                    esc(session)
                ));
            }
            out.push_str("    </testcase>\n");
        }
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

/// Escapes text for XML content and attributes; characters XML 1.0
/// cannot carry are dropped.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' | '\t' | '\r' => out.push(c),
            c if (c as u32) < 0x20 => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_control_characters() {
        assert_eq!(esc("a<b & \"c\"\u{1}'"), "a&lt;b &amp; &quot;c&quot;&apos;");
    }
}
