//! The Slack pack end to end against a real server and a mock Slack
//! (`agentkit_test_support::slack`: the Web API over HTTP and a Socket
//! Mode WebSocket server, speaking Slack's payloads): Events API
//! signatures checked before parsing, `url_verification`, durable
//! `event_id` dedupe across redeliveries and restarts, threaded sessions
//! with streamed replies (429s waited out, long answers rolled over with
//! no lost text), Socket Mode acknowledgements and reconnects, channel
//! watch, refused guests, approvals clicked in Slack, and idle channels.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentkit::{EnvLookup, ServeHandle, ServeOptions};
use agentkit_protocol::api::{ChannelState, PackInfo, SlackMode};
use agentkit_test_support::http::{Request, Response};
use agentkit_test_support::slack::{
    BOT_USER, MockSlack, Posted, TEAM, app_mention, block_actions, event_callback, message,
};
use hmac::{KeyInit, Mac};
use serde_json::{Value, json};

const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
const WAIT: Duration = Duration::from_secs(30);

const ANSWER: &str = "It is sunny in Paris, 21 degrees, with a light breeze from the west.";

/// A project with one agent `bot` on a scripted model, its channel files,
/// served over a fresh or reused state folder.
struct Host {
    dir: tempfile::TempDir,
    rt: tokio::runtime::Runtime,
    handle: Option<ServeHandle>,
    env: Vec<(String, String)>,
}

