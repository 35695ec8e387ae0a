//! `agentkit replay` and `agentkit eval add` as child processes against a
//! served project and the mock provider: a stored session replays
//! identically offline (from the server or from a saved log), diverges
//! with a short diff after an instructions change, and becomes an eval
//! case whose recordings pass `agentkit eval --replay` on the unchanged
//! project and fail on the changed one.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use agentkit_test_support::http::Request;
use agentkit_test_support::process::{ServerProcess, free_port};
use agentkit_test_support::provider::{MockProvider, Step};
use serde_json::json;

use super::agentkit_with;

const INSTRUCTIONS: &str = "You describe workspaces.\n";

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn serve(root: &Path, mock: &MockProvider) -> ServerProcess {
    let port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_agentkit"))
        .args([
            "serve",
            "--dir",
            "proj",
            "--dev",
            "--state-root",
            "state",
            "--port",
        ])
        .arg(port.to_string())
        .current_dir(root)
        .env("NO_COLOR", "1")
        .env("OPENAI_BASE_URL", mock.openai_base_url())
        .env("OPENAI_API_KEY", "sk-test")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    ServerProcess::healthy(child, port, Duration::from_secs(30))
}

/// Sends `message` (new session, or a follow-up) and reads until the
/// session waits again.
fn turn(server: &ServerProcess, session: Option<(&str, &str)>, message: &str) -> (String, String) {
    let (path, body, start) = match session {
        None => (
            "/proj/v1/session".to_owned(),
            json!({"message": message}),
            0,
        ),
        Some((id, token)) => {
            let n = Request::get(&format!("/proj/v1/session/{id}/events"))
                .send(server.addr)
                .unwrap()
                .body
                .lines()
                .count();
            (
                format!("/proj/v1/session/{id}"),
                json!({"message": message, "continuationToken": token}),
                n,
            )
        }
    };
    let r = Request::post(&path).json(&body).send(server.addr).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    let token = r.json()["continuationToken"].as_str().unwrap().to_owned();
    let mut lines = Request::get(&format!("/proj/v1/session/{id}/stream?startIndex={start}"))
        .stream(server.addr)
        .unwrap();
    let mut started = false;
    while let Some(e) = lines.next_json().unwrap() {
        started |= e["type"] == "turn.started";
        // A parked call is approved, as a person would.
        if e["type"] == "action.approval_requested" {
            let call = e["data"]["callId"].as_str().unwrap();
            let r = Request::post(&format!("/proj/v1/session/{id}/approvals/{call}"))
                .json(&json!({"decision": "approve"}))
                .send(server.addr)
                .unwrap();
            assert_eq!(r.status, 200, "{}", r.body);
        }
        if started && e["type"] == "session.waiting" {
            break;
        }
    }
    (id, token)
}

