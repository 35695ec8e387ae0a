//! `agentkit migrate` on the TypeScript fixtures (`fixtures/typescript/`):
//! with Node (the project's modules loaded under the shim, tools, route
//! handlers and schedules run by Node through the host bridge) and without
//! (a PATH with no `node`: the mechanical parts convert, the rest is
//! reported). Every output validates and is served: a turn runs over HTTP
//! with the offline model.

// A test that cannot find Node's packages says so before it skips.
#![allow(clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use agentkit_test_support::http::Request;
use agentkit_test_support::migrate_node;
use agentkit_test_support::process::{ServerProcess, free_port};
use serde_json::{Value, json};

use super::{Run, agentkit, agentkit_with, fixtures};

fn fixture(name: &str) -> PathBuf {
    fixtures().join("typescript").join(name)
}

/// Migrates `from` into `to` with Node (given the folder of zod and
/// typescript) or with a PATH that has no `node`; answers the run and its
/// JSON document.
fn migrate(from: &Path, to: &Path, node_modules: Option<&Path>) -> (Run, Value) {
    let empty = to.with_extension("empty-path");
    std::fs::create_dir_all(&empty).unwrap();
    let mut args = vec![
        "migrate".to_owned(),
        "--from".to_owned(),
        from.display().to_string(),
        "--to".to_owned(),
        to.display().to_string(),
        "--json".to_owned(),
    ];
    if let Some(dir) = node_modules {
        args.extend(["--node-modules".to_owned(), dir.display().to_string()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = agentkit_with(to.parent().unwrap(), &args, |cmd| {
        cmd.env_remove("AGENTKIT_MIGRATE_NODE_MODULES");
        if node_modules.is_none() {
            cmd.env("PATH", &empty);
        }
    });
    let doc: Value = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}\nstderr: {}", run.stdout, run.stderr));
    (run, doc)
}

/// The manual entries of project `name` as `source: what` lines.
fn manual(doc: &Value, name: &str) -> Vec<String> {
    project(doc, name)["manual"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            format!(
                "{}: {}",
                m["source"].as_str().unwrap(),
                m["what"].as_str().unwrap()
            )
        })
        .collect()
}

fn targets(doc: &Value, name: &str) -> Vec<String> {
    project(doc, name)["converted"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["target"].as_str().unwrap().to_owned())
        .collect()
}

fn project<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["report"]["projects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no project {name} in {doc:#}"))
}

fn assert_valid(run: &Run, doc: &Value) {
    assert_eq!(
        run.code, 0,
        "stdout: {}\nstderr: {}",
        run.stdout, run.stderr
    );
    assert_eq!(doc["validation"]["errors"], 0, "{:#}", doc["validation"]);
    // Validation on its own agrees.
    let dir = doc["report"]["to"].as_str().unwrap();
    let check = agentkit(Path::new("."), &["validate", "--dir", dir]);
    assert_eq!(check.code, 0, "{}{}", check.stdout, check.stderr);
}

fn serve(dir: &Path, env: &[(&str, &str)]) -> ServerProcess {
    let port = free_port();
    let state = dir.with_extension("state");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_agentkit"));
    cmd.args(["serve", "--dir"])
        .arg(dir)
        .args(["--dev", "--port", &port.to_string(), "--state-root"])
        .arg(&state)
        .env("NO_COLOR", "1")
        .env_remove("AGENTKIT_MODEL")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    ServerProcess::healthy(cmd.spawn().unwrap(), port, Duration::from_secs(30))
}

/// Follows a session's stream to the end of its turn.
fn turn(server: &ServerProcess, slug: &str, session: &str) -> Vec<Value> {
    let mut stream = Request::get(&format!("/{slug}/v1/session/{session}/stream"))
        .stream(server.addr)
        .unwrap();
    let events = stream.until("turn.completed").unwrap();
    assert!(
        events.iter().all(|e| e["type"] != "turn.failed"),
        "{events:#?}"
    );
    events
}

fn tool_results(events: &[Value]) -> Vec<&Value> {
    events
        .iter()
        .filter(|e| e["type"] == "action.result")
        .map(|e| &e["data"])
        .collect()
}