impl Host {
    fn new(script: &str, files: &[(&str, &str)], env: &[(&str, &str)]) -> Host {
        let dir = tempfile::tempdir().unwrap();
        let agent = dir.path().join("agents/bot/agent");
        write(
            &agent.join("agent.toml"),
            "model = \"scripted:script.json\"\n",
        );
        write(&agent.join("instructions.md"), "You are a test agent.\n");
        write(&agent.join("script.json"), script);
        for (rel, text) in files {
            write(&agent.join(rel), text);
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let mut host = Host {
            dir,
            rt,
            handle: None,
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        };
        host.start();
        host
    }

    fn start(&mut self) {
        let vars = self.env.clone();
        let options = ServeOptions {
            port: 0,
            state_root: Some(self.state()),
            env: EnvLookup(Arc::new(move |name| {
                vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
            })),
            ..ServeOptions::default()
        };
        let handle = self
            .rt
            .block_on(agentkit::serve(&self.dir.path().join("agents"), options))
            .unwrap();
        self.handle = Some(handle);
    }

    fn restart(&mut self) {
        if let Some(h) = self.handle.take() {
            self.rt.block_on(h.close());
        }
        self.start();
    }

    fn state(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    fn send(&self, req: Request) -> Response {
        req.send(self.handle.as_ref().unwrap().local_addr())
            .unwrap()
    }

    /// Every session's `message.received` texts, by session.
    fn received(&self) -> Vec<(String, Vec<String>)> {
        received_in(&self.state())
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            self.rt.block_on(h.close());
        }
    }
}

fn received_in(state: &Path) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    let Ok(dirs) = std::fs::read_dir(state.join("bot/sessions")) else {
        return out;
    };
    for d in dirs.flatten() {
        let log = std::fs::read_to_string(d.path().join("events.ndjson")).unwrap_or_default();
        let texts = log
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|e| e["type"] == "message.received")
            .map(|e| e["data"]["text"].as_str().unwrap_or("").to_owned())
            .collect();
        out.push((d.file_name().to_string_lossy().into_owned(), texts));
    }
    out.sort();
    out
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn script(text: &str) -> String {
    json!({"turns": [{"steps": [{"text": text}]}]}).to_string()
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// `v0=` HMAC-SHA256 of `v0:{ts}:{body}`, computed here, not by the code
/// under test.
fn signature(secret: &str, ts: i64, body: &[u8]) -> String {
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(format!("v0:{ts}:").as_bytes());
    mac.update(body);
    format!("v0={}", hex::encode(mac.finalize().into_bytes()))
}

fn signed(path: &str, body: &[u8], content_type: &str, ts: i64, secret: &str) -> Request {
    Request::post(path)
        .header("content-type", content_type)
        .header("x-slack-request-timestamp", &ts.to_string())
        .header("x-slack-signature", &signature(secret, ts, body))
        .raw_body(body)
}

fn event_request(path: &str, envelope: &Value) -> Request {
    let body = envelope.to_string();
    signed(path, body.as_bytes(), "application/json", now(), SECRET)
}

/// The final text of the bot's replies in a thread, joined.
fn thread_text(mock: &MockSlack, channel: &str, ts: &str) -> String {
    mock.thread(channel, ts)
        .iter()
        .map(|m| m.text.clone())
        .collect::<String>()
}

fn wait_for_text(mock: &MockSlack, channel: &str, ts: &str, want: &str) {
    mock.wait_until(&format!("`{want}` in thread {channel}/{ts}"), WAIT, |m| {
        thread_text(m, channel, ts).contains(want)
    });
}

/// Waits a moment for something that must not happen.
fn settle() {
    std::thread::sleep(Duration::from_millis(700));
}

fn events_channel(extra: &str) -> String {
    format!(
        "kind = \"slack\"\nmode = \"events\"\napi_url = \"${{SLACK_API_URL}}\"\nupdate_interval = \"50ms\"\n{extra}"
    )
}

fn socket_channel(extra: &str) -> String {
    format!(
        "kind = \"slack\"\napi_url = \"${{SLACK_API_URL}}\"\nupdate_interval = \"50ms\"\n{extra}"
    )
}

#[test]
fn events_api_checks_signatures_first_dedupes_durably_and_streams_threaded_replies() {
    let mock = MockSlack::start();
    // A workspace without Slack's streaming methods: replies fall back to
    // posting and editing.
    mock.disable_streaming();
    let api = mock.api_url();
    let channel = events_channel(
        "[[assistant.suggested_prompts]]\ntitle = \"Today\"\nmessage = \"What is the weather today?\"\n",
    );
    let mut host = Host::new(
        &script(ANSWER),
        &[("channels/slack.toml", &channel)],
        &[
            ("SLACK_BOT_TOKEN", "xoxb-test"),
            ("SLACK_SIGNING_SECRET", SECRET),
            ("SLACK_API_URL", &api),
        ],
    );
    let path = "/bot/v1/channels/slack";

    // Signatures: wrong, stale, missing, or for another body: 401, and a
    // body that is not even JSON is refused before it is parsed.
    let challenge = json!({"token": "x", "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P", "type": "url_verification"});
    let body = challenge.to_string();
    for (ts, secret) in [
        (now(), "wrong"),
        (now() - 301, SECRET),
        (now() + 400, SECRET),
    ] {
        let r = host.send(signed(
            path,
            body.as_bytes(),
            "application/json",
            ts,
            secret,
        ));
        assert_eq!(r.status, 401, "{ts}: {}", r.body);
    }
    let r = host.send(
        Request::post(path)
            .header("content-type", "application/json")
            .raw_body(body.as_bytes()),
    );
    assert_eq!(r.status, 401);
    let r = host.send(signed(
        path,
        b"{not json",
        "application/json",
        now(),
        "wrong",
    ));
    assert_eq!(r.status, 401, "{}", r.body);
    let mut tampered = signed(path, body.as_bytes(), "application/json", now(), SECRET);
    tampered = tampered.raw_body(body.replace("3eZ", "4eZ").as_bytes());
    assert_eq!(host.send(tampered).status, 401);
    // A signed check four minutes old still passes; url_verification
    // answers the challenge.
    let r = host.send(signed(
        path,
        body.as_bytes(),
        "application/json",
        now() - 240,
        SECRET,
    ));
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["challenge"], challenge["challenge"]);

    // A mention: acknowledged at once; the reply streams into its thread.
    let ts = "1700000100.000100";
    let mention = event_callback(
        "Ev01",
        app_mention("U1", "C1", ts, None, "weather in Paris?"),
    );
    let started = Instant::now();
    let r = host.send(event_request(path, &mention));
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(started.elapsed() < Duration::from_secs(3));
    wait_for_text(&mock, "C1", ts, ANSWER);
    let replies = mock.thread("C1", ts);
    assert_eq!(replies.len(), 1, "{replies:#?}");
    assert_eq!(replies[0].text, ANSWER);
    assert_eq!(mock.calls_of("chat.startStream").len(), 1, "tried once");
    let post = &mock.calls_of("chat.postMessage")[0];
    assert_eq!(post.authorization.as_deref(), Some("Bearer xoxb-test"));
    assert_eq!(post.body["thread_ts"], ts);
    let sessions = host.received();
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0].1, ["weather in Paris?"]);

    // Redeliveries (Slack's retries) are acknowledged and ignored.
    for n in 1..=3 {
        let r = host.send(
            event_request(path, &mention)
                .header("x-slack-retry-num", &n.to_string())
                .header("x-slack-retry-reason", "http_timeout"),
        );
        assert_eq!(
            (r.status, r.json()["duplicate"].clone()),
            (200, json!(true))
        );
    }

    // A reply in the thread (no mention) continues the same session.
    let follow = event_callback(
        "Ev02",
        message(
            "U2",
            "C1",
            "channel",
            "1700000100.000200",
            Some(ts),
            "and tomorrow?",
        ),
    );
    assert_eq!(host.send(event_request(path, &follow)).status, 200);
    mock.wait_until("the second reply", WAIT, |m| m.thread("C1", ts).len() == 2);
    let sessions = host.received();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    assert_eq!(sessions[0].1, ["weather in Paris?", "and tomorrow?"]);

    // A direct message starts its own session; a 429 on the post is
    // waited out (Retry-After) and the reply still arrives once.
    mock.rate_limit("chat.postMessage", 1);
    let dm_ts = "1700000200.000100";
    let dm = event_callback(
        "Ev03",
        message("U1", "D1", "im", dm_ts, None, "hello there"),
    );
    assert_eq!(host.send(event_request(path, &dm)).status, 200);
    wait_for_text(&mock, "D1", dm_ts, ANSWER);
    assert_eq!(mock.thread("D1", dm_ts).len(), 1);
    let posts: Vec<_> = mock
        .calls_of("chat.postMessage")
        .into_iter()
        .filter(|c| c.body["channel"] == "D1")
        .collect();
    assert_eq!(posts.len(), 2, "the 429, then the post");
    assert!(posts[1].at.duration_since(posts[0].at) >= Duration::from_millis(950));
    // The direct-message thread shows the agent's status while it works,
    // cleared at the end.
    let statuses = |m: &MockSlack| -> Vec<String> {
        m.calls_of("assistant.threads.setStatus")
            .iter()
            .filter(|c| c.body["channel_id"] == "D1" && c.body["thread_ts"] == dm_ts)
            .map(|c| c.body["status"].as_str().unwrap_or("?").to_owned())
            .collect()
    };
    mock.wait_until("the status cleared", WAIT, |m| statuses(m).len() == 2);
    assert_eq!(statuses(&mock), ["is thinking…", ""]);
    // The new direct-message thread is titled with its first message; a
    // new assistant thread is offered the configured prompts.
    let titles = mock.calls_of("assistant.threads.setTitle");
    assert_eq!(titles.len(), 1);
    assert_eq!(
        (
            titles[0].body["channel_id"].clone(),
            titles[0].body["title"].clone()
        ),
        (json!("D1"), json!("hello there"))
    );
    let started = event_callback(
        "Ev06",
        json!({"type": "assistant_thread_started", "event_ts": "1700000250.000100",
               "assistant_thread": {"user_id": "U1", "channel_id": "D1", "thread_ts": "1700000250.000050",
                                    "context": {"channel_id": "C1", "team_id": TEAM, "enterprise_id": null}}}),
    );
    assert_eq!(host.send(event_request(path, &started)).status, 200);
    mock.wait_until("the suggested prompts", WAIT, |m| {
        !m.calls_of("assistant.threads.setSuggestedPrompts")
            .is_empty()
    });
    let prompts = &mock.calls_of("assistant.threads.setSuggestedPrompts")[0].body;
    assert_eq!(prompts["thread_ts"], "1700000250.000050");
    assert_eq!(prompts["prompts"][0]["title"], "Today");

    // The bot's own messages, and a plain channel post without a
    // mention or a watch, never dispatch.
    let mut own = message(
        BOT_USER,
        "C1",
        "channel",
        "1700000300.000100",
        Some(ts),
        "my reply",
    );
    own["bot_id"] = json!("B0BOT");
    assert_eq!(
        host.send(event_request(path, &event_callback("Ev04", own)))
            .status,
        200
    );
    let plain = message("U1", "C7", "channel", "1700000300.000200", None, "lunch?");
    assert_eq!(
        host.send(event_request(path, &event_callback("Ev05", plain)))
            .status,
        200
    );
    settle();
    assert_eq!(host.received().len(), 2);
    assert_eq!(mock.thread("C1", ts).len(), 2);
    let _ = TEAM;

    // Dedupe is durable: after a restart the same event ids are ignored.
    host.restart();
    for e in [&mention, &follow, &dm] {
        let r = host.send(event_request(path, e).header("x-slack-retry-num", "3"));
        assert_eq!(
            (r.status, r.json()["duplicate"].clone()),
            (200, json!(true)),
            "{}",
            r.body
        );
    }
    settle();
    assert_eq!(mock.thread("C1", ts).len(), 2);
    assert_eq!(host.received().iter().map(|s| s.1.len()).sum::<usize>(), 3);

    let info = host.send(Request::get("/bot/v1/info")).json();
    let slack = &info["channels"][0];
    assert_eq!(slack["kind"], "slack");
    assert_eq!(
        (slack["mode"].clone(), slack["state"].clone()),
        (json!("events"), json!("ready"))
    );
    assert_eq!(slack["signed"], true);
    assert!(!info.to_string().contains(SECRET) && !info.to_string().contains("xoxb-test"));
}

