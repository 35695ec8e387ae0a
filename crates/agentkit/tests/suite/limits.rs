//! Fair shares on a real socket: a principal past its request rate or its
//! turns in flight is answered `429` `rate_limited` with `Retry-After`
//! while another principal is served; the routes without auth count per
//! client address; a flood on a webhook channel is cut at the channel's
//! own rate and the API keeps answering meanwhile.

use std::time::{Duration, Instant};

use agentkit::{EdgeOptions, ServeOptions};
use agentkit_test_support::http::{Request, Response};
use serde_json::json;

use super::http::{Server, write};

const ALICE: &str = "token-a";
const BOB: &str = "token-b";
const HOOK: &str = "token-hook";

/// Agent `bot` (multi mode) whose every turn answers after `delay_ms`;
/// alice and bob hold bearer tokens for the API, `monitoring` delivers to
/// the webhook channel `alerts` (`POST /alert` starts a turn).
fn server(edge: EdgeOptions, delay_ms: u64) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("agents/bot/agent");
    write(
        &agent.join("agent.toml"),
        "model = \"scripted:script.json\"\n",
    );
    let turn = format!(r#"{{"steps": [{{"text": "ok", "delayMs": {delay_ms}}}]}}"#);
    let turns = vec![turn.as_str(); 64].join(",");
    write(
        &agent.join("script.json"),
        &format!(r#"{{"turns": [{turns}]}}"#),
    );
    write(&agent.join("instructions.md"), "You are a test agent.\n");
    write(
        &agent.join("channels/http.toml"),
        &format!(
            "kind = \"http\"\nauth = [{{ bearer = {{ tokens = {{ alice = \"{ALICE}\", bob = \"{BOB}\" }} }} }}]\n"
        ),
    );
    write(
        &agent.join("channels/alerts.toml"),
        &format!(
            r#"kind = "webhook"
auth = [{{ bearer = {{ token = "{HOOK}", principal = "monitoring" }} }}]

[[routes]]
method = "POST"
path = "/alert"

[routes.body_schema]
type = "object"

[routes.send]
message = "alert {{{{ body.n }}}}"
title = "alert"
"#
        ),
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let options = super::http::with_scraper(ServeOptions {
        port: 0,
        state_root: Some(dir.path().join("state")),
        edge,
        ..ServeOptions::default()
    });
    let handle = rt
        .block_on(agentkit::serve(&dir.path().join("agents"), options))
        .unwrap();
    Server {
        _dir: dir,
        rt,
        handle: Some(handle),
    }
}

fn assert_limited(r: &Response, max_wait: u64) {
    assert_eq!(r.status, 429, "{}", r.body);
    assert_eq!(r.error_code(), "rate_limited", "{}", r.body);
    let wait: u64 = r
        .header("retry-after")
        .expect("a Retry-After header")
        .parse()
        .unwrap();
    assert!((1..=max_wait).contains(&wait), "Retry-After: {wait}");
}

fn metrics(s: &Server) -> String {
    let r = super::http::scrape(s.addr());
    assert_eq!(r.status, 200, "{}", r.body);
    r.body
}

#[test]
fn a_principal_past_its_rate_is_answered_429_while_another_is_served() {
    let s = server(
        EdgeOptions {
            rate_limit: Some("3/min".parse().unwrap()),
            ..EdgeOptions::default()
        },
        0,
    );
    let list = |token: &str| {
        Request::get("/bot/v1/sessions")
            .bearer(token)
            .send(s.addr())
            .unwrap()
    };
    for _ in 0..3 {
        let r = list(ALICE);
        assert_eq!(r.status, 200, "{}", r.body);
    }
    // One request comes back every 20 s.
    let r = list(ALICE);
    assert_limited(&r, 20);
    assert!(r.body.contains("principal `alice`"), "{}", r.body);
    // Bob has his own share, and the turn routes count against the same one.
    for _ in 0..3 {
        let r = list(BOB);
        assert_eq!(r.status, 200, "{}", r.body);
    }
    let r = Request::post("/bot/v1/session")
        .bearer(BOB)
        .json(&json!({"message": "hi"}))
        .send(s.addr())
        .unwrap();
    assert_limited(&r, 20);
    // A route without auth counts per client address, apart from both.
    for _ in 0..3 {
        let r = Request::get("/v1/health").send(s.addr()).unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
    }
    let r = Request::get("/v1/health").send(s.addr()).unwrap();
    assert_limited(&r, 20);
    assert!(r.body.contains("client address"), "{}", r.body);
    let m = metrics(&s);
    assert!(
        m.contains(r#"agentkit_requests_limited_total{scope="principal"} 2"#),
        "{m}"
    );
    assert!(
        m.contains(r#"agentkit_requests_limited_total{scope="address"} 1"#),
        "{m}"
    );
}

#[test]
fn a_principal_at_its_turns_in_flight_is_answered_429_while_another_starts_turns() {
    let s = server(
        EdgeOptions {
            max_turns_per_principal: Some(1),
            ..EdgeOptions::default()
        },
        3000,
    );
    let start = |token: &str| {
        Request::post("/bot/v1/session")
            .bearer(token)
            .json(&json!({"message": "hi"}))
            .send(s.addr())
            .unwrap()
    };
    let r = start(ALICE);
    assert_eq!(r.status, 200, "{}", r.body);
    let took = Instant::now();
    let r = start(ALICE);
    assert_limited(&r, 1);
    assert!(
        took.elapsed() < Duration::from_secs(2),
        "{:?}",
        took.elapsed()
    );
    assert!(r.body.contains("--max-turns-per-principal"), "{}", r.body);
    // Bob's turn is admitted while alice's runs.
    let r = start(BOB);
    assert_eq!(r.status, 200, "{}", r.body);
    // Other routes stay open to alice.
    let r = Request::get("/bot/v1/sessions")
        .bearer(ALICE)
        .send(s.addr())
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        metrics(&s).contains(r#"agentkit_requests_limited_total{scope="turns"} 1"#),
        "{}",
        metrics(&s)
    );
    // Once her turn settles, alice has her slot back.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = start(ALICE);
        if r.status == 200 {
            break;
        }
        assert_limited(&r, 1);
        assert!(Instant::now() < deadline, "alice was never admitted again");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_flood_on_a_channel_is_cut_at_its_rate_and_the_api_keeps_its_share() {
    let s = server(
        EdgeOptions {
            channel_rate_limit: Some("5/min".parse().unwrap()),
            rate_limit: Some("100/min".parse().unwrap()),
            ..EdgeOptions::default()
        },
        0,
    );
    let addr = s.addr();
    // 4 senders deliver 40 alerts as fast as they are answered.
    let flood: Vec<_> = (0..4)
        .map(|t| {
            std::thread::spawn(move || {
                (0..10)
                    .map(|i| {
                        Request::post("/bot/v1/channels/alerts/alert")
                            .bearer(HOOK)
                            .json(&json!({"n": t * 10 + i}))
                            .send(addr)
                            .unwrap()
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    // Meanwhile alice's API requests are answered at once.
    let mut slowest = Duration::ZERO;
    for i in 0..10 {
        let took = Instant::now();
        let r = if i % 2 == 0 {
            Request::post("/bot/v1/session")
                .bearer(ALICE)
                .json(&json!({"message": "hi"}))
                .send(addr)
                .unwrap()
        } else {
            Request::get("/bot/v1/sessions")
                .bearer(ALICE)
                .send(addr)
                .unwrap()
        };
        assert_eq!(r.status, 200, "{}", r.body);
        slowest = slowest.max(took.elapsed());
    }
    assert!(slowest < Duration::from_secs(2), "slowest {slowest:?}");
    let answers: Vec<Response> = flood.into_iter().flat_map(|t| t.join().unwrap()).collect();
    let accepted = answers.iter().filter(|r| r.status < 300).count();
    let limited: Vec<&Response> = answers.iter().filter(|r| r.status == 429).collect();
    assert_eq!(
        accepted,
        5,
        "{:?}",
        answers.iter().map(|r| r.status).collect::<Vec<_>>()
    );
    assert_eq!(limited.len(), 35);
    for r in &limited {
        assert_limited(r, 12);
        assert!(r.body.contains("channel `alerts`"), "{}", r.body);
    }
    assert!(
        metrics(&s).contains(r#"agentkit_requests_limited_total{scope="channel"} 35"#),
        "{}",
        metrics(&s)
    );
}
