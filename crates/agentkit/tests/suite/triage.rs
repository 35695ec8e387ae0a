//! The triage fixture (`fixtures/triage`) served over loopback, every path
//! through real child processes and the real host bridge: the intake
//! route's handler (allowlist 403, dedupe through kv 409, one session per
//! new alert 200), the chained `call_tool` → `send` approve route with a
//! host-only tool the model is never offered, a refused approval sending
//! nothing, the command schedule's sweep and its last run in `/v1/info`,
//! and the tool environment (`AGENTKIT_CONTINUATION_KEY`, ...).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use agentkit::{EnvLookup, ServeHandle, ServeOptions};
use agentkit_test_support::http::{Request, Response};
use serde_json::{Value, json};

const GRAFANA: &str = "grafana-token-3f9a";
const ONCALL: &str = "oncall-token-81c2";
const FINGERPRINT: &str = "6a4f7c1e2b9d3e80";

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/triage")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

pub(crate) struct Triage {
    pub(crate) dir: tempfile::TempDir,
    rt: tokio::runtime::Runtime,
    handle: Option<ServeHandle>,
}

impl Drop for Triage {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            self.rt.block_on(h.close());
        }
    }
}

impl Triage {
    fn start() -> Triage {
        let dir = tempfile::tempdir().unwrap();
        copy_dir(&fixture(), &dir.path().join("triage"));
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let env = EnvLookup(Arc::new(|name: &str| match name {
            "GRAFANA_TOKEN" => Some(GRAFANA.to_owned()),
            "ONCALL_TOKEN" => Some(ONCALL.to_owned()),
            _ => None,
        }));
        let options = ServeOptions {
            port: 0,
            dev: true,
            state_root: Some(dir.path().join("state")),
            env,
            ..ServeOptions::default()
        };
        let handle = rt
            .block_on(agentkit::serve(&dir.path().join("triage"), options))
            .unwrap();
        Triage {
            dir,
            rt,
            handle: Some(handle),
        }
    }

    fn send(&self, req: Request) -> Response {
        req.send(self.handle.as_ref().unwrap().local_addr())
            .unwrap()
    }

    fn intake(&self, token: &str, body: &Value) -> Response {
        self.send(
            Request::post("/triage/v1/channels/alerts/grafana")
                .bearer(token)
                .json(body),
        )
    }