#[test]
fn socket_mode_acknowledges_every_envelope_reconnects_and_never_replies_twice() {
    let mock = MockSlack::start();
    let api = mock.api_url();
    let channel = socket_channel("");
    let mut host = Host::new(
        &script(ANSWER),
        &[("channels/slack.toml", &channel)],
        &[
            ("SLACK_BOT_TOKEN", "xoxb-test"),
            ("SLACK_APP_TOKEN", "xapp-test"),
            ("SLACK_API_URL", &api),
        ],
    );
    mock.wait_until("a socket", WAIT, MockSlack::connected);
    let open = &mock.calls_of("apps.connections.open")[0];
    assert_eq!(open.authorization.as_deref(), Some("Bearer xapp-test"));

    let ts = "1700000100.000100";
    let first = event_callback("Ev10", app_mention("U1", "C1", ts, None, "weather?"));
    let env = mock.push_event(&first, 0);
    mock.wait_until("the ack", WAIT, |m| m.acks().contains(&env));
    wait_for_text(&mock, "C1", ts, ANSWER);

    // Slack's redelivery of the same event: acknowledged, not run.
    let again = mock.push_event(&first, 1);
    mock.wait_until("the second ack", WAIT, |m| m.acks().contains(&again));
    settle();
    assert_eq!(mock.thread("C1", ts).len(), 1);
    assert_eq!(host.received().len(), 1);

    // A `disconnect` message: a fresh URL and a new socket.
    mock.disconnect();
    mock.wait_until("a reconnect after disconnect", WAIT, |m| {
        m.connections() == 2 && m.connected()
    });
    assert_eq!(mock.opens(), 2);
    let ts2 = "1700000200.000100";
    mock.push_event(
        &event_callback("Ev11", app_mention("U1", "C1", ts2, None, "and now?")),
        0,
    );
    wait_for_text(&mock, "C1", ts2, ANSWER);

    // A dropped socket (no close frame): reconnects too.
    mock.drop_socket();
    mock.wait_until("a reconnect after a drop", WAIT, |m| {
        m.connections() == 3 && m.connected()
    });
    let ts3 = "1700000300.000100";
    mock.push_event(
        &event_callback("Ev12", message("U1", "D1", "im", ts3, None, "hi")),
        0,
    );
    wait_for_text(&mock, "D1", ts3, ANSWER);

    // After a restart, Slack's late redelivery still runs nothing.
    host.restart();
    mock.wait_until("a socket after restart", WAIT, |m| {
        m.connections() == 4 && m.connected()
    });
    let late = mock.push_event(&first, 3);
    mock.wait_until("the late ack", WAIT, |m| m.acks().contains(&late));
    settle();
    assert_eq!(mock.thread("C1", ts).len(), 1);
    assert_eq!(host.received().len(), 3);
    // Every reply was streamed and its stream stopped.
    let replies = mock.messages();
    assert_eq!(replies.len(), 3);
    assert!(replies.iter().all(|m| !m.streaming), "{replies:#?}");
    assert_eq!(mock.calls_of("chat.startStream").len(), 3);
    assert_eq!(mock.calls_of("chat.stopStream").len(), 3);
    assert!(mock.calls_of("chat.postMessage").is_empty());
    let info = host.send(Request::get("/bot/v1/info")).json();
    assert_eq!(info["channels"][0]["mode"], "socket");
}