fn new_session(server: &ServerProcess, slug: &str, message: &str) -> String {
    let r = Request::post(&format!("/{slug}/v1/session"))
        .json(&json!({"message": message}))
        .send(server.addr)
        .unwrap();
    assert!(
        r.status == 200 || r.status == 202,
        "{} {}",
        r.status,
        r.body
    );
    r.json()["sessionId"].as_str().unwrap().to_owned()
}

#[test]
fn refuses_a_non_empty_target_and_a_folder_without_agent() {
    let tmp = tempfile::tempdir().unwrap();
    let to = tmp.path().join("out");
    std::fs::create_dir_all(&to).unwrap();
    std::fs::write(to.join("keep.txt"), "mine").unwrap();
    let from = fixture("router").join("support");
    let args = |force: bool| {
        let mut a = vec![
            "migrate".to_owned(),
            "--from".to_owned(),
            from.display().to_string(),
            "--to".to_owned(),
            to.display().to_string(),
            "--no-node".to_owned(),
        ];
        if force {
            a.push("--force".to_owned());
        }
        a
    };
    let a = args(false);
    let run = agentkit(
        tmp.path(),
        &a.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("is not empty; pass --force"),
        "{}",
        run.stderr
    );
    assert!(!to.join("agent").exists());

    let a = args(true);
    let run = agentkit(
        tmp.path(),
        &a.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(
        std::fs::read_to_string(to.join("keep.txt")).unwrap(),
        "mine"
    );
    assert!(to.join("agent/instructions.md").is_file());
    assert!(
        run.stdout
            .contains("agent/instructions.ts → agent/instructions.md"),
        "{}",
        run.stdout
    );

    let empty = tmp.path().join("no-project");
    std::fs::create_dir_all(empty.join("src")).unwrap();
    let run = agentkit(
        tmp.path(),
        &[
            "migrate",
            "--from",
            &empty.display().to_string(),
            "--to",
            "elsewhere",
        ],
    );
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("has no `agent/` folder"),
        "{}",
        run.stderr
    );
}

#[test]
fn triage_without_node_converts_the_mechanical_parts_and_reports_the_rest() {
    let tmp = tempfile::tempdir().unwrap();
    let to = tmp.path().join("triage");
    let (run, doc) = migrate(&fixture("triage"), &to, None);
    assert_valid(&run, &doc);
    assert_eq!(doc["report"]["node"]["status"], "notUsed");
    let done = targets(&doc, "triage");
    for t in [
        "agent/agent.toml",
        "agent/instructions.md",
        "agent/skills/severity.md",
        "agent/schedules/daily-digest.md",
        "agent/sandbox/workspace/ONCALL.md",
        "evals/evals.toml",
        "evals/intake.eval.toml",
    ] {
        assert!(done.iter().any(|d| d == t), "{t} not in {done:?}");
    }
    let left = manual(&doc, "triage");
    for m in [
        "agent/agent.ts: model `grok-4.5`",
        "agent/tools/lookup_runbook.ts: tool `lookup_runbook`",
        "agent/channels/alerts.ts: route POST /grafana",
        "agent/channels/alerts.ts: route GET /tickets",
        "agent/schedules/stale-sweep.ts: schedule `stale-sweep`",
        "agent/hooks/audit.ts: hook `audit`",
    ] {
        assert!(left.iter().any(|l| l == m), "{m} not in {left:#?}");
    }
    let tool = project(&doc, "triage")["manual"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["what"] == "tool `lookup_runbook`")
        .unwrap();
    assert!(
        tool["reason"]
            .as_str()
            .unwrap()
            .contains("runs only under Node"),
        "{tool}"
    );
    assert!(!to.join("agent/lib/agentkit-node").exists());
    assert!(!to.join("agent/tools").exists());

    let eval = std::fs::read_to_string(to.join("evals/intake.eval.toml")).unwrap();
    assert!(
        eval.contains("send = \"Alert HighErrorRate on checkout (critical): error rate 12%\""),
        "{eval}"
    );
    assert!(eval.contains("matches = \"(?i)runbook|team\""), "{eval}");

    let server = serve(&to, &[]);
    let id = new_session(&server, "triage", "Alert DiskFull on search");
    let events = turn(&server, "triage", &id);
    assert!(tool_results(&events).is_empty(), "{events:#?}");
}