/// No key and nothing listening: any provider call would fail.
fn offline(c: &mut Command) {
    c.env("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
        .env_remove("OPENAI_API_KEY");
}

#[test]
fn a_stored_session_replays_and_becomes_an_eval_case() {
    let mock = MockProvider::start(vec![
        Step::new()
            .call("c1", "list", &json!({"path": "."}))
            .tokens(120, 10, 0, 0)
            .into(),
        Step::text("The workspace holds notes.txt.")
            .tokens(160, 12, 0, 0)
            .into(),
        Step::text("You are welcome.").tokens(180, 5, 0, 0).into(),
        // A second session: a call that waits for approval.
        Step::new()
            .call("s1", "stamp", &json!({"note": "milk"}))
            .tokens(100, 8, 0, 0)
            .into(),
        Step::text("Stamped.").tokens(130, 3, 0, 0).into(),
    ]);
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    write(
        root,
        "proj/agent/agent.toml",
        "model = \"openai:gpt-mock\"\n[harness]\nbuiltin_tools = [\"list\"]\n",
    );
    write(root, "proj/agent/instructions.md", INSTRUCTIONS);
    write(
        root,
        "proj/agent/sandbox/workspace/notes.txt",
        "remember the milk\n",
    );
    write(
        root,
        "proj/agent/tools/stamp.toml",
        "description = \"Stamp a note\"\ncommand = [\"python3\", \"stamp.py\"]\nneeds_approval = true\n[input_schema]\ntype = \"object\"\n",
    );
    write(
        root,
        "proj/agent/tools/stamp.py",
        "import json, sys\nprint(json.dumps({\"stamped\": json.load(sys.stdin)[\"note\"]}))\n",
    );
    let server = serve(root, &mock);
    let (id, token) = turn(&server, None, "What is in the workspace?");
    turn(&server, Some((&id, &token)), "Thanks!");
    assert_eq!(mock.requests().len(), 3);
    let url = format!("http://{}/proj", server.addr);
    let events = Request::get(&format!("/proj/v1/session/{id}/events"))
        .send(server.addr)
        .unwrap()
        .body;
    write(root, "session.ndjson", &events);

    // From the server, then from the saved log: identical, offline.
    let run = agentkit_with(
        root,
        &["replay", "--url", &url, "--session", &id, "--dir", "proj"],
        offline,
    );
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.starts_with("identical:"), "{}", run.stdout);
    let run = agentkit_with(
        root,
        &["replay", "--events", "session.ndjson", "--dir", "proj"],
        offline,
    );
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    // Tools run live: the listing is the same, so is everything else.
    let run = agentkit_with(
        root,
        &[
            "replay",
            "--events",
            "session.ndjson",
            "--dir",
            "proj",
            "--live-tools",
        ],
        offline,
    );
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(mock.requests().len(), 3, "a replay called the provider");

    // The session as an eval case, with its recordings.
    let run = agentkit_with(
        root,
        &[
            "eval",
            "add",
            "--url",
            &url,
            "--session",
            &id,
            "--name",
            "kept",
            "--dir",
            "proj",
        ],
        offline,
    );
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let case = std::fs::read_to_string(root.join("proj/evals/kept.eval.toml")).unwrap();
    assert!(
        case.contains("send = \"What is in the workspace?\""),
        "{case}"
    );
    assert!(case.contains("called_tool = [\"list\"]"), "{case}");
    let recordings = std::fs::read_dir(root.join("proj/evals/cassettes"))
        .unwrap()
        .count();
    assert_eq!(recordings, 3);
    let eval = |root: &Path| {
        agentkit_with(
            root,
            &[
                "eval",
                "--dir",
                "proj",
                "--no-stream",
                "--replay",
                "proj/evals/cassettes",
                "kept",
            ],
            offline,
        )
    };
    let run = eval(root);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);

    // The same from the dev route (the playground's "save as eval case"):
    // the same case and recordings, a second time refused, a bad name too.
    let add = |name: &str| {
        Request::post("/proj/v1/dev/evals/cases")
            .json(&json!({"sessionId": id, "name": name}))
            .send(server.addr)
            .unwrap()
    };
    let r = add("kept-http");
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["recordings"], 3, "{}", r.body);
    let over_http = std::fs::read_to_string(root.join("proj/evals/kept-http.eval.toml")).unwrap();
    assert_eq!(over_http, case);
    assert_eq!(add("kept-http").status, 409);
    assert_eq!(add("../escape").status, 400);
    assert!(!root.join("proj/escape.eval.toml").exists());

    // The instructions change: the replay diverges at the first step's
    // request, and the eval case no longer replays.
    write(root, "proj/agent/instructions.md", "You answer in haiku.\n");
    let run = agentkit_with(
        root,
        &["replay", "--events", "session.ndjson", "--dir", "proj"],
        offline,
    );
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout
            .contains("(step.started) differs at /data/request/system"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("the system prompt"), "{}", run.stdout);
    assert!(
        run.stdout.lines().count() < 8,
        "a short diff: {}",
        run.stdout
    );
    let run = eval(root);
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);

    // A call parked for approval is decided on replay as it was.
    write(root, "proj/agent/instructions.md", INSTRUCTIONS);
    let (stamped, _) = turn(&server, None, "Stamp the milk note.");
    let events = Request::get(&format!("/proj/v1/session/{stamped}/events"))
        .send(server.addr)
        .unwrap()
        .body;
    assert!(events.contains("\"stamped\":\"milk\""), "{events}");
    write(root, "stamped.ndjson", &events);
    for live in [false, true] {
        let mut args = vec!["replay", "--events", "stamped.ndjson", "--dir", "proj"];
        if live {
            args.push("--live-tools");
        }
        let run = agentkit_with(root, &args, offline);
        assert_eq!(run.code, 0, "live {live}: {}\n{}", run.stdout, run.stderr);
    }

    // A live model (the mock, which now answers otherwise): where the new
    // run departs from the recorded one.
    mock.push([Step::text("No stamp is needed.").into()]);
    let before = mock.requests().len();
    let run = agentkit_with(
        root,
        &[
            "replay",
            "--events",
            "stamped.ndjson",
            "--dir",
            "proj",
            "--model",
            "openai:gpt-mock",
        ],
        |c| {
            c.env("OPENAI_BASE_URL", mock.openai_base_url())
                .env("OPENAI_API_KEY", "sk-test");
        },
    );
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(mock.requests().len(), before + 1);
    assert!(
        run.stdout.contains("(message.completed) differs at /data/"),
        "{}",
        run.stdout
    );

    // A session that is not there, and no source at all.
    let run = agentkit_with(
        root,
        &[
            "replay",
            "--url",
            &url,
            "--session",
            "ses_missing",
            "--dir",
            "proj",
        ],
        offline,
    );
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    let run = agentkit_with(root, &["replay", "--dir", "proj"], offline);
    assert_eq!(run.code, 2, "{}", run.stderr);
}