#[test]
fn a_retry_storm_of_four_deliveries_per_event_gives_one_reply_each() {
    let mock = MockSlack::start();
    let api = mock.api_url();
    let files = [
        ("channels/slack.toml", socket_channel("")),
        ("channels/slack-http.toml", events_channel("")),
    ];
    let files: Vec<(&str, &str)> = files.iter().map(|(a, b)| (*a, b.as_str())).collect();
    let host = Host::new(
        &script(ANSWER),
        &files,
        &[
            ("SLACK_BOT_TOKEN", "xoxb-test"),
            ("SLACK_APP_TOKEN", "xapp-test"),
            ("SLACK_SIGNING_SECRET", SECRET),
            ("SLACK_API_URL", &api),
        ],
    );
    mock.wait_until("a socket", WAIT, MockSlack::connected);
    // Slack's schedule (at once, +3 s, +1 min, +5 min) compressed a
    // hundredfold; half the events over the socket, half over HTTP.
    let events: Vec<(String, Value)> = (0..20)
        .map(|i| {
            let ts = format!("1700001{i:03}.000100");
            let e = event_callback(
                &format!("EvS{i}"),
                app_mention(
                    "U1",
                    &format!("C{}", i % 3),
                    &ts,
                    None,
                    &format!("question {i}"),
                ),
            );
            (ts, e)
        })
        .collect();
    let start = Instant::now();
    for (attempt, at_ms) in [0u64, 30, 600, 3000].into_iter().enumerate() {
        while start.elapsed() < Duration::from_millis(at_ms) {
            std::thread::sleep(Duration::from_millis(5));
        }
        for (i, (_, e)) in events.iter().enumerate() {
            if i % 2 == 0 {
                mock.push_event(e, attempt as u32);
            } else {
                let mut req = event_request("/bot/v1/channels/slack-http", e);
                if attempt > 0 {
                    req = req.header("x-slack-retry-num", &attempt.to_string());
                }
                assert_eq!(host.send(req).status, 200);
            }
        }
    }
    for (i, (ts, _)) in events.iter().enumerate() {
        wait_for_text(&mock, &format!("C{}", i % 3), ts, ANSWER);
    }
    settle();
    let duplicates: usize = events
        .iter()
        .enumerate()
        .map(|(i, (ts, _))| mock.thread(&format!("C{}", i % 3), ts).len() - 1)
        .sum();
    assert_eq!(duplicates, 0);
    let sessions = host.received();
    assert_eq!(sessions.len(), 20);
    assert!(sessions.iter().all(|(_, texts)| texts.len() == 1));
}

#[test]
fn a_long_streamed_answer_rolls_over_messages_and_loses_no_character() {
    let mock = MockSlack::start();
    let api = mock.api_url();
    // 9,000 words: about 2,250 deltas of four words.
    let long: String = (0..9_000)
        .map(|i| {
            if i % 40 == 39 {
                format!("w{i}.\n")
            } else {
                format!("w{i} ")
            }
        })
        .collect();
    let long = long.trim_end().to_owned();
    let channel = "kind = \"slack\"\napi_url = \"${SLACK_API_URL}\"\n";
    let _host = Host::new(
        &script(&long),
        &[("channels/slack.toml", channel)],
        &[
            ("SLACK_BOT_TOKEN", "xoxb-test"),
            ("SLACK_APP_TOKEN", "xapp-test"),
            ("SLACK_API_URL", &api),
        ],
    );
    mock.wait_until("a socket", WAIT, MockSlack::connected);
    let ts = "1700000100.000100";
    mock.push_event(
        &event_callback("Ev20", app_mention("U1", "C1", ts, None, "write a lot")),
        0,
    );
    // Streamed: each message one stream, appended at a bounded rate and
    // stopped.
    mock.wait_until("the whole streamed answer", WAIT, |m| {
        thread_text(m, "C1", ts) == long && m.thread("C1", ts).iter().all(|p| !p.streaming)
    });
    let replies = mock.thread("C1", ts);
    assert!(replies.len() >= long.len() / 3_500, "{}", replies.len());
    assert!(replies.iter().all(|m| m.text.chars().count() <= 3_500));
    assert_eq!(mock.calls_of("chat.startStream").len(), replies.len());
    assert_eq!(mock.calls_of("chat.stopStream").len(), replies.len());
    let appends = mock.calls_of("chat.appendStream").len();
    assert!(appends <= replies.len() * 3 + 5, "{appends} appends");

    // Without streaming: posted and edited, the same text.
    mock.disable_streaming();
    let ts2 = "1700000200.000100";
    mock.push_event(
        &event_callback("Ev21", app_mention("U1", "C2", ts2, None, "again")),
        0,
    );
    mock.wait_until("the whole posted answer", WAIT, |m| {
        thread_text(m, "C2", ts2) == long
    });
    let replies = mock.thread("C2", ts2);
    assert!(replies.iter().all(|m| m.text.chars().count() <= 3_500));
    let posts = mock
        .calls_of("chat.postMessage")
        .iter()
        .filter(|c| c.body["channel"] == "C2")
        .count();
    assert_eq!(posts, replies.len(), "each message posted once");
    let updates = mock.calls_of("chat.update").len();
    assert!(updates <= replies.len() * 3 + 5, "{updates} updates");
}