    fn events(&self, id: &str) -> Vec<Value> {
        let path = self
            .dir
            .path()
            .join(format!("state/triage/sessions/{id}/events.ndjson"));
        let text = std::fs::read_to_string(path).unwrap_or_default();
        // Whole lines only: the server may be writing the last one.
        let whole = text.rfind('\n').map_or("", |end| &text[..end]);
        whole
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    fn of_type(&self, id: &str, t: &str) -> Vec<Value> {
        self.events(id)
            .into_iter()
            .filter(|e| e["type"] == t)
            .collect()
    }

    /// Waits until session `id` has `n` completed turns.
    fn wait_turns(&self, id: &str, n: usize) {
        let start = std::time::Instant::now();
        while self.of_type(id, "turn.completed").len() < n {
            let failed = self.of_type(id, "turn.failed");
            assert!(failed.is_empty(), "{failed:?}");
            assert!(
                start.elapsed() < std::time::Duration::from_secs(60),
                "no {n} completed turns of {id}: {:#?}",
                self.events(id)
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    fn sweep_info(&self) -> Value {
        let info = self.send(Request::get("/triage/v1/info")).json();
        info["schedules"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == "stale-sweep")
            .unwrap()
            .clone()
    }
}

fn alert_payload() -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixture().join("grafana-alert.json")).unwrap())
        .unwrap()
}

fn texts(t: &Triage, id: &str) -> Vec<String> {
    t.of_type(id, "message.received")
        .iter()
        .map(|e| e["data"]["text"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn the_triage_fixture_dedupes_alerts_approves_fixes_and_sweeps_without_workarounds() {
    let t = Triage::start();
    let payload = alert_payload();

    // Another Grafana organisation: the handler's allowlist (the channel's
    // `[state]`) refuses it, and nothing starts.
    let mut foreign = payload.clone();
    foreign["orgId"] = json!(7);
    let r = t.intake(GRAFANA, &foreign);
    assert_eq!(r.status, 403, "{}", r.body);
    assert_eq!(r.json()["error"]["code"], "forbidden");

    // No token, no handler: the channel's auth chain runs first.
    let r = t.send(Request::post("/triage/v1/channels/alerts/grafana").json(&payload));
    assert_eq!(r.status, 401, "{}", r.body);

    // The real payload: one session for the firing alert, the resolved one
    // ignored, started as the principal the route admitted.
    let r = t.intake(GRAFANA, &payload);
    assert_eq!(r.status, 200, "{}", r.body);
    let body = r.json();
    assert_eq!(body["accepted"][0]["fingerprint"], FINGERPRINT, "{body}");
    assert_eq!(body["ignored"], 1);
    assert_eq!(body["by"], "grafana");
    let session = body["accepted"][0]["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    t.wait_turns(&session, 1);
    let started = &t.of_type(&session, "session.started")[0];
    assert_eq!(started["data"]["principalId"], "grafana", "{started}");
    assert_eq!(started["data"]["channel"], "alerts", "{started}");
    assert!(
        texts(&t, &session)[0].starts_with("Alert HighErrorRate on checkout (critical)"),
        "{:?}",
        texts(&t, &session)
    );

    // The offline model called every tool it was offered: the runbook,
    // which saw its session's channel, key and purpose; never the
    // host-only `approve_fix`.
    let calls: Vec<String> = t
        .of_type(&session, "actions.requested")
        .iter()
        .flat_map(|e| e["data"]["calls"].as_array().unwrap().clone())
        .map(|c| c["toolName"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(calls, ["lookup_runbook"]);
    let result = &t.of_type(&session, "action.result")[0]["data"];
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(result["output"]["alert"], FINGERPRINT, "{result}");
    assert_eq!(result["output"]["channel"], "alerts", "{result}");
    assert_eq!(result["output"]["purpose"], "triage", "{result}");

    // Grafana repeats the notification: every firing alert is known, 409
    // naming the session that has it, and no second session.
    let r = t.intake(GRAFANA, &payload);
    assert_eq!(r.status, 409, "{}", r.body);
    assert_eq!(r.json()["duplicates"][0]["sessionId"], session.as_str());

    // Grafana may not approve: the host-only tool refuses, so the chained
    // send never runs.
    let approve = format!("/triage/v1/channels/alerts/alerts/{FINGERPRINT}/approve");
    let r = t.send(
        Request::post(&approve)
            .bearer(GRAFANA)
            .json(&json!({"fix": "roll back"})),
    );
    assert_eq!(r.status, 502, "{}", r.body);
    assert_eq!(r.json()["error"]["code"], "upstream_error");
    assert_eq!(texts(&t, &session).len(), 1);

    // On-call approves: `call_tool approve_fix`, then `send` into the
    // alert's session with the tool's result, answered by the template.
    let r = t.send(
        Request::post(&approve)
            .bearer(ONCALL)
            .json(&json!({"fix": "roll back checkout to v41"})),
    );
    // 202: the send's own status (the turn runs after the answer).
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(
        r.json(),
        json!({"ok": true, "sessionId": session, "change": "CHG-6A4F7C"})
    );
    t.wait_turns(&session, 2);
    assert_eq!(
        texts(&t, &session)[1],
        "Fix approved by oncall: roll back checkout to v41 (change CHG-6A4F7C). Confirm what will be applied."
    );
    // Approved once: a second approval is refused by the tool.
    let r = t.send(
        Request::post(&approve)
            .bearer(ONCALL)
            .json(&json!({"fix": "again"})),
    );
    assert_eq!(r.status, 502, "{}", r.body);

    // The host-only tool is callable over the API as well (and refuses an
    // unknown alert there too, as an error result).
    let r = t.send(Request::post("/triage/v1/tools/approve_fix").json(
        &json!({"input": {"fingerprint": "ffffffffffffffff", "fix": "x", "approver": "local"}}),
    ));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["isError"], true, "{}", r.body);
    assert!(
        r.json()["result"]
            .as_str()
            .unwrap()
            .contains("no open alert ffffffffffffffff"),
        "{}",
        r.body
    );
}

#[test]
fn the_sweep_schedule_sends_into_open_alerts_and_reports_its_last_run() {
    let t = Triage::start();
    assert_eq!(t.sweep_info()["lastRun"], Value::Null);
    // Nothing open: the run succeeds and reaches no session.
    let r = t.send(Request::post("/triage/v1/dev/schedules/stale-sweep"));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["sessionIds"], json!([]));
    assert_eq!(r.json()["lastRun"]["outcome"], "ok", "{}", r.body);

    let r = t.intake(GRAFANA, &alert_payload());
    assert_eq!(r.status, 200, "{}", r.body);
    let session = r.json()["accepted"][0]["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    t.wait_turns(&session, 1);

    // The sweep's command sends a follow-up into the open alert's session
    // through the bridge; the dispatch answers that session.
    let r = t.send(Request::post("/triage/v1/dev/schedules/stale-sweep"));
    assert_eq!(r.status, 200, "{}", r.body);
    let body = r.json();
    assert_eq!(body["sessionIds"], json!([session]), "{body}");
    let run = &body["lastRun"];
    assert_eq!(run["outcome"], "ok", "{body}");
    assert_eq!(run["trigger"], "dispatch", "{body}");
    assert!(run["finishedAt"].is_string(), "{body}");
    t.wait_turns(&session, 2);
    assert!(
        texts(&t, &session)[1].starts_with(&format!(
            "Sweep (by hand): alert {FINGERPRINT} still has no approved fix"
        )),
        "{:?}",
        texts(&t, &session)
    );

    // `/v1/info` shows the same run, and counts the dispatch as a firing.
    let info = t.sweep_info();
    assert_eq!(info["lastRun"], body["lastRun"], "{info}");
    assert_eq!(info["lastFiredAt"], body["lastRun"]["at"], "{info}");
}