/// A channel route whose handler appends assistant text to a session
/// through the host bridge (a turn with `kind: "emitted"`).
const DESK: &str = r#"kind = "webhook"
auth = [{ bearer = { token = "desk-token", principal = "desk" } }]
[[routes]]
method = "POST"
path = "/say"
[routes.body_schema]
type = "object"
required = ["session", "text"]
[routes.handler]
command = ["python3", "lib/say.py"]
"#;

const SAY_PY: &str = r#"import json, os, sys, urllib.request
req = json.load(sys.stdin)
body = json.dumps({"text": req["body"]["text"]}).encode()
r = urllib.request.Request(os.environ["AGENTKIT_HOST_URL"] + "/v1/sessions/" + req["body"]["session"] + "/messages",
    method="POST", data=body,
    headers={"authorization": "Bearer " + os.environ["AGENTKIT_HOST_TOKEN"], "content-type": "application/json"})
with urllib.request.urlopen(r, timeout=10) as answer:
    print(json.dumps({"status": 200, "body": json.loads(answer.read())}))
"#;

/// Reads session `id`'s stream from `start` until `done` holds for an
/// event; answers the events read.
fn stream_until(
    server: &ServerProcess,
    id: &str,
    start: usize,
    mut done: impl FnMut(&serde_json::Value) -> bool,
) -> Vec<serde_json::Value> {
    let mut lines = Request::get(&format!("/proj/v1/session/{id}/stream?startIndex={start}"))
        .stream(server.addr)
        .unwrap();
    let mut seen = Vec::new();
    while let Some(e) = lines.next_json().unwrap() {
        let stop = done(&e);
        seen.push(e);
        if stop {
            return seen;
        }
    }
    panic!("the stream ended: {seen:?}");
}

fn events_of(server: &ServerProcess, id: &str) -> String {
    Request::get(&format!("/proj/v1/session/{id}/events"))
        .send(server.addr)
        .unwrap()
        .body
}