#[test]
fn channel_watch_needs_the_allowlist_lets_edits_settle_and_guests_are_refused() {
    let mock = MockSlack::start();
    let api = mock.api_url();
    let channel =
        // A debounce long enough that the edit, pushed right after the
        // post, arrives inside it however loaded the machine is.
        socket_channel("[engagement.channel_posts]\nallow = [\"C9\"]\ndebounce = \"2s\"\n");
    let host = Host::new(
        &script(ANSWER),
        &[("channels/slack.toml", &channel)],
        &[
            ("SLACK_BOT_TOKEN", "xoxb-test"),
            ("SLACK_APP_TOKEN", "xapp-test"),
            ("SLACK_API_URL", &api),
        ],
    );
    mock.wait_until("a socket", WAIT, MockSlack::connected);
    // Not on the allowlist: nothing.
    mock.push_event(
        &event_callback(
            "Ev30",
            message("U1", "C8", "channel", "1700000100.000100", None, "outage!"),
        ),
        0,
    );
    // Watched: a post edited inside the window dispatches once, edited.
    let watched = "1700000200.000100";
    mock.push_event(
        &event_callback(
            "Ev31",
            message("U1", "C9", "channel", watched, None, "disk fu"),
        ),
        0,
    );
    let edit = json!({
        "type": "message", "subtype": "message_changed", "channel": "C9", "channel_type": "channel",
        "hidden": true, "ts": "1700000200.000300", "event_ts": "1700000200.000300",
        "message": {"type": "message", "user": "U1", "text": "disk full on db-1", "ts": watched, "edited": {"user": "U1", "ts": "1700000200.000300"}},
        "previous_message": {"type": "message", "user": "U1", "text": "disk fu", "ts": watched}
    });
    mock.push_event(&event_callback("Ev32", edit), 0);
    // Watched, but deleted inside the window: nothing.
    let deleted = "1700000300.000100";
    mock.push_event(
        &event_callback(
            "Ev33",
            message("U1", "C9", "channel", deleted, None, "oops"),
        ),
        0,
    );
    mock.push_event(
        &event_callback(
            "Ev34",
            json!({"type": "message", "subtype": "message_deleted", "channel": "C9", "channel_type": "channel",
                   "hidden": true, "deleted_ts": deleted, "ts": "1700000300.000200", "event_ts": "1700000300.000200",
                   "previous_message": {"type": "message", "user": "U1", "text": "oops", "ts": deleted}}),
        ),
        0,
    );
    // Its deletion handled before the post itself (the handlers of one
    // post's events run concurrently): still nothing.
    let gone = "1700000350.000100";
    mock.push_event(
        &event_callback(
            "Ev38",
            json!({"type": "message", "subtype": "message_deleted", "channel": "C9", "channel_type": "channel",
                   "hidden": true, "deleted_ts": gone, "ts": "1700000350.000200", "event_ts": "1700000350.000200",
                   "previous_message": {"type": "message", "user": "U1", "text": "never mind", "ts": gone}}),
        ),
        0,
    );
    mock.push_event(
        &event_callback(
            "Ev39",
            message("U1", "C9", "channel", gone, None, "never mind"),
        ),
        0,
    );
    // A thread reply in a watched channel: top-level posts only.
    mock.push_event(
        &event_callback(
            "Ev35",
            message(
                "U1",
                "C9",
                "channel",
                "1700000400.000200",
                Some("1700000400.000100"),
                "fyi",
            ),
        ),
        0,
    );
    wait_for_text(&mock, "C9", watched, ANSWER);
    settle();
    let sessions = host.received();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    assert_eq!(sessions[0].1, ["disk full on db-1"]);
    assert!(mock.thread("C9", deleted).is_empty());
    assert!(mock.thread("C9", gone).is_empty());
    assert!(mock.thread("C8", "1700000100.000100").is_empty());

    // A guest, and a Slack Connect user from another workspace, are told
    // no and start nothing.
    mock.add_guest("UGUEST");
    let g = "1700000500.000100";
    mock.push_event(
        &event_callback("Ev36", app_mention("UGUEST", "C1", g, None, "hi")),
        0,
    );
    let x = "1700000600.000100";
    let mut external = app_mention("UEXT", "C1", x, None, "hi");
    external["user_team"] = json!("T0OTHER");
    mock.push_event(&event_callback("Ev37", external), 0);
    for t in [g, x] {
        wait_for_text(&mock, "C1", t, "only answer members of this workspace");
    }
    settle();
    assert_eq!(host.received().len(), 1);
    assert!(
        mock.calls_of("users.info")
            .iter()
            .any(|c| c.body["user"] == "UGUEST")
    );
}

