//! Text for people: plain lines as case iterations finish (logs, CI,
//! `--no-stream`), a live progress bar for terminals, the closing table,
//! and `--list`. Everything writes to a writer the binary hands in.

use std::io::{self, Write};
use std::sync::Mutex;

use agentkit_manifest::EvalCase;

use crate::baseline::Comparison;
use crate::report::{IterationReport, Report};
use crate::runner::Progress;

/// `--list`: one case per line, with its tags and description.
pub fn write_list(out: &mut impl Write, cases: &[&EvalCase]) -> io::Result<()> {
    let width = cases.iter().map(|c| c.id.len()).max().unwrap_or(0);
    for c in cases {
        let tags = if c.tags.is_empty() {
            String::new()
        } else {
            format!("  [{}]", c.tags.join(", "))
        };
        let description = c
            .description
            .as_deref()
            .map(|d| format!("  {d}"))
            .unwrap_or_default();
        writeln!(out, "{:width$}{tags}{description}", c.id)?;
    }
    Ok(())
}

/// One line per finished iteration (and one per failed expectation).
#[derive(Debug)]
pub struct Lines<W> {
    out: Mutex<W>,
}

impl<W: Write + Send> Lines<W> {
    pub fn new(out: W) -> Self {
        Lines {
            out: Mutex::new(out),
        }
    }
}

impl<W: Write + Send> Progress for Lines<W> {
    fn started(&self, _: &str, _: u32) {}

    fn finished(&self, case: &str, run: &IterationReport) {
        let Ok(mut out) = self.out.lock() else { return };
        let _ = write_run(&mut *out, case, run);
        let _ = out.flush();
    }
}

fn write_run(out: &mut impl Write, case: &str, run: &IterationReport) -> io::Result<()> {
    let verdict = if run.outcome.passed() { "PASS" } else { "FAIL" };
    let iteration = if run.iteration > 1 || !run.outcome.passed() {
        format!(" #{}", run.iteration)
    } else {
        String::new()
    };
    writeln!(out, "{verdict} {case}{iteration} ({} ms)", run.duration_ms)?;
    for failure in Report::failures(run) {
        writeln!(out, "  - {failure}")?;
    }
    Ok(())
}

/// A progress bar redrawn in place (a terminal's stderr): passed, failed
/// and running counts. Failures are printed above it as they happen.
#[derive(Debug)]
pub struct Bar<W> {
    state: Mutex<(W, BarCounts)>,
}

#[derive(Debug, Default)]
struct BarCounts {
    total: usize,
    passed: usize,
    failed: usize,
    running: usize,
}

impl<W: Write + Send> Bar<W> {
    /// A bar over `total` case iterations.
    pub fn new(out: W, total: usize) -> Self {
        Bar {
            state: Mutex::new((
                out,
                BarCounts {
                    total,
                    ..BarCounts::default()
                },
            )),
        }
    }

    /// Clears the bar's line (before the table is printed).
    pub fn clear(&self) {
        if let Ok(mut s) = self.state.lock() {
            let _ = write!(s.0, "\r\x1b[2K");
            let _ = s.0.flush();
        }
    }

    fn draw(out: &mut W, c: &BarCounts) {
        const WIDTH: usize = 30;
        let done = c.passed + c.failed;
        let filled = (done * WIDTH).checked_div(c.total).unwrap_or(WIDTH);
        let _ = write!(
            out,
            "\r\x1b[2K[{}{}] {done}/{}  passed {}  failed {}  running {}",
            "#".repeat(filled),
            "-".repeat(WIDTH - filled),
            c.total,
            c.passed,
            c.failed,
            c.running
        );
        let _ = out.flush();
    }
}

impl<W: Write + Send> Progress for Bar<W> {
    fn started(&self, _: &str, _: u32) {
        if let Ok(mut s) = self.state.lock() {
            let (out, counts) = &mut *s;
            counts.running += 1;
            Self::draw(out, counts);
        }
    }

    fn finished(&self, case: &str, run: &IterationReport) {
        if let Ok(mut s) = self.state.lock() {
            let (out, counts) = &mut *s;
            counts.running = counts.running.saturating_sub(1);
            if run.outcome.passed() {
                counts.passed += 1;
            } else {
                counts.failed += 1;
                let _ = write!(out, "\r\x1b[2K");
                let _ = write_run(out, case, run);
            }
            Self::draw(out, counts);
        }
    }
}