#[test]
fn emitted_and_restart_resumed_turns_replay() {
    let mock = MockProvider::start(vec![
        Step::text("Hello, I watch your builds.").into(),
        Step::text("Glad it is green.").into(),
        // A second session: a call parked for approval, then a kill.
        Step::new()
            .call("s1", "stamp", &json!({"note": "milk"}))
            .into(),
        Step::text("Stamped.").into(),
    ]);
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    write(
        root,
        "proj/agent/agent.toml",
        "model = \"openai:gpt-mock\"\n",
    );
    write(root, "proj/agent/instructions.md", INSTRUCTIONS);
    write(root, "proj/agent/channels/desk.toml", DESK);
    write(root, "proj/agent/lib/say.py", SAY_PY);
    write(
        root,
        "proj/agent/tools/stamp.toml",
        "description = \"Stamp a note\"\ncommand = [\"python3\", \"stamp.py\"]\nneeds_approval = true\n[input_schema]\ntype = \"object\"\n",
    );
    write(
        root,
        "proj/agent/tools/stamp.py",
        "import json, sys\nprint(json.dumps({\"stamped\": json.load(sys.stdin)[\"note\"]}))\n",
    );

    // A turn, the channel's emitted text, a follow-up.
    let mut server = serve(root, &mock);
    let (id, token) = turn(&server, None, "Hi");
    let r = Request::post("/proj/v1/channels/desk/say")
        .bearer("desk-token")
        .json(&json!({"session": id, "text": "Your build 42 is green."}))
        .send(server.addr)
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    turn(&server, Some((&id, &token)), "Thanks!");
    let events = events_of(&server, &id);
    assert!(events.contains("\"kind\":\"emitted\""), "{events}");
    write(root, "emitted.ndjson", &events);

    // A call parked for approval; the server is killed (no shutdown),
    // served again, and the call approved: a turn resumes.
    let r = Request::post("/proj/v1/session")
        .json(&json!({"message": "Stamp the milk note."}))
        .send(server.addr)
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let stamped = r.json()["sessionId"].as_str().unwrap().to_owned();
    let parked = stream_until(&server, &stamped, 0, |e| {
        e["type"] == "action.approval_requested"
    });
    let call = parked.last().unwrap()["data"]["callId"]
        .as_str()
        .unwrap()
        .to_owned();
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    let server = serve(root, &mock);
    let r = Request::post(&format!("/proj/v1/session/{stamped}/approvals/{call}"))
        .json(&json!({"decision": "approve"}))
        .send(server.addr)
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["resumed"], true, "{}", r.body);
    let mut resumed = false;
    stream_until(&server, &stamped, 0, |e| {
        resumed |= e["type"] == "turn.started" && e["data"]["resumes"].is_string();
        resumed && e["type"] == "session.waiting"
    });
    let events = events_of(&server, &stamped);
    assert!(events.contains("\"reason\":\"restart\""), "{events}");
    assert!(events.contains("\"stamped\":\"milk\""), "{events}");
    write(root, "resumed.ndjson", &events);
    assert_eq!(mock.requests().len(), 4);
    drop(server);

    // Both replay identically, offline; the resumed one with its tool
    // run live too.
    for args in [
        &["replay", "--events", "emitted.ndjson", "--dir", "proj"][..],
        &["replay", "--events", "resumed.ndjson", "--dir", "proj"],
        &[
            "replay",
            "--events",
            "resumed.ndjson",
            "--dir",
            "proj",
            "--live-tools",
        ],
    ] {
        let run = agentkit_with(root, args, offline);
        assert_eq!(run.code, 0, "{args:?}: {}\n{}", run.stdout, run.stderr);
        assert!(run.stdout.starts_with("identical:"), "{}", run.stdout);
    }
    assert_eq!(mock.requests().len(), 4, "a replay called the provider");

    // The emitted text is part of what the next turn sent: a changed
    // instruction shows at the first step, in a short diff.
    write(root, "proj/agent/instructions.md", "You answer in haiku.\n");
    let run = agentkit_with(
        root,
        &["replay", "--events", "emitted.ndjson", "--dir", "proj"],
        offline,
    );
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout
            .contains("(step.started) differs at /data/request/system"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.lines().count() < 8,
        "a short diff: {}",
        run.stdout
    );
}

/// The first message's text of a provider request (the system prompt).
fn system_of(body: &serde_json::Value) -> &str {
    body["messages"][0]["content"].as_str().unwrap_or("")
}