const ECHO_TOOL: &str = r#"description = "Echo, after a human agrees"
command = ["python3", "echo.py"]
needs_approval = true
[input_schema]
type = "object"
required = ["text", "api_token"]
properties.text = { type = "string" }
properties.api_token = { type = "string" }
"#;

const ECHO_PY: &str = r#"import json, sys
args = json.load(sys.stdin)
print(json.dumps({"echo": args["text"]}))
"#;

/// Turn 0 asks for the parked call, then answers; turn 1 is what a
/// resumed turn says.
const APPROVAL_SCRIPT: &str = r#"{"turns": [
  {"steps": [{"text": "Let me post that.", "toolCalls": [{"name": "echo", "input": {"text": "hi", "api_token": "tok-SECRET-123"}}]}, {"text": "Posted after approval."}]},
  {"steps": [{"text": "Resumed and done."}]}
]}"#;

fn card(mock: &MockSlack, channel: &str, ts: &str) -> Posted {
    mock.wait_until("an approval card", WAIT, |m| {
        m.thread(channel, ts)
            .iter()
            .any(|p| p.blocks.contains("agentkit_approve"))
    });
    mock.thread(channel, ts)
        .into_iter()
        .find(|p| p.blocks.contains("agentkit_approve"))
        .unwrap()
}

fn form(payload: &Value) -> Vec<u8> {
    let mut out = String::from("payload=");
    for b in payload.to_string().bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => out.push(char::from(b)),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out.into_bytes()
}

#[test]
fn approvals_are_clicked_in_slack_over_the_socket_and_over_http_after_a_restart() {
    let mock = MockSlack::start();
    let api = mock.api_url();
    let files = [
        (
            "channels/slack.toml",
            socket_channel("tool_approvals = true\n"),
        ),
        (
            "channels/slack-http.toml",
            events_channel("tool_approvals = true\n"),
        ),
        ("tools/echo.toml", ECHO_TOOL.to_owned()),
        ("tools/echo.py", ECHO_PY.to_owned()),
    ];
    let files: Vec<(&str, &str)> = files.iter().map(|(a, b)| (*a, b.as_str())).collect();
    let mut host = Host::new(
        APPROVAL_SCRIPT,
        &files,
        &[
            ("SLACK_BOT_TOKEN", "xoxb-test"),
            ("SLACK_APP_TOKEN", "xapp-test"),
            ("SLACK_SIGNING_SECRET", SECRET),
            ("SLACK_API_URL", &api),
        ],
    );
    mock.wait_until("a socket", WAIT, MockSlack::connected);

    // Over the socket: the card shows the call with its secret redacted;
    // a click approves it, the card says who, and the turn goes on.
    let ts = "1700000100.000100";
    mock.push_event(
        &event_callback("Ev40", app_mention("U1", "C1", ts, None, "post it")),
        0,
    );
    let c = card(&mock, "C1", ts);
    assert!(
        c.blocks.contains("echo") && c.blocks.contains("‹redacted›"),
        "{}",
        c.blocks
    );
    assert!(!c.blocks.contains("tok-SECRET-123"));
    assert!(thread_text(&mock, "C1", ts).starts_with("Let me post that."));
    let click = mock.push_interactive(&block_actions("U7", &c, "agentkit_approve"));
    mock.wait_until("the click's ack", WAIT, |m| m.acks().contains(&click));
    wait_for_text(&mock, "C1", ts, "Posted after approval.");
    mock.wait_until("the card's update", WAIT, |m| {
        m.thread("C1", ts)
            .iter()
            .any(|p| p.ts == c.ts && p.blocks.contains("Approved by <@U7>"))
    });
    let updated = mock
        .thread("C1", ts)
        .into_iter()
        .find(|p| p.ts == c.ts)
        .unwrap();
    assert!(!updated.blocks.contains("agentkit_approve"));
    // The text after the card is a new message below it.
    let order: Vec<String> = mock
        .thread("C1", ts)
        .iter()
        .map(|p| p.text.clone())
        .collect();
    assert_eq!(
        order,
        ["Let me post that.", "Approved", "Posted after approval."]
    );
    let sessions = received_in(&host.state());
    let log = std::fs::read_to_string(
        host.state()
            .join(format!("bot/sessions/{}/events.ndjson", sessions[0].0)),
    )
    .unwrap();
    assert!(log.contains("\"by\":\"slack:T0001:U7\""), "{log}");

    // Over HTTP, across a restart: the call is still parked, the click
    // (a signed form post) resolves it, and the resumed turn's reply
    // comes to the thread.
    let ts2 = "1700000200.000100";
    let mention = event_callback("Ev41", app_mention("U1", "C2", ts2, None, "post again"));
    assert_eq!(
        host.send(event_request("/bot/v1/channels/slack-http", &mention))
            .status,
        200
    );
    let c2 = card(&mock, "C2", ts2);
    host.restart();
    let body = form(&block_actions("U8", &c2, "agentkit_deny"));
    let unsigned = host.send(
        Request::post("/bot/v1/channels/slack-http")
            .header("content-type", "application/x-www-form-urlencoded")
            .raw_body(&body),
    );
    assert_eq!(unsigned.status, 401);
    let r = host.send(signed(
        "/bot/v1/channels/slack-http",
        &body,
        "application/x-www-form-urlencoded",
        now(),
        SECRET,
    ));
    assert_eq!(r.status, 200, "{}", r.body);
    mock.wait_until("the denied card", WAIT, |m| {
        m.thread("C2", ts2)
            .iter()
            .any(|p| p.ts == c2.ts && p.blocks.contains("Denied by <@U8>"))
    });
    wait_for_text(&mock, "C2", ts2, "Resumed and done.");
}

