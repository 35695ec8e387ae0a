//! Hooks through a real server: a command hook (event JSON on stdin,
//! appended to a file), a URL hook (a local HTTP receiver checking the
//! HMAC signature) and a Rust hook all receive every event of a turn, in
//! order; a failing hook and a hook that outlives its timeout are counted
//! and never hold up the turn.

use std::sync::{Arc, Mutex};

use agentkit::{EnvLookup, ServeOptions};
use agentkit_runtime::HookSpec;
use agentkit_test_support::http::Request;
use hmac::{KeyInit, Mac};
use serde_json::{Value, json};

use super::time::{Host, SCRIPT, at, wait_until};

type Received = Arc<Mutex<Vec<(Option<String>, Vec<u8>)>>>;

/// A local receiver: records the signature header and body of each POST.
fn receiver(rt: &tokio::runtime::Runtime) -> (String, Received) {
    let got: Received = Arc::default();
    let got2 = got.clone();
    let app = axum::Router::new().route(
        "/events",
        axum::routing::post(
            move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                let got = got2.clone();
                async move {
                    let sig = headers
                        .get("x-agentkit-signature")
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_owned);
                    got.lock().unwrap().push((sig, body.to_vec()));
                    "ok"
                }
            },
        ),
    );
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    rt.spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/events"), got)
}

fn key(e: &Value) -> (String, u64) {
    (
        e["type"].as_str().unwrap().to_owned(),
        e["index"].as_u64().unwrap(),
    )
}

#[test]
fn hooks_of_every_kind_receive_every_event_of_a_turn_in_order() {
    let mut h = Host::new(SCRIPT, &[], at(12, 0, 0));
    let (url, got) = receiver(&h.rt);
    let out = h.dir.path().join("cmd.ndjson");
    let hooks = h.agent_dir().join("hooks");
    super::time::write(
        &hooks.join("audit.toml"),
        &format!(
            "events = [\"*\"]\ncommand = [\"sh\", \"-c\", \"cat >> '{}'\"]\n",
            out.display()
        ),
    );
    super::time::write(
        &hooks.join("forward.toml"),
        &format!("events = [\"*\"]\nurl = \"{url}\"\nsecret = \"${{HOOK_SECRET}}\"\n"),
    );
    super::time::write(
        &hooks.join("broken.toml"),
        "events = [\"turn.completed\"]\ncommand = [\"sh\", \"-c\", \"echo boom >&2; exit 3\"]\n",
    );
    super::time::write(
        &hooks.join("slow.toml"),
        "events = [\"turn.started\"]\ncommand = [\"sleep\", \"30\"]\ntimeout = \"200ms\"\n",
    );
    let seen: Arc<Mutex<Vec<Value>>> = Arc::default();
    let seen2 = seen.clone();
    h.start(ServeOptions {
        env: EnvLookup(Arc::new(|n| {
            (n == "HOOK_SECRET").then(|| "s3cret".to_owned())
        })),
        hooks: vec![HookSpec::rust("rust", &["*"], move |e| {
            let seen = seen2.clone();
            async move {
                seen.lock()
                    .unwrap()
                    .push(serde_json::to_value(&*e).unwrap());
            }
        })],
        ..Default::default()
    });
    let r = h.send(Request::post("/bot/v1/session").json(&json!({"message": "hi"})));
    assert_eq!(r.status, 200, "{}", r.body);
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    wait_until("the turn", || {
        h.types(&id).last().map(String::as_str) == Some("session.waiting")
    });
    let expected: Vec<(String, u64)> = h.events(&id).iter().map(key).collect();
    assert!(expected.len() >= 6, "{expected:?}");

    let from_file = || -> Vec<Value> {
        std::fs::read_to_string(&out)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    wait_until("the command hook", || from_file().len() >= expected.len());
    wait_until("the URL hook", || {
        got.lock().unwrap().len() >= expected.len()
    });
    wait_until("the Rust hook", || {
        seen.lock().unwrap().len() >= expected.len()
    });

    let file: Vec<(String, u64)> = from_file().iter().map(key).collect();
    assert_eq!(file, expected);
    let rust: Vec<(String, u64)> = seen.lock().unwrap().iter().map(key).collect();
    assert_eq!(rust, expected);
    let posted = got.lock().unwrap().clone();
    let mut via_url = Vec::new();
    for (sig, body) in &posted {
        let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(b"s3cret").unwrap();
        mac.update(body);
        let want = format!("sha256={}", hex::encode(mac.finalize().into_bytes()));
        assert_eq!(sig.as_deref(), Some(want.as_str()));
        via_url.push(key(&serde_json::from_slice(body).unwrap()));
    }
    assert_eq!(via_url, expected);
    // The whole event, not a summary.
    assert_eq!(from_file()[0]["sessionId"], id.as_str());
    assert_eq!(from_file()[0]["data"]["channel"], "http");

    // Failing and slow hooks are counted, and the session went on.
    let stat = |name: &str, field: &str| {
        h.send(Request::get("/bot/v1/info")).json()["hooks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap()[field]
            .as_u64()
            .unwrap()
    };
    wait_until("the broken hook's failure", || {
        stat("broken", "failed") == 1
    });
    wait_until("the slow hook's timeout", || stat("slow", "failed") == 1);
    assert_eq!(stat("audit", "failed"), 0);
    // The counter moves once the command has exited, after its output.
    wait_until("the audit hook's count", || {
        stat("audit", "delivered") == expected.len() as u64
    });
    assert_eq!(stat("forward", "dropped"), 0);
}