#[test]
fn triage_with_node_runs_tools_handlers_and_schedules_under_node() {
    let node_modules = match migrate_node::node_modules("triage_with_node") {
        Ok(dir) => dir,
        Err(why) => {
            eprintln!("{why}");
            return;
        }
    };
    let tmp = tempfile::tempdir().unwrap();
    let to = tmp.path().join("triage");
    let (run, doc) = migrate(&fixture("triage"), &to, Some(&node_modules));
    assert_valid(&run, &doc);
    assert_eq!(
        doc["report"]["node"]["status"], "available",
        "{:#}",
        doc["report"]["node"]
    );
    let left = manual(&doc, "triage");
    assert_eq!(
        left,
        [
            "agent/agent.ts: model `grok-4.5`",
            "agent/agent.ts: model params [{\"id\":\"effort\",\"value\":\"high\"}]",
            "agent/channels/alerts.ts: event handler `message.completed`",
            "agent/channels/slack.ts: engagement.channelPosts.allow [\"#triage-alerts\"]",
            "agent/channels/slack.ts: handler `onChannelPost`",
        ],
        "{left:#?}"
    );
    let slack = std::fs::read_to_string(to.join("agent/channels/slack.toml")).unwrap();
    for line in [
        "kind = \"slack\"",
        "env_prefix = \"TRIAGE\"",
        "tool_approvals = true",
        "debounce = \"15000ms\"",
        "message = \"Which alerts are still open?\"",
    ] {
        assert!(slack.contains(line), "{line} not in {slack}");
    }
    let hook = std::fs::read_to_string(to.join("agent/hooks/audit.toml")).unwrap();
    assert!(
        hook.contains("events = [\"turn.completed\"]") && hook.contains("\"hook\","),
        "{hook}"
    );
    // zod's own converter wrote the schemas.
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(to.join("agent/tools/lookup_runbook.schema.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        schema["properties"]["alertname"],
        json!({"type": "string", "minLength": 1, "description": "The alert's name, e.g. HighErrorRate"})
    );
    let channel = std::fs::read_to_string(to.join("agent/channels/alerts.toml")).unwrap();
    assert!(
        channel.contains("token = \"${GRAFANA_TOKEN}\""),
        "{channel}"
    );
    assert!(channel.contains("\"route\",\n    \"./lib/original/agent/channels/alerts.ts\",\n    \"POST\",\n    \"/grafana\","), "{channel}");
    assert!(
        !channel.contains("env = [\"GRAFANA_TOKEN\"]"),
        "the auth secret stays with the host: {channel}"
    );

    let server = serve(&to, &[("GRAFANA_TOKEN", "grafana-secret")]);
    let alert: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("triage").join("grafana-alert.json")).unwrap(),
    )
    .unwrap();
    let intake = |body: &Value| {
        Request::post("/triage/v1/channels/alerts/grafana")
            .bearer("grafana-secret")
            .header("user-agent", "Grafana/11.3.0")
            .json(body)
            .send(server.addr)
            .unwrap()
    };
    let r = Request::post("/triage/v1/channels/alerts/grafana")
        .json(&alert)
        .send(server.addr)
        .unwrap();
    assert_eq!(r.status, 401, "{}", r.body);

    // The original handler, run by Node: a new alert opens a session...
    let r = intake(&alert);
    assert_eq!(r.status, 200, "{}", r.body);
    let body = r.json();
    assert_eq!(body["via"], "Grafana/11.3.0");
    assert_eq!(body["accepted"].as_array().unwrap().len(), 1, "{body}");
    let session = body["accepted"][0]["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    // ...whose turn calls the original tool, which reads the alert's ticket
    // through the bridge's kv with its continuation key.
    let events = turn(&server, "triage", &session);
    let results = tool_results(&events);
    assert_eq!(results.len(), 1, "{events:#?}");
    assert_eq!(results[0]["toolName"], "lookup_runbook");
    assert_eq!(results[0]["isError"], false, "{:#}", results[0]);
    assert_eq!(
        results[0]["output"]["ticket"]["sessionId"],
        session.as_str(),
        "{:#}",
        results[0]
    );
    assert_eq!(results[0]["output"]["session"], session.as_str());

    // The original hook ran under Node for the turn's `turn.completed`.
    let mut delivered = 0;
    for _ in 0..100 {
        let info = Request::get("/triage/v1/info")
            .send(server.addr)
            .unwrap()
            .json();
        delivered = info["hooks"][0]["delivered"].as_u64().unwrap_or(0);
        if delivered > 0 {
            assert_eq!(info["hooks"][0]["failed"], 0, "{:#}", info["hooks"]);
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(delivered, 1);

    // The same alert again is a duplicate; another org is refused.
    let r = intake(&alert);
    assert_eq!(r.status, 409, "{}", r.body);
    assert_eq!(r.json()["duplicates"][0]["sessionId"], session.as_str());
    let r = intake(&json!({"orgId": 7, "alerts": []}));
    assert_eq!(r.status, 403, "{}", r.body);
    // The route's schema (from zod) is checked before the handler runs.
    let r = intake(&json!({"orgId": "one", "alerts": []}));
    assert_eq!(r.status, 400, "{}", r.body);

    // The portal lists the ticket.
    let r = Request::get("/triage/v1/channels/alerts/tickets?status=open")
        .bearer("grafana-secret")
        .send(server.addr)
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let tickets = r.json()["tickets"].clone();
    assert_eq!(tickets.as_array().unwrap().len(), 1, "{tickets}");
    assert_eq!(tickets[0]["key"], "alert:6a4f0c2e9b1d3a57");

    // The `run` schedule receives into the alert's session on the channel.
    let r = Request::post("/triage/v1/dev/schedules/stale-sweep")
        .send(server.addr)
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let run = r.json();
    assert_eq!(run["sessionIds"], json!([session]), "{run}");
    assert_eq!(run["lastRun"]["outcome"], "ok", "{run}");
}

#[test]
fn pr_reviewer_converts_the_github_pack_and_runs_its_tool_under_node() {
    let tmp = tempfile::tempdir().unwrap();
    // Without Node: the pack, the agent tool, skills, subagent and evals.
    let to = tmp.path().join("plain");
    let (run, doc) = migrate(&fixture("pr-reviewer"), &to, None);
    assert_valid(&run, &doc);
    let github = std::fs::read_to_string(to.join("agent/channels/github.toml")).unwrap();
    for line in [
        "kind = \"github\"",
        "bot_name = \"pr-reviewer\"",
        "webhook_secret = \"${GITHUB_WEBHOOK_SECRET}\"",
        "banner = true",
        "context = \"pr-reviewer/review\"",
        "event = \"pull_request\"",
        "\"pull_request.draft\" = false",
        "event = \"issue_comment\"",
    ] {
        assert!(github.contains(line), "{line} not in {github}");
    }
    let agent = std::fs::read_to_string(to.join("agent/agent.toml")).unwrap();
    assert!(
        agent.contains("model = \"anthropic:claude-sonnet-4-5\""),
        "{agent}"
    );
    assert!(
        agent.contains("cwd = \"/tmp/pr-reviewer-workspaces\""),
        "{agent}"
    );
    let sub = std::fs::read_to_string(to.join("agent/subagents/security/agent.toml")).unwrap();
    assert!(sub.contains("model = \"openai:gpt-4.1-mini\""), "{sub}");
    let tone = std::fs::read_to_string(to.join("agent/skills/tone.md")).unwrap();
    assert!(
        tone.starts_with("---\ndescription: \"Use when wording review comments.\"\n---\n\n# Tone"),
        "{tone}"
    );
    assert!(
        to.join("agent/skills/review-checklist/references/style.md")
            .is_file()
    );
    let linear = std::fs::read_to_string(to.join("agent/mcp-connections/linear.toml")).unwrap();
    assert!(linear.contains("oauth = true"), "{linear}");
    let diff_stats = std::fs::read_to_string(to.join("agent/tools/diff_stats.toml")).unwrap();
    assert!(diff_stats.contains("execution = \"agent\""), "{diff_stats}");
    let evals = std::fs::read_to_string(to.join("evals/evals.toml")).unwrap();
    assert!(
        evals.contains("max_concurrency = 4")
            && evals.contains("persist_runs = true")
            && evals.contains("max_playground_runs = 50"),
        "{evals}"
    );
    let review = std::fs::read_to_string(to.join("evals/review.eval.toml")).unwrap();
    assert!(
        review.contains("id = \"formats\"")
            && review.contains("\"pr/diff.patch\"")
            && review.contains("contains = \"No findings\""),
        "{review}"
    );
    let left = manual(&doc, "plain");
    assert!(
        left.iter()
            .any(|l| l.starts_with("evals/review.eval.ts: case `short`: `t.check")),
        "{left:#?}"
    );
    assert!(
        left.contains(&"agent/tools/format_findings.ts: tool `format_findings`".to_owned()),
        "{left:#?}"
    );
    // A turn over HTTP on an ephemeral server, with the offline model in
    // place of the agent's Anthropic one.
    let plain = to.display().to_string();
    let run = agentkit(
        tmp.path(),
        &[
            "run",
            "--dir",
            &plain,
            "--model",
            "test",
            "--message",
            "Review pull request #1",
        ],
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let trajectory: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(
        trajectory["turns"][0]["status"], "completed",
        "{trajectory:#}"
    );

    let node_modules = match migrate_node::node_modules("pr_reviewer_with_node") {
        Ok(dir) => dir,
        Err(why) => {
            eprintln!("{why}");
            return;
        }
    };
    let to = tmp.path().join("reviewer");
    let (run, doc) = migrate(&fixture("pr-reviewer"), &to, Some(&node_modules));
    assert_valid(&run, &doc);
    let post = std::fs::read_to_string(to.join("agent/tools/post_findings.toml")).unwrap();
    assert!(post.contains("needs_approval = true"), "{post}");
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(to.join("agent/tools/post_findings.schema.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        schema["properties"]["repo"]["pattern"], "^[\\w.-]+\\/[\\w.-]+$",
        "{schema:#}"
    );

    // The tool's original `execute` (and the lib it imports) under Node.
    let server = serve(&to, &[("GITHUB_WEBHOOK_SECRET", "s")]);
    let r = Request::post("/reviewer/v1/tools/format_findings")
        .json(&json!({"input": {"findings": [{"file": "src/main.rs", "line": 3, "severity": "error", "message": "unwrap on user input"}]}}))
        .send(server.addr)
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let result = r.json();
    assert_eq!(result["isError"], false, "{result:#}");
    assert_eq!(result["result"]["count"], 1);
    assert_eq!(
        result["result"]["markdown"],
        "**Review: 1 finding(s)**\n\n- ❌ `src/main.rs:3`: unwrap on user input"
    );
    // The zod schema is enforced before the program runs.
    let r = Request::post("/reviewer/v1/tools/format_findings")
        .json(&json!({"input": {"findings": [{"file": "", "severity": "fatal", "message": "x"}]}}))
        .send(server.addr)
        .unwrap();
    assert_eq!(r.status, 400, "{}", r.body);
}

#[test]
fn router_and_its_peers_migrate_as_a_folder_and_delegate() {
    let tmp = tempfile::tempdir().unwrap();
    let mut runs = vec![("plain", None)];
    match migrate_node::node_modules("router_with_node") {
        Ok(dir) => runs.push(("node", Some(dir))),
        Err(why) => eprintln!("{why}"),
    }
    for (name, node_modules) in runs {
        let to = tmp.path().join(name);
        let (run, doc) = migrate(&fixture("router"), &to, node_modules.as_deref());
        assert_valid(&run, &doc);
        let names: Vec<&str> = doc["report"]["projects"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["billing", "router", "support"]);
        for f in [
            "router/agent/instructions/01-role.md",
            "router/agent/instructions/02-routing.md",
            "support/agent/instructions.md",
            "support/agent/skills/escalation.md",
        ] {
            assert!(to.join(f).is_file(), "{f}");
        }
        let peer =
            std::fs::read_to_string(to.join("router/agent/mcp-connections/billing.toml")).unwrap();
        assert!(peer.contains("agent = \"billing\""), "{peer}");
        let http = std::fs::read_to_string(to.join("router/agent/channels/http.toml")).unwrap();
        assert!(http.contains("\"local_dev_strict\""), "{http}");
        assert!(
            http.contains("{ bearer = { token = \"${ROUTER_TOKEN:-change-me}\" } }"),
            "{http}"
        );
        let left = manual(&doc, "router");
        assert!(
            left.contains(
                &"agent/mcp-connections/cursor.ts: connection `cursor` (cursorAccount)".to_owned()
            ),
            "{left:#?}"
        );
        assert!(
            left.contains(&"agent/channels/http.ts: `onMessage`".to_owned()),
            "{left:#?}"
        );
        assert!(to.join("billing/agent/tools/invoice_note.toml").is_file());

        let server = serve(&to, &[]);
        let id = new_session(&server, "router", "Is invoice INV-1002 paid?");
        turn(&server, "router", &id);
        let r = Request::post("/billing/v1/tools/lookup_invoice")
            .json(&json!({"input": {"invoiceId": "INV-1002"}}))
            .send(server.addr)
            .unwrap();
        if node_modules.is_some() {
            assert_eq!(r.status, 200, "{}", r.body);
            assert_eq!(
                r.json()["result"],
                json!({"invoiceId": "INV-1002", "amount": 75.5, "status": "open"})
            );
        } else {
            assert_eq!(r.status, 404, "{}", r.body);
            assert!(
                manual(&doc, "billing")
                    .contains(&"agent/tools/lookup_invoice.ts: tool `lookup_invoice`".to_owned())
            );
        }
    }
}

#[test]
fn a_node_too_old_for_the_shim_is_reported_and_not_used() {
    let tmp = tempfile::tempdir().unwrap();
    let fake = tmp.path().join("node");
    std::fs::write(&fake, "#!/bin/sh\necho v18.19.0\n").unwrap();
    let mut perms = std::fs::metadata(&fake).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&fake, perms).unwrap();
    let to = tmp.path().join("billing");
    let run = agentkit(
        tmp.path(),
        &[
            "migrate",
            "--from",
            &fixture("router").join("billing").display().to_string(),
            "--to",
            &to.display().to_string(),
            "--node",
            &fake.display().to_string(),
            "--json",
        ],
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let doc: Value = serde_json::from_str(&run.stdout).unwrap();
    let node = &doc["report"]["node"];
    assert_eq!(node["status"], "unusable", "{node}");
    assert!(
        node["reason"]
            .as_str()
            .unwrap()
            .contains("v18.19.0 is too old"),
        "{node}"
    );
    // Converted as without Node: the agent tool, not the server tool.
    assert!(to.join("agent/tools/invoice_note.toml").is_file());
    assert!(!to.join("agent/tools/lookup_invoice.toml").exists());
    assert!(!to.join("agent/lib").exists());
}

/// A Node that runs but loads no module (Node 20 without the `typescript`
/// package answers an error for every `.ts` file) is reported as such,
/// and the migration exits 1: the modules' tools were not converted.
#[test]
fn a_node_that_loads_no_module_is_reported_and_exits_1() {
    let tmp = tempfile::tempdir().unwrap();
    let fake = tmp.path().join("node");
    std::fs::write(
        &fake,
        "#!/bin/sh\n\
         if [ \"$1\" = --version ]; then echo v20.20.2; exit 0; fi\n\
         shift 3\n\
         for f in \"$@\"; do\n\
           printf '{\"file\": \"%s\", \"error\": \"Cannot find package typescript\"}\\n' \"$f\"\n\
         done\n\
         exit 1\n",
    )
    .unwrap();
    let mut perms = std::fs::metadata(&fake).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&fake, perms).unwrap();
    let from = fixture("router").join("billing").display().to_string();
    let node = fake.display().to_string();
    let run_with = |to: &str, json: bool| {
        let mut args = vec!["migrate", "--from", &from, "--to", to, "--node", &node];
        if json {
            args.push("--json");
        }
        agentkit(tmp.path(), &args)
    };
    let run = run_with("billing-json", true);
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    let doc: Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(doc["report"]["node"]["status"], "available", "{doc:#}");
    let project = &doc["report"]["projects"][0];
    assert_eq!(project["modulesLoaded"], 0, "{project:#}");
    assert!(
        project["modulesFailed"].as_u64().unwrap() > 0,
        "{project:#}"
    );
    assert!(
        manual(&doc, "billing-json")
            .iter()
            .any(|m| m.ends_with(": loading the module under Node")),
        "{project:#}"
    );

    let run = run_with("billing", false);
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    let first = run.stdout.lines().next().unwrap();
    assert!(
        first.contains("with Node v20.20.2, but no module loaded (")
            && first.contains("code that must run was not converted"),
        "{}",
        run.stdout
    );
}
