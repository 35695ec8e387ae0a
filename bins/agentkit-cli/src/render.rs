//! Output: human text with colours on a terminal, and JSON documents for
//! scripts.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use anstyle::{AnsiColor, Style};
use chrono::{DateTime, Utc};
use serde_json::json;

use agentkit::manifest::{
    Agent, Approval, ChannelKind, Execution, Project, RouteAction, ScheduleAction, Transport,
};
use agentkit::{Discovery, Severity};

const BOLD: Style = Style::new().bold();
const DIM: Style = Style::new().dimmed();
const RED: Style = AnsiColor::Red.on_default().bold();
const YELLOW: Style = AnsiColor::Yellow.on_default().bold();
const GREEN: Style = AnsiColor::Green.on_default().bold();
const CYAN: Style = AnsiColor::Cyan.on_default();

pub(crate) use agentkit_cli::render_error as error;

pub(crate) fn json(out: &mut impl Write, value: &serde_json::Value) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, value)?;
    writeln!(out)
}

/// The `validate --json` document.
pub(crate) fn validate_json(out: &mut impl Write, found: &Discovery) -> io::Result<()> {
    json(
        out,
        &json!({
            "ok": !found.diagnostics.has_errors(),
            "errors": found.diagnostics.error_count(),
            "warnings": found.diagnostics.warning_count(),
            "agents": found.host.agents.iter().map(|p| &p.slug).collect::<Vec<_>>(),
            "hostOnlyTools": found
                .host
                .agents
                .iter()
                .map(|p| (p.slug.clone(), json!(host_only_tools(p))))
                .collect::<serde_json::Map<_, _>>(),
            "diagnostics": found.diagnostics,
        }),
    )
}

/// The tools of `p` with `expose = "host"`: callable by routes, handlers,
/// schedules and `POST /v1/tools`, never offered to a model.
fn host_only_tools(p: &Project) -> Vec<&str> {
    p.agent
        .tools
        .iter()
        .filter(|t| t.expose == agentkit::manifest::Expose::Host)
        .map(|t| t.name.as_str())
        .collect()
}