#[test]
fn eval_add_keeps_compactions_subagents_and_approvals() {
    let long_reply = format!("Noted. {}", "r".repeat(1500));
    let mock = MockProvider::responding(move |body| {
        let system = system_of(body);
        if system.starts_with("You compact a conversation") {
            return Step::text("Earlier: the user sent notes.").into();
        }
        if system.starts_with("You count things.") {
            return Step::text("Three.").tokens(50, 2, 0, 0).into();
        }
        let messages = body["messages"].as_array().unwrap();
        let last = messages.last().unwrap();
        let content = last["content"].as_str().unwrap_or("");
        if last["role"] == "tool" {
            let text = if content.contains("stamped") {
                "Stamped."
            } else if content.contains("denied") {
                "Not stamped."
            } else {
                "The helper counted three."
            };
            return Step::text(text).tokens(90, 4, 0, 0).into();
        }
        if content.starts_with("Stamp") {
            return Step::new()
                .call("s1", "stamp", &json!({"note": "milk"}))
                .tokens(80, 6, 0, 0)
                .into();
        }
        if content.starts_with("Delegate") {
            return Step::new()
                .call(
                    "d1",
                    "task",
                    &json!({"subagent": "helper", "prompt": "count the notes"}),
                )
                .tokens(80, 6, 0, 0)
                .into();
        }
        Step::text(&long_reply).tokens(400, 300, 0, 0).into()
    });
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    write(
        root,
        "proj/agent/agent.toml",
        "[model]\nprovider = \"openai\"\nid = \"gpt-mock\"\ncontext_window = 4000\nmax_output_tokens = 500\n[harness]\nbuiltin_tools = []\n",
    );
    write(root, "proj/agent/instructions.md", INSTRUCTIONS);
    write(
        root,
        "proj/agent/subagents/helper/agent.toml",
        "description = \"Counts things\"\n[harness]\nbuiltin_tools = []\n",
    );
    write(
        root,
        "proj/agent/subagents/helper/instructions.md",
        "You count things.\n",
    );
    write(
        root,
        "proj/agent/tools/stamp.toml",
        "description = \"Stamp a note\"\ncommand = [\"python3\", \"stamp.py\"]\nneeds_approval = true\n[input_schema]\ntype = \"object\"\n",
    );
    write(
        root,
        "proj/agent/tools/stamp.py",
        "import json, sys\nprint(json.dumps({\"stamped\": json.load(sys.stdin)[\"note\"]}))\n",
    );
    let server = serve(root, &mock);
    let url = format!("http://{}/proj", server.addr);

    // Long notes until the conversation is compacted.
    let (compacted, mut token) = turn(&server, None, &format!("Note 0: {}", "m".repeat(1500)));
    let mut n = 1;
    while !events_of(&server, &compacted).contains("\"context.compacted\"") {
        assert!(n < 12, "the session never compacted");
        token = turn(
            &server,
            Some((&compacted, &token)),
            &format!("Note {n}: {}", "m".repeat(1500)),
        )
        .1;
        n += 1;
    }
    // A delegation to the subagent; a call approved by a person.
    let (delegated, _) = turn(&server, None, "Delegate the counting.");
    assert!(events_of(&server, &delegated).contains("\"subagent.completed\""));
    let (approved, _) = turn(&server, None, "Stamp the milk note.");
    assert!(events_of(&server, &approved).contains("\"stamped\":\"milk\""));

    let add = |session: &str, name: &str| {
        let run = agentkit_with(
            root,
            &[
                "eval",
                "add",
                "--url",
                &url,
                "--session",
                session,
                "--name",
                name,
                "--dir",
                "proj",
            ],
            offline,
        );
        assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
        assert!(!run.stdout.contains("warning:"), "{}", run.stdout);
    };
    add(&compacted, "compacted");
    add(&delegated, "delegated");
    add(&approved, "approved");
    let case = std::fs::read_to_string(root.join("proj/evals/approved.eval.toml")).unwrap();
    assert!(
        case.contains("approvals = [{ tool = \"stamp\", approve = true }]"),
        "{case}"
    );
    // The one-step subagent's answer is in the log: the session replays.
    write(root, "delegated.ndjson", &events_of(&server, &delegated));
    drop(server);
    let requests = mock.requests().len();
    let run = agentkit_with(
        root,
        &["replay", "--events", "delegated.ndjson", "--dir", "proj"],
        offline,
    );
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);

    let eval = |case: &str| {
        agentkit_with(
            root,
            &[
                "eval",
                "--dir",
                "proj",
                "--no-stream",
                "--replay",
                "proj/evals/cassettes",
                case,
            ],
            offline,
        )
    };
    // Each passes offline on the unchanged project.
    for case in ["compacted", "delegated", "approved"] {
        let run = eval(case);
        assert_eq!(run.code, 0, "{case}: {}\n{}", run.stdout, run.stderr);
    }
    assert_eq!(
        mock.requests().len(),
        requests,
        "an eval called the provider"
    );

    // A call denied where the session approved it departs from the
    // recordings.
    let denied = case.replace("approve = true", "approve = false");
    write(root, "proj/evals/approved.eval.toml", &denied);
    let run = eval("approved");
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    write(root, "proj/evals/approved.eval.toml", &case);

    // The subagent's instructions change: only its case fails.
    write(
        root,
        "proj/agent/subagents/helper/instructions.md",
        "You count things twice.\n",
    );
    let run = eval("delegated");
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(eval("approved").code, 0);
    write(
        root,
        "proj/agent/subagents/helper/instructions.md",
        "You count things.\n",
    );

    // A smaller window compacts elsewhere: the summary request differs.
    write(
        root,
        "proj/agent/agent.toml",
        "[model]\nprovider = \"openai\"\nid = \"gpt-mock\"\ncontext_window = 3000\nmax_output_tokens = 500\n[harness]\nbuiltin_tools = []\n",
    );
    let run = eval("compacted");
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
}