#[test]
fn missing_credentials_leave_the_channel_idle_and_say_so() {
    let files = [
        (
            "channels/slack.toml",
            "kind = \"slack\"\nenv_prefix = \"WEATHER\"\n",
        ),
        (
            "channels/slack-http.toml",
            "kind = \"slack\"\nmode = \"events\"\n",
        ),
    ];
    let host = Host::new(
        &script(ANSWER),
        &files,
        &[("WEATHER_SLACK_BOT_TOKEN", "xoxb-1")],
    );
    let info = host.send(Request::get("/bot/v1/info")).json();
    let channels = info["channels"].as_array().unwrap();
    let by_id = |id: &str| channels.iter().find(|c| c["id"] == id).unwrap().clone();
    let socket = by_id("slack");
    assert_eq!(socket["state"], "idle");
    assert_eq!(socket["missing"], json!(["WEATHER_SLACK_APP_TOKEN"]));
    let http = by_id("slack-http");
    assert_eq!(http["state"], "idle");
    assert_eq!(
        http["missing"],
        json!(["SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET"])
    );
    // The client reads the same entries typed.
    let addr = host.handle.as_ref().unwrap().local_addr();
    let client = agentkit::client::Client::new(&format!("http://{addr}/bot"), None);
    let info = host.rt.block_on(client.info()).unwrap();
    let slack_of = |id: &str| match info.channels.iter().find(|c| c.id == id) {
        Some(agentkit_protocol::api::ChannelInfo {
            pack: Some(PackInfo::Slack(slack)),
            ..
        }) => slack.clone(),
        other => panic!("{id}: {other:?}"),
    };
    let socket = slack_of("slack");
    assert_eq!(
        (socket.mode, socket.state, socket.missing),
        (
            SlackMode::Socket,
            ChannelState::Idle,
            vec!["WEATHER_SLACK_APP_TOKEN".to_owned()]
        )
    );
    let http = slack_of("slack-http");
    assert_eq!(
        (http.mode, http.state),
        (SlackMode::Events, ChannelState::Idle)
    );
    assert!(
        info.channels
            .iter()
            .all(|c| c.max_body == Some(25 * 1024 * 1024))
    );
    // Nothing the server sent is lost in the typed entries.
    assert_eq!(
        serde_json::to_value(&info.channels).unwrap(),
        Value::Array(channels.clone())
    );
    // Loopback may still reach the route; it says why nothing happens.
    let r = host.send(
        Request::post("/bot/v1/channels/slack-http").json(&event_callback(
            "Ev50",
            app_mention("U1", "C1", "1.2", None, "hi"),
        )),
    );
    assert_eq!((r.status, r.error_code()), (503, "channel_idle".to_owned()));
    assert!(r.body.contains("SLACK_BOT_TOKEN"), "{}", r.body);
    let _ = TEAM;
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Announce {
    channel: String,
    text: String,
}

#[test]
fn host_slack_posts_updates_and_reacts_with_the_channels_bot_token() {
    let mock = MockSlack::start();
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("agents/bot/agent");
    write(&agent.join("agent.toml"), "model = \"test\"\n");
    write(&agent.join("instructions.md"), "You announce.\n");
    write(
        &agent.join("channels/slack.toml"),
        "kind = \"slack\"\nmode = \"events\"\napi_url = \"${SLACK_API_URL}\"\nenv_prefix = \"ANNOUNCER\"\n",
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let api = mock.api_url();
    let vars = [
        ("SLACK_API_URL".to_owned(), api),
        (
            "ANNOUNCER_SLACK_BOT_TOKEN".to_owned(),
            "xoxb-announcer".to_owned(),
        ),
        (
            "ANNOUNCER_SLACK_SIGNING_SECRET".to_owned(),
            SECRET.to_owned(),
        ),
    ];
    let options = ServeOptions {
        port: 0,
        state_root: Some(dir.path().join("state")),
        env: EnvLookup(Arc::new(move |name| {
            vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
        })),
        ..ServeOptions::default()
    }
    .tool(agentkit::RustTool::new(
        "announce",
        "Announces in Slack.",
        |input: Announce, ctx: agentkit::ToolContext| async move {
            let host = ctx
                .services::<agentkit::HostServices>()
                .ok_or("no services")?;
            let slack = host.slack.client(None).map_err(|e| e.to_string())?;
            let ts = slack
                .post(&input.channel, None, &input.text)
                .await
                .map_err(|e| e.to_string())?;
            slack
                .update(&input.channel, &ts, &format!("{} (edited)", input.text))
                .await
                .map_err(|e| e.to_string())?;
            slack
                .react(&input.channel, &ts, ":tada:")
                .await
                .map_err(|e| e.to_string())?;
            let twice = slack.react(&input.channel, &ts, "tada").await.unwrap_err();
            let other = host.slack.client(Some("nope")).map(|_| ()).unwrap_err();
            Ok(json!({"ts": ts, "names": host.slack.names(), "twice": twice.to_string(), "other": other.to_string()}))
        },
    ));
    let handle = rt
        .block_on(agentkit::serve(&dir.path().join("agents"), options))
        .unwrap();
    let r = Request::post("/bot/v1/tools/announce")
        .json(&json!({"input": {"channel": "C5", "text": "Release 1.2 is out"}}))
        .send(handle.local_addr())
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let out = r.json()["result"].clone();
    assert_eq!(r.json()["isError"], false, "{out}");
    assert_eq!(out["names"], json!(["slack"]));
    assert!(
        out["twice"].as_str().unwrap().contains("already_reacted"),
        "{out}"
    );
    assert!(
        out["other"]
            .as_str()
            .unwrap()
            .contains("no slack channel `nope`"),
        "{out}"
    );
    let posted = mock.messages();
    assert_eq!(posted.len(), 1);
    assert_eq!(posted[0].ts, out["ts"].as_str().unwrap());
    assert_eq!(posted[0].text, "Release 1.2 is out (edited)");
    assert_eq!(posted[0].reactions, ["tada"]);
    assert!(
        mock.calls()
            .iter()
            .all(|c| c.authorization.as_deref() == Some("Bearer xoxb-announcer"))
    );
    assert!(!out.to_string().contains("xoxb-announcer"));
    rt.block_on(handle.close());
}

/// `host.slack` for subprocess tools: `POST $AGENTKIT_HOST_URL/v1/slack`
/// calls the Web API with the slack channel's bot token (which the tool
/// never sees); Slack's refusals are 502 with Slack's error.
#[test]
fn a_subprocess_tool_calls_slack_through_the_host_bridge() {
    let mock = MockSlack::start();
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("agents/bot/agent");
    write(&agent.join("agent.toml"), "model = \"test\"\n");
    write(&agent.join("instructions.md"), "You announce.\n");
    write(
        &agent.join("channels/slack.toml"),
        "kind = \"slack\"\nmode = \"events\"\napi_url = \"${SLACK_API_URL}\"\nenv_prefix = \"ANNOUNCER\"\n",
    );
    let script = r#"
import json, os, sys, urllib.request, urllib.error
args = json.load(sys.stdin)
def slack(method, body):
    req = urllib.request.Request(
        os.environ["AGENTKIT_HOST_URL"] + "/v1/slack",
        data=json.dumps({"method": method, "body": body}).encode(),
        headers={"Authorization": "Bearer " + os.environ["AGENTKIT_HOST_TOKEN"], "Content-Type": "application/json"},
        method="POST")
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)
status, posted = slack("chat.postMessage", {"channel": args["channel"], "text": args["text"]})
ts = posted["result"]["ts"]
_, _ = slack("reactions.add", {"channel": args["channel"], "timestamp": ts, "name": "tada"})
again, refused = slack("reactions.add", {"channel": args["channel"], "timestamp": ts, "name": "tada"})
bad, _ = slack("chat.postMessage; rm", {})
print(json.dumps({"status": status, "ts": ts, "again": again, "refused": refused, "bad": bad}))
"#;
    write(&agent.join("tools/announce.py"), script);
    write(
        &agent.join("tools/announce.toml"),
        "description = \"Announces in Slack\"\ncommand = [\"python3\", \"announce.py\"]\n[input_schema]\ntype = \"object\"\n",
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let api = mock.api_url();
    let vars = [
        ("SLACK_API_URL".to_owned(), api),
        (
            "ANNOUNCER_SLACK_BOT_TOKEN".to_owned(),
            "xoxb-announcer".to_owned(),
        ),
        (
            "ANNOUNCER_SLACK_SIGNING_SECRET".to_owned(),
            SECRET.to_owned(),
        ),
    ];
    let options = ServeOptions {
        port: 0,
        state_root: Some(dir.path().join("state")),
        env: EnvLookup(Arc::new(move |name| {
            vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
        })),
        ..ServeOptions::default()
    };
    let handle = rt
        .block_on(agentkit::serve(&dir.path().join("agents"), options))
        .unwrap();
    let r = Request::post("/bot/v1/tools/announce")
        .json(&json!({"input": {"channel": "C7", "text": "Deployed"}}))
        .send(handle.local_addr())
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["isError"], false, "{}", r.body);
    let out = r.json()["result"].clone();
    assert_eq!(out["status"], 200, "{out}");
    assert_eq!(out["again"], 502, "{out}");
    assert!(
        out["refused"].to_string().contains("already_reacted"),
        "{out}"
    );
    assert_eq!(out["bad"], 400, "{out}");
    let posted = mock.messages();
    assert_eq!(posted.len(), 1);
    assert_eq!(posted[0].text, "Deployed");
    assert_eq!(posted[0].ts, out["ts"].as_str().unwrap());
    assert_eq!(posted[0].reactions, ["tada"]);
    assert!(
        mock.calls()
            .iter()
            .all(|c| c.authorization.as_deref() == Some("Bearer xoxb-announcer"))
    );
    assert!(!out.to_string().contains("xoxb-announcer"));
    rt.block_on(handle.close());
}