/// Diagnostics grouped by file, then a summary line.
pub(crate) fn diagnostics(out: &mut impl Write, found: &Discovery) -> io::Result<()> {
    let mut by_file: BTreeMap<&str, Vec<&agentkit::Diagnostic>> = BTreeMap::new();
    for d in &found.diagnostics {
        by_file.entry(d.path.as_str()).or_default().push(d);
    }
    for (path, items) in &by_file {
        writeln!(out, "{BOLD}{path}{BOLD:#}")?;
        for d in items {
            let (style, label) = match d.severity {
                Severity::Error => (RED, "error"),
                Severity::Warning => (YELLOW, "warning"),
            };
            let at = match (d.line, d.column) {
                (Some(l), Some(c)) => format!("{l}:{c}: "),
                (Some(l), None) => format!("{l}: "),
                _ => String::new(),
            };
            writeln!(
                out,
                "  {DIM}{at}{DIM:#}{style}{label}{style:#}{DIM}[{}]{DIM:#} {}",
                d.code, d.message
            )?;
            if let Some(hint) = &d.hint {
                writeln!(out, "    {CYAN}hint:{CYAN:#} {hint}")?;
            }
        }
        writeln!(out)?;
    }
    for p in &found.host.agents {
        let host_only = host_only_tools(p);
        if !host_only.is_empty() {
            writeln!(
                out,
                "{BOLD}{}{BOLD:#}: host-only tools (never offered to the model): {}",
                p.slug,
                host_only.join(", ")
            )?;
        }
    }
    let (errors, warnings) = (
        found.diagnostics.error_count(),
        found.diagnostics.warning_count(),
    );
    let agents = found.host.agents.len();
    let agents = format!("{agents} agent{}", if agents == 1 { "" } else { "s" });
    if errors == 0 && warnings == 0 {
        writeln!(out, "{GREEN}ok{GREEN:#}: {agents}, no diagnostics")
    } else if errors == 0 {
        writeln!(
            out,
            "{GREEN}ok{GREEN:#}: {agents}, {warnings} warning{}",
            plural(warnings)
        )
    } else {
        writeln!(
            out,
            "{RED}invalid{RED:#}: {agents}, {errors} error{}, {warnings} warning{}",
            plural(errors),
            plural(warnings)
        )
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

pub(crate) fn init(out: &mut impl Write, dir: &Path, written: &[PathBuf]) -> io::Result<()> {
    writeln!(out, "{GREEN}created{GREEN:#} {}", dir.display())?;
    for p in written {
        let rel = p.strip_prefix(dir).unwrap_or(p);
        writeln!(out, "  {}", rel.display())?;
    }
    writeln!(
        out,
        "\nnext:\n  agentkit validate --dir {0}\n  agentkit info --dir {0}",
        dir.display()
    )
}

/// The discovered surface, one section per agent.
/// `agentkit info --url`: a running agent's MCP endpoint and the live
/// status of its MCP connections.
/// `info --url … --ab`: each experiment's variants, then each variant
/// against the control with its 95 % interval.
pub(crate) fn ab_report(
    out: &mut impl Write,
    report: &agentkit::protocol::ab::AbReport,
) -> io::Result<()> {
    if report.experiments.is_empty() {
        return writeln!(
            out,
            "no experiments (add agent/ab.toml or agent/ab/<id>.toml)"
        );
    }
    for x in &report.experiments {
        writeln!(
            out,
            "{BOLD}{}{BOLD:#} traffic {} · sticky {} · control variant: {} · not enrolled {}",
            x.id, x.traffic, x.sticky, x.control, x.not_enrolled
        )?;
        if let Some(d) = &x.description {
            writeln!(out, "  {DIM}{d}{DIM:#}")?;
        }
        writeln!(
            out,
            "  {DIM}{:<16} {:>8} {:>7} {:>8} {:>9} {:>9} {:>11} {:>11} {:>10} {:>9}{DIM:#}",
            "variant",
            "sessions",
            "turns",
            "failed",
            "p50 ms",
            "p95 ms",
            "tokens in",
            "tokens out",
            "feedback",
            "eval"
        )?;
        for v in &x.variants {
            let (p50, p95) = v.latency_ms.map_or(("-".to_owned(), "-".to_owned()), |l| {
                (l.p50.to_string(), l.p95.to_string())
            });
            let feedback = v
                .feedback
                .map_or("-".to_owned(), |f| format!("{:.2} ({})", f.mean, f.count));
            let eval = v
                .eval
                .map_or("-".to_owned(), |e| format!("{}/{}", e.passed, e.total));
            writeln!(
                out,
                "  {:<16} {:>8} {:>7} {:>8} {:>9} {:>9} {:>11} {:>11} {:>10} {:>9}",
                v.id,
                v.sessions,
                v.turns,
                v.failed_turns,
                p50,
                p95,
                v.usage.input_tokens,
                v.usage.output_tokens,
                feedback,
                eval
            )?;
        }
        for c in &x.comparisons {
            let style = if c.significant { BOLD } else { DIM };
            writeln!(
                out,
                "  {style}{} vs {}: {} {:+.4} (95% CI {:+.4} to {:+.4}; n {} vs {}){}{style:#}",
                c.variant,
                c.control,
                c.metric,
                c.difference,
                c.ci95[0],
                c.ci95[1],
                c.variant_n,
                c.control_n,
                if c.significant { " significant" } else { "" }
            )?;
        }
        if x.comparisons.is_empty() {
            writeln!(
                out,
                "  {DIM}no comparison yet: each side needs two observations of a metric{DIM:#}"
            )?;
        }
    }
    Ok(())
}

pub(crate) fn live_info(out: &mut impl Write, info: &agentkit::client::Info) -> io::Result<()> {
    let s = |v: &serde_json::Value| v.as_str().unwrap_or("?").to_owned();
    writeln!(out, "{BOLD}{}{BOLD:#} (live)", info.slug)?;
    let mcp = &info.mcp;
    writeln!(
        out,
        "  mcp server: {CYAN}{}{CYAN:#} ({})",
        mcp.path,
        mcp.tools.join(", ")
    )?;
    let conns = mcp.connections.as_array().cloned().unwrap_or_default();
    writeln!(out, "  mcp connections: {}", conns.len())?;
    for c in &conns {
        let state = s(&c["state"]);
        let style = match state.as_str() {
            "connected" => GREEN,
            "error" | "restarting" => RED,
            _ => DIM,
        };
        write!(
            out,
            "    {} {DIM}({}){DIM:#} {style}{state}{style:#}",
            s(&c["name"]),
            s(&c["transport"])
        )?;
        if let Some(n) = c["tools"].as_u64() {
            write!(out, ", {n} tool{}", plural(n as usize))?;
        }
        if let Some(n) = c["opens"].as_u64().filter(|n| *n > 1) {
            write!(out, ", opened {n} times")?;
        }
        if let Some(n) = c["attempt"].as_u64() {
            write!(out, ", attempt {n}")?;
        }
        if let Some(ms) = c["retryInMs"].as_u64() {
            write!(out, ", next in {:.1}s", ms as f64 / 1000.0)?;
        }
        if let Some(e) = c["error"].as_str() {
            write!(out, ": {e}")?;
        } else if let Some(e) = c["lastExit"].as_str() {
            write!(out, " {DIM}(last exit: {e}){DIM:#}")?;
        }
        writeln!(out)?;
    }
    Ok(())
}

pub(crate) fn info(out: &mut impl Write, found: &Discovery, now: DateTime<Utc>) -> io::Result<()> {
    let n = found.host.agents.len();
    writeln!(
        out,
        "{BOLD}{n} agent{}{BOLD:#} in {}",
        plural(n),
        found.host.root.display()
    )?;
    for p in &found.host.agents {
        writeln!(out)?;
        project(out, p, now)?;
    }
    for p in &found.host.agents {
        let host_only = host_only_tools(p);
        if !host_only.is_empty() {
            writeln!(
                out,
                "{BOLD}{}{BOLD:#}: host-only tools (never offered to the model): {}",
                p.slug,
                host_only.join(", ")
            )?;
        }
    }
    let (errors, warnings) = (
        found.diagnostics.error_count(),
        found.diagnostics.warning_count(),
    );
    if errors + warnings > 0 {
        writeln!(
            out,
            "\n{YELLOW}{errors} error{}, {warnings} warning{}{YELLOW:#}: run `agentkit validate` for details",
            plural(errors),
            plural(warnings)
        )?;
    }
    Ok(())
}

fn section(out: &mut impl Write, title: &str, count: usize) -> io::Result<bool> {
    if count > 0 {
        writeln!(out, "  {BOLD}{title}{BOLD:#} ({count})")?;
    }
    Ok(count > 0)
}

fn project(out: &mut impl Write, p: &Project, now: DateTime<Utc>) -> io::Result<()> {
    let a: &Agent = &p.agent;
    writeln!(out, "{GREEN}/{}{GREEN:#}  {DIM}{}{DIM:#}", p.slug, p.path)?;
    if let Some(d) = &a.config.description {
        writeln!(out, "  {d}")?;
    }
    let model = a.config.model.as_ref().map_or_else(
        || "host default".to_owned(),
        |m| format!("{}:{}", m.provider.as_str(), m.id),
    );
    writeln!(
        out,
        "  {BOLD}model{BOLD:#} {}  {BOLD}max_steps{BOLD:#} {}  {BOLD}turn_timeout{BOLD:#} {}s",
        model.trim_end_matches(':'),
        a.config.harness.max_steps,
        a.config.harness.turn_timeout.as_secs()
    )?;
    match &a.instructions {
        Some(i) => writeln!(
            out,
            "  {BOLD}instructions{BOLD:#} {} ({} bytes)",
            i.files.join(", "),
            i.bytes
        )?,
        None => writeln!(out, "  {BOLD}instructions{BOLD:#} {RED}missing{RED:#}")?,
    }
    if section(out, "tools", a.tools.len())? {
        for t in &a.tools {
            let kind = match t.execution {
                Execution::Server => "server",
                Execution::Agent => "agent",
            };
            let mut flags = vec![kind.to_owned()];
            if t.expose == agentkit::manifest::Expose::Host {
                flags.push("host only".into());
            }
            if t.annotations.read_only {
                flags.push("read-only".into());
            }
            match t.needs_approval {
                Approval::Never => {}
                Approval::Always => flags.push("needs approval".into()),
                Approval::When(_) => flags.push("approval when input matches".into()),
            }
            let params: Vec<&str> = t
                .input_schema
                .get("properties")
                .and_then(|p| p.as_object())
                .map(|m| m.keys().map(String::as_str).collect())
                .unwrap_or_default();
            writeln!(
                out,
                "    {CYAN}{}{CYAN:#}({}) {DIM}[{}]{DIM:#} {}",
                t.name,
                params.join(", "),
                flags.join(", "),
                t.description
            )?;
        }
    }
    if section(out, "skills", a.skills.len())? {
        for s in &a.skills {
            writeln!(out, "    {CYAN}{}{CYAN:#} {}", s.name, s.description)?;
        }
    }
    if section(out, "mcp connections", a.mcp_connections.len())? {
        for c in &a.mcp_connections {
            let how = match &c.transport {
                Transport::Http { url, .. } => format!("http {url}"),
                Transport::Stdio { command, args, .. } => {
                    format!("stdio {command} {}", args.join(" "))
                }
                Transport::Peer { agent } => format!("peer /{agent}"),
                Transport::A2a { card, .. } => format!("a2a {card}"),
            };
            writeln!(out, "    {CYAN}{}{CYAN:#} {}", c.name, how.trim_end())?;
        }
    }
    if section(out, "subagents", a.subagents.len())? {
        for s in &a.subagents {
            writeln!(out, "    {CYAN}{}{CYAN:#} {}", s.id, s.description)?;
        }
    }
    if section(out, "channels", a.channels.len())? {
        for c in &a.channels {
            let kind = serde_json::to_value(c.kind)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            writeln!(out, "    {CYAN}{}{CYAN:#} {DIM}[{kind}]{DIM:#}", c.id)?;
            if c.kind == ChannelKind::Webhook {
                for r in &c.routes {
                    let action = match &r.action {
                        RouteAction::Send(_) => "send".to_owned(),
                        RouteAction::CallTool(call) => format!("call_tool {}", call.tool),
                        RouteAction::CallToolThenSend { call_tool, .. } => {
                            format!("call_tool {} → send", call_tool.tool)
                        }
                        RouteAction::Handler(h) => {
                            format!("handler {}", h.command.command.join(" "))
                        }
                        RouteAction::Respond => "respond".to_owned(),
                    };
                    writeln!(
                        out,
                        "      {} /{}/v1/channels/{}{} → {action}",
                        r.method.as_str(),
                        p.slug,
                        c.id,
                        r.path
                    )?;
                }
                for event in c.events.keys() {
                    writeln!(out, "      on {event} → POST")?;
                }
            }
        }
    }
    if section(out, "hooks", a.hooks.len())? {
        for h in &a.hooks {
            writeln!(
                out,
                "    {CYAN}{}{CYAN:#} on {}",
                h.name,
                h.events.join(", ")
            )?;
        }
    }
    if section(out, "schedules", a.schedules.len())? {
        for s in &a.schedules {
            let what = match &s.action {
                ScheduleAction::Markdown { .. } => "task session".to_owned(),
                ScheduleAction::Message { channel, .. } => {
                    format!("message → {}", channel.as_deref().unwrap_or("http"))
                }
                ScheduleAction::Tool { name, .. } => format!("tool {name}"),
                ScheduleAction::Handler { name } => format!("rust handler {name}"),
                ScheduleAction::Command(c) => format!("command {}", c.command.join(" ")),
            };
            let next =
                agentkit::info::next_fire(&s.cron, now).unwrap_or_else(|| "never".to_owned());
            writeln!(
                out,
                "    {CYAN}{}{CYAN:#} `{}` {what}, next {next}",
                s.id, s.cron
            )?;
        }
    }
    if section(out, "experiments", a.experiments.len())? {
        for x in &a.experiments {
            let arms: Vec<String> = x
                .variants
                .iter()
                .map(|v| format!("{}:{}", v.id, v.weight))
                .collect();
            writeln!(
                out,
                "    {CYAN}{}{CYAN:#} traffic {} variants {}",
                x.id,
                x.traffic,
                arms.join(" ")
            )?;
        }
    }
    if !a.sandbox_files.is_empty() {
        writeln!(
            out,
            "  {BOLD}sandbox{BOLD:#} {} file{}",
            a.sandbox_files.len(),
            plural(a.sandbox_files.len())
        )?;
    }
    if let Some(e) = &p.evals {
        let cases: usize = e.files.iter().map(|f| f.cases.len()).sum();
        let conc = e.config.as_ref().map_or_else(
            || "no evals.toml".to_owned(),
            |c| format!("max_concurrency {}", c.max_concurrency),
        );
        writeln!(
            out,
            "  {BOLD}evals{BOLD:#} {} file{}, {cases} case{} ({conc})",
            e.files.len(),
            plural(e.files.len()),
            plural(cases)
        )?;
    }
    Ok(())
}