/// The closing table: one row per case, then the totals.
pub fn write_table(out: &mut impl Write, report: &Report) -> io::Result<()> {
    let width = report
        .cases
        .iter()
        .map(|c| c.id.len())
        .max()
        .unwrap_or(4)
        .max(4);
    writeln!(
        out,
        "{:width$}  {:6}  {:>5}  {:>6}  {:>8}  {:>8}  {:>10}",
        "case", "result", "k", "pass", "time", "tokens", "cost"
    )?;
    for c in &report.cases {
        writeln!(
            out,
            "{:width$}  {:6}  {:>5}  {:>5.0}%  {:>6}ms  {:>8}  {:>10}",
            c.id,
            if c.outcome.passed() { "pass" } else { "FAIL" },
            c.iterations,
            c.pass_rate * 100.0,
            c.duration_ms,
            c.usage.input_tokens + c.usage.output_tokens,
            usd(c.cost_usd)
        )?;
    }
    write_summary(out, report)
}

/// `N passed, M failed` with the run's time.
pub fn write_summary(out: &mut impl Write, report: &Report) -> io::Result<()> {
    let cost = match report.cost_usd {
        Some(c) => format!(", {}", usd(Some(c))),
        None => String::new(),
    };
    writeln!(
        out,
        "{} passed, {} failed ({} cases, {} runs, {} ms{cost})",
        report.summary.passed,
        report.summary.failed,
        report.summary.cases,
        report.summary.runs,
        report.duration_ms
    )
}

/// A cost in US dollars as the text report shows it (`-`: unknown).
fn usd(cost: Option<f64>) -> String {
    match cost {
        Some(c) => format!("${c:.6}"),
        None => "-".to_owned(),
    }
}

/// The regressions against a baseline, one per line.
pub fn write_comparison(out: &mut impl Write, comparison: &Comparison) -> io::Result<()> {
    if comparison.regressions.is_empty() {
        writeln!(
            out,
            "no regression against baseline {}",
            comparison.baseline_run_id
        )?;
    }
    for r in &comparison.regressions {
        writeln!(out, "REGRESSION {}", r.message)?;
    }
    for id in &comparison.fixed {
        writeln!(out, "fixed {id}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Outcome;

    fn run(iteration: u32, passed: bool) -> IterationReport {
        IterationReport {
            iteration,
            outcome: Outcome::of(passed),
            session_id: None,
            started_at: String::new(),
            ended_at: String::new(),
            duration_ms: 5,
            usage: Default::default(),
            cost_usd: None,
            error: (!passed).then(|| "turn 1 timed out after 1s".to_owned()),
            turns: Vec::new(),
        }
    }

    #[test]
    fn the_bar_counts_and_prints_failures_above_itself() {
        let bar = Bar::new(Vec::new(), 2);
        bar.started("a", 1);
        bar.started("b", 1);
        bar.finished("a", &run(1, true));
        bar.finished("b", &run(1, false));
        let out = bar.state.into_inner().map(|s| s.0).unwrap_or_default();
        let text = String::from_utf8_lossy(&out);
        let frames: Vec<&str> = text.split("\r\x1b[2K").filter(|f| !f.is_empty()).collect();
        assert_eq!(
            frames,
            [
                "[------------------------------] 0/2  passed 0  failed 0  running 1",
                "[------------------------------] 0/2  passed 0  failed 0  running 2",
                "[###############---------------] 1/2  passed 1  failed 0  running 1",
                "FAIL b #1 (5 ms)\n  - turn 1 timed out after 1s\n",
                "[##############################] 2/2  passed 1  failed 1  running 0",
            ]
        );
    }

    #[test]
    fn lines_show_every_failure() {
        let lines = Lines::new(Vec::new());
        lines.finished("a", &run(2, true));
        lines.finished("b", &run(1, false));
        let out = lines.out.into_inner().unwrap_or_default();
        assert_eq!(
            String::from_utf8_lossy(&out),
            "PASS a #2 (5 ms)\nFAIL b #1 (5 ms)\n  - turn 1 timed out after 1s\n"
        );
    }
}
