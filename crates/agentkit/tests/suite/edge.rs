//! The HTTP edge on a real socket: a stream follower that stops reading is
//! dropped after the write-stall bound, a request whose body never
//! arrives (or trickles in) is answered `408`, a half-sent request head is
//! closed after the header-read timeout, at the connection cap a new
//! connection closes the oldest incomplete one, as old as its accept (then the longest idle,
//! never a busy one), a normal client is served through a slowloris, and
//! past saturation the excess turns are shed with `503` while admitted ones
//! complete, refused by the edge before their bodies are read.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use agentkit::{EdgeOptions, ServeOptions};
use agentkit_test_support::http::Request;
use serde_json::json;

use super::http::{Server, write};

/// One scripted agent `bot` whose turns answer "ok" at once, in single
/// mode, with `edge` bounds and a body limit for large messages.
pub(crate) fn server(edge: EdgeOptions) -> Server {
    server_with_turn(edge, r#"{"steps": [{"text": "ok"}]}"#)
}

/// [`server`] whose every turn is `turn` (a scripted turn's JSON).
fn server_with_turn(edge: EdgeOptions, turn: &str) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("agents/bot/agent");
    let turns = vec![turn; 64].join(",");
    write(
        &agent.join("agent.toml"),
        "model = \"scripted:script.json\"\n",
    );
    write(
        &agent.join("script.json"),
        &format!(r#"{{"turns": [{turns}]}}"#),
    );
    write(&agent.join("instructions.md"), "You are a test agent.\n");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let options = super::http::with_scraper(ServeOptions {
        port: 0,
        mode: agentkit::Mode::Single,
        state_root: Some(dir.path().join("state")),
        body_limit: 4 * 1024 * 1024,
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

/// Reads until the server closes the connection (EOF or reset); `Err` when
/// it is still open after `within`.
fn read_to_close(stream: &mut TcpStream, within: Duration) -> std::io::Result<usize> {
    stream.set_read_timeout(Some(within))?;
    let mut buf = vec![0; 64 * 1024];
    let mut total = 0;
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return Ok(total),
            Ok(n) => total += n,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Ok(total),
            Err(e) => return Err(e),
        }
    }
}

#[test]
fn a_stream_follower_that_stops_reading_is_dropped() {
    let s = server(EdgeOptions {
        write_stall_timeout: Duration::from_secs(1),
        ..EdgeOptions::default()
    });
    // About 12 MiB of log: more than the socket buffers on both sides and
    // hyper's write buffer hold, so the server's writes to a follower that
    // does not read must stall.
    let message = "x".repeat(1024 * 1024);
    let r = Request::post("/v1/session")
        .json(&json!({"message": message}))
        .send(s.addr())
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    let mut token = r.json()["continuationToken"].clone();
    for _ in 0..11 {
        let r = Request::post(&format!("/v1/session/{id}"))
            .json(&json!({"message": message, "continuationToken": token}))
            .send(s.addr())
            .unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
        token = r.json()["continuationToken"].clone();
    }

    let mut follower = TcpStream::connect(s.addr()).unwrap();
    write!(
        follower,
        "GET /v1/session/{id}/stream HTTP/1.1\r\nhost: localhost\r\n\r\n"
    )
    .unwrap();
    // The follower stops reading well past the stall bound.
    std::thread::sleep(Duration::from_secs(4));
    // A live stream never ends by itself: only the server letting the
    // follower go closes it. What it had buffered is read first.
    let read = read_to_close(&mut follower, Duration::from_secs(30))
        .expect("the stalled follower's connection was not closed");
    assert!(
        read < 12 * 1024 * 1024,
        "the whole log arrived: {read} bytes"
    );

    // A follower that reads gets the whole replay.
    let mut stream = Request::get(&format!("/v1/session/{id}/stream"))
        .stream(s.addr())
        .unwrap();
    let mut received = 0;
    while received < 12 {
        let e = stream.next_json().unwrap().expect("the stream ended early");
        if e["type"] == "message.received" {
            received += 1;
        }
    }
}

#[test]
fn a_request_whose_body_never_arrives_is_answered_408() {
    let s = server(EdgeOptions {
        request_timeout: Duration::from_secs(1),
        ..EdgeOptions::default()
    });
    let mut c = TcpStream::connect(s.addr()).unwrap();
    c.write_all(
        b"POST /v1/session HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"message\":",
    )
    .unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut head = [0; 12];
    c.read_exact(&mut head).unwrap();
    assert_eq!(&head, b"HTTP/1.1 408", "{}", String::from_utf8_lossy(&head));
    // Ordinary requests are not affected.
    let r = Request::get("/v1/sessions").send(s.addr()).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
}

#[test]
fn a_half_sent_request_head_is_closed_after_the_header_timeout() {
    let s = server(EdgeOptions {
        header_read_timeout: Duration::from_secs(1),
        ..EdgeOptions::default()
    });
    let mut c = TcpStream::connect(s.addr()).unwrap();
    c.write_all(b"GET /v1/health HTTP/1.1\r\nhost: loc")
        .unwrap();
    read_to_close(&mut c, Duration::from_secs(30)).expect("the half-sent request was kept open");
    // An idle keep-alive connection is closed the same way after its
    // answer.
    let mut c = TcpStream::connect(s.addr()).unwrap();
    c.write_all(b"GET /v1/health HTTP/1.1\r\nhost: localhost\r\n\r\n")
        .unwrap();
    let read = read_to_close(&mut c, Duration::from_secs(30))
        .expect("the idle keep-alive connection was kept open");
    assert!(read > 0);
}

/// Whether the server has closed `c` (EOF or reset), without waiting.
fn is_closed(c: &TcpStream) -> bool {
    let mut buf = [0; 16];
    let mut r: &TcpStream = c;
    c.set_nonblocking(true).unwrap();
    let closed = loop {
        match r.read(&mut buf) {
            Ok(0) => break true,
            Ok(_) => continue,
            Err(e) => break e.kind() != std::io::ErrorKind::WouldBlock,
        }
    };
    c.set_nonblocking(false).unwrap();
    closed
}

/// Polls `cond` for up to `within`.
fn eventually(within: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_lying_or_trickling_body_is_answered_408_at_the_body_timeout() {
    let s = server(EdgeOptions {
        body_read_timeout: Duration::from_secs(1),
        body_min_rate: 500,
        ..EdgeOptions::default()
    });
    let started = Instant::now();
    // Five bodies that never come (a lying Content-Length), one that
    // trickles a byte every 200 ms (far under 500 bytes per second).
    let mut lying: Vec<TcpStream> = (0..5)
        .map(|_| {
            let mut c = TcpStream::connect(s.addr()).unwrap();
            c.write_all(
                b"POST /v1/session HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: 999999999\r\n\r\n{\"message\":",
            )
            .unwrap();
            c
        })
        .collect();
    let trickle = {
        let mut c = TcpStream::connect(s.addr()).unwrap();
        c.write_all(
            b"POST /v1/session HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n",
        )
        .unwrap();
        let writer = c.try_clone().unwrap();
        std::thread::spawn(move || {
            let mut writer = writer;
            while writer.write_all(b" ").is_ok() {
                std::thread::sleep(Duration::from_millis(200));
            }
        });
        c
    };
    lying.push(trickle);
    for mut c in lying {
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut answer = Vec::new();
        // The answer, then the close.
        let _ = c.read_to_end(&mut answer);
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
        assert!(answer.contains("request_timeout"), "{answer}");
        assert!(answer.contains("request body"), "{answer}");
    }
    // Not before the body timeout (the middleware's bound is 120 s).
    assert!(started.elapsed() >= Duration::from_millis(900));
    // A body that arrives is read as ever.
    let r = Request::post("/v1/session")
        .json(&json!({"message": "hi"}))
        .send(s.addr())
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let metrics = super::http::scrape(s.addr());
    assert!(
        metrics.body.contains("agentkit_http_body_timeouts_total 6"),
        "{}",
        metrics.body
    );
}

#[test]
fn at_the_connection_cap_a_new_connection_closes_the_oldest_incomplete_one() {
    let s = server(EdgeOptions {
        header_read_timeout: Duration::from_secs(60),
        max_connections: Some(2),
        ..EdgeOptions::default()
    });
    let held: Vec<TcpStream> = (0..2)
        .map(|_| {
            let mut c = TcpStream::connect(s.addr()).unwrap();
            c.write_all(b"GET /v1/health HTTP/1.1\r\n").unwrap();
            // Accepted in this order.
            std::thread::sleep(Duration::from_millis(200));
            c
        })
        .collect();
    // Served well before the header timeout would free a slot.
    let started = Instant::now();
    let r = Request::get("/v1/health").send(s.addr()).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    // The oldest made room, closed with a reset (the server keeps no
    // TIME_WAIT entry for it); the younger one is still open.
    held[0]
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let read = (&held[0]).read(&mut [0; 16]);
    assert!(
        matches!(&read, Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset),
        "the oldest half-sent request was kept or closed without a reset: {read:?}"
    );
    assert!(
        !is_closed(&held[1]),
        "the younger half-sent request was closed"
    );
    let metrics = super::http::scrape(s.addr());
    // The scrape's own connection may arrive before the health check's
    // slot is given back, and then evicts the younger half-sent request
    // too: counted as well.
    let evicted = if is_closed(&held[1]) { 2 } else { 1 };
    assert!(
        metrics.body.contains(&format!(
            r#"agentkit_http_connections_evicted_total{{reason="incomplete"}} {evicted}"#
        )),
        "expected {evicted} evicted: {}",
        metrics.body
    );
}

#[test]
fn at_the_cap_a_connection_is_as_old_as_its_accept_not_its_head() {
    let s = server(EdgeOptions {
        header_read_timeout: Duration::from_secs(60),
        body_read_timeout: Duration::from_secs(60),
        max_connections: Some(2),
        ..EdgeOptions::default()
    });
    // Accepted first, silent for a while.
    let mut first = TcpStream::connect(s.addr()).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let second = TcpStream::connect(s.addr()).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // Then a quick head and a body that trickles: no younger for it.
    first
        .write_all(b"POST /v1/session HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{")
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let r = Request::get("/v1/health").send(s.addr()).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        eventually(Duration::from_secs(5), || is_closed(&first)),
        "the connection accepted first was kept"
    );
    assert!(!is_closed(&second), "the younger connection was closed");
}

#[test]
fn at_the_cap_idle_connections_go_after_incomplete_ones_and_busy_ones_stay() {
    let s = server(EdgeOptions {
        header_read_timeout: Duration::from_secs(60),
        max_connections: Some(3),
        ..EdgeOptions::default()
    });
    let r = Request::post("/v1/session")
        .json(&json!({"message": "hi"}))
        .send(s.addr())
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    let token = r.json()["continuationToken"].clone();
    // Busy: a live stream follower, the oldest connection.
    let mut follower = Request::get(&format!("/v1/session/{id}/stream"))
        .stream(s.addr())
        .unwrap();
    follower.until("turn.completed").unwrap();
    // Idle: a keep-alive connection that was answered.
    let mut idle = TcpStream::connect(s.addr()).unwrap();
    idle.write_all(b"GET /v1/health HTTP/1.1\r\nhost: localhost\r\n\r\n")
        .unwrap();
    let mut buf = [0; 12];
    idle.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"HTTP/1.1 200");
    std::thread::sleep(Duration::from_millis(200));
    // Incomplete: younger than the idle one.
    let mut half = TcpStream::connect(s.addr()).unwrap();
    half.write_all(b"GET /v1/health HTTP/1.1\r\n").unwrap();
    std::thread::sleep(Duration::from_millis(200));

    let r = Request::get("/v1/health").send(s.addr()).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        eventually(Duration::from_secs(10), || is_closed(&half)),
        "the incomplete connection was kept"
    );
    assert!(!is_closed(&idle), "the idle one went first");
    // The cap full again, with a second busy follower.
    let mut second = Request::get(&format!("/v1/session/{id}/stream"))
        .stream(s.addr())
        .unwrap();
    second.until("turn.completed").unwrap();
    let r = Request::get("/v1/health").send(s.addr()).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        eventually(Duration::from_secs(10), || is_closed(&idle)),
        "the idle connection was kept"
    );
    // The followers still get the next turn's events.
    let r = Request::post(&format!("/v1/session/{id}"))
        .json(&json!({"message": "again", "continuationToken": token}))
        .send(s.addr())
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    follower.until("turn.completed").unwrap();
    second.until("turn.completed").unwrap();
}

/// Holds `n` connections that each send a request (head or body) one byte
/// a second, reopening the ones the server closes, until `stop`.
fn slowloris(
    addr: SocketAddr,
    n: usize,
    bodies: bool,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<usize> {
    std::thread::spawn(move || {
        let open = |addr: SocketAddr| -> Option<TcpStream> {
            let mut c = TcpStream::connect_timeout(&addr, Duration::from_secs(1)).ok()?;
            let head: &[u8] = if bodies {
                b"POST /v1/session HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n"
            } else {
                b"GET /v1/health HTTP/1.1\r\n"
            };
            c.write_all(head).ok()?;
            Some(c)
        };
        let mut conns: Vec<Option<TcpStream>> = (0..n).map(|_| open(addr)).collect();
        let mut reopened = 0;
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_secs(1));
            for c in &mut conns {
                let alive = c.as_mut().is_some_and(|c| {
                    !is_closed(c) && c.write_all(if bodies { b" " } else { b"x" }).is_ok()
                });
                if !alive && !stop.load(Ordering::Relaxed) {
                    *c = open(addr);
                    reopened += 1;
                }
            }
        }
        reopened
    })
}

#[test]
fn a_slowloris_of_heads_and_bodies_does_not_keep_a_normal_client_out() {
    let s = server(EdgeOptions {
        header_read_timeout: Duration::from_secs(10),
        body_read_timeout: Duration::from_secs(10),
        max_connections: Some(32),
        ..EdgeOptions::default()
    });
    let stop = Arc::new(AtomicBool::new(false));
    let attackers = [
        slowloris(s.addr(), 150, false, stop.clone()),
        slowloris(s.addr(), 150, true, stop.clone()),
    ];
    std::thread::sleep(Duration::from_secs(2));
    let mut slow = Vec::new();
    let mut session: Option<(String, serde_json::Value)> = None;
    for i in 0..24 {
        let started = Instant::now();
        let r = if i % 4 == 3 {
            let r = match &session {
                None => Request::post("/v1/session").json(&json!({"message": "hi"})),
                Some((id, token)) => Request::post(&format!("/v1/session/{id}"))
                    .json(&json!({"message": "again", "continuationToken": token})),
            }
            .send(s.addr())
            .unwrap();
            assert_eq!(r.status, 200, "{}", r.body);
            let body = r.json();
            session = Some((
                body["sessionId"].as_str().unwrap().to_owned(),
                body["continuationToken"].clone(),
            ));
            r
        } else {
            Request::get("/v1/health").send(s.addr()).unwrap()
        };
        assert_eq!(r.status, 200, "{}", r.body);
        let took = started.elapsed();
        // Generous: this machine is shared; the bench measures the 2 s target.
        if took > Duration::from_secs(5) {
            slow.push(took);
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    stop.store(true, Ordering::Relaxed);
    let reopened: usize = attackers.into_iter().map(|a| a.join().unwrap()).sum();
    assert!(slow.is_empty(), "answers slower than 5 s: {slow:?}");
    // The attackers' connections were closed to make room (300 against a
    // cap of 32).
    assert!(reopened > 0, "no attacking connection was closed");
}

#[test]
fn at_the_cap_with_every_connection_busy_a_new_one_waits_for_one_to_end() {
    let s = server(EdgeOptions {
        max_connections: Some(2),
        ..EdgeOptions::default()
    });
    let r = Request::post("/v1/session")
        .json(&json!({"message": "hi"}))
        .send(s.addr())
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let id = r.json()["sessionId"].as_str().unwrap().to_owned();
    let token = r.json()["continuationToken"].clone();
    let mut followers: Vec<_> = (0..2)
        .map(|_| {
            let mut f = Request::get(&format!("/v1/session/{id}/stream"))
                .stream(s.addr())
                .unwrap();
            f.until("turn.completed").unwrap();
            f
        })
        .collect();
    let addr = s.addr();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(Request::get("/v1/health").send(addr).map(|r| r.status));
    });
    // Two live streams are never closed for room.
    assert!(
        rx.recv_timeout(Duration::from_secs(2)).is_err(),
        "a third connection was served while two streams were open"
    );
    followers.pop();
    let status = rx.recv_timeout(Duration::from_secs(30));
    assert!(matches!(status, Ok(Ok(200))), "{status:?}");
    // The remaining follower was not closed.
    let r = Request::post(&format!("/v1/session/{id}"))
        .json(&json!({"message": "again", "continuationToken": token}))
        .send(s.addr())
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    followers[0].until("turn.completed").unwrap();
}

#[test]
fn past_the_turn_bound_a_turn_is_answered_503_at_once_with_retry_after() {
    let s = server_with_turn(
        EdgeOptions {
            max_turns: Some(2),
            ..EdgeOptions::default()
        },
        r#"{"steps": [{"text": "ok", "delayMs": 4000}]}"#,
    );
    let start = |addr| {
        Request::post("/v1/session")
            .json(&json!({"message": "hi"}))
            .send(addr)
            .unwrap()
    };
    // Bodies still coming hold no turn slot.
    let _half_sent: Vec<TcpStream> = (0..5)
        .map(|_| {
            let mut c = TcpStream::connect(s.addr()).unwrap();
            c.write_all(
                b"POST /v1/session HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{",
            )
            .unwrap();
            c
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    for _ in 0..2 {
        let r = start(s.addr());
        assert_eq!(r.status, 200, "{}", r.body);
    }
    // A burst past the bound: every one shed at once, none waits.
    let addr = s.addr();
    let burst: Vec<_> = (0..10)
        .map(|_| {
            std::thread::spawn(move || {
                let started = Instant::now();
                let r = start(addr);
                (r, started.elapsed())
            })
        })
        .collect();
    for b in burst {
        let (r, took) = b.join().unwrap();
        assert_eq!(r.status, 503, "{}", r.body);
        assert_eq!(r.error_code(), "overloaded", "{}", r.body);
        assert_eq!(r.header("retry-after"), Some("1"));
        assert!(took < Duration::from_secs(3), "shed after {took:?}");
    }
    // Everything else is served meanwhile.
    let r = Request::get("/v1/health").send(s.addr()).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let metrics = super::http::scrape(s.addr());
    assert!(
        metrics.body.contains("agentkit_turns_shed_total 10"),
        "{}",
        metrics.body
    );
    assert!(
        metrics.body.contains("agentkit_turns_in_flight 2"),
        "{}",
        metrics.body
    );
    // Once the turns settle, their slots are free again.
    assert!(
        eventually(Duration::from_secs(60), || start(s.addr()).status == 200),
        "no turn was admitted after the running ones settled"
    );
}

/// A client that starts its next turn the moment it sees
/// `session.waiting` finds the slot free: the gate counts running turns,
/// not the worker that then makes the settled log durable.
#[test]
fn a_turns_slot_is_free_once_its_client_sees_session_waiting() {
    let s = server_with_turn(
        EdgeOptions {
            max_turns: Some(1),
            ..EdgeOptions::default()
        },
        r#"{"steps": [{"text": "ok"}]}"#,
    );
    let mut shed = 0;
    for _ in 0..60 {
        let r = Request::post("/v1/session")
            .json(&json!({"message": "hi"}))
            .send(s.addr())
            .unwrap();
        if r.status == 503 {
            shed += 1;
            // Let the previous session settle before the next try.
            std::thread::sleep(Duration::from_millis(50));
            continue;
        }
        until_waiting(s.addr(), &r);
    }
    assert_eq!(shed, 0, "turns shed right after the previous one settled");
}

/// Reads the stream of the turn `r` accepted (a `POST /v1/session`'s
/// answer, which must be a `200`) until `session.waiting`.
fn until_waiting(addr: SocketAddr, r: &agentkit_test_support::http::Response) {
    assert_eq!(r.status, 200, "{}", r.body);
    let url = r.json()["streamUrl"].as_str().unwrap().to_owned();
    Request::get(&url)
        .stream(addr)
        .unwrap()
        .until("session.waiting")
        .unwrap();
}

/// The samples of metric `name` (without labels) summed, from a scrape.
fn metric(s: &Server, name: &str) -> Option<f64> {
    let body = super::http::scrape(s.addr()).body;
    let mut found = None;
    for line in body.lines().filter(|l| !l.starts_with('#')) {
        let Some(rest) = line.strip_prefix(name) else {
            continue;
        };
        if !(rest.starts_with(' ') || rest.starts_with('{')) {
            continue;
        }
        let value: f64 = rest.rsplit(' ').next().unwrap().parse().unwrap();
        *found.get_or_insert(0.0) += value;
    }
    found
}

#[test]
fn past_saturation_the_excess_is_shed_with_503_and_admitted_turns_complete() {
    let s = server_with_turn(
        EdgeOptions {
            max_turns: Some(4),
            ..EdgeOptions::default()
        },
        r#"{"steps": [{"text": "ok", "delayMs": 150}]}"#,
    );
    let addr = s.addr();
    let until = Instant::now() + Duration::from_secs(4);
    // Sixteen clients in a closed loop against a bound of four turns.
    let clients: Vec<_> = (0..16)
        .map(|_| {
            std::thread::spawn(move || {
                let (mut admitted, mut shed, mut failed) = (0, 0, Vec::new());
                while Instant::now() < until {
                    let started = Instant::now();
                    let r = Request::post("/v1/session")
                        .json(&json!({"message": "hi"}))
                        .send(addr)
                        .unwrap();
                    match r.status {
                        200 => {
                            admitted += 1;
                            let url = r.json()["streamUrl"].as_str().unwrap().to_owned();
                            let events = Request::get(&url)
                                .stream(addr)
                                .unwrap()
                                .until("session.waiting");
                            match events {
                                Ok(events)
                                    if !events.iter().any(|e| e["type"] == "turn.failed") => {}
                                other => failed.push(format!("{other:?}")),
                            }
                        }
                        503 => {
                            shed += 1;
                            assert_eq!(r.error_code(), "overloaded", "{}", r.body);
                            assert_eq!(r.header("retry-after"), Some("1"));
                            // At once, never queued behind the running turns
                            // (generous: a shared machine).
                            let took = started.elapsed();
                            assert!(took < Duration::from_secs(2), "shed after {took:?}");
                            std::thread::sleep(Duration::from_millis(20));
                        }
                        other => failed.push(format!("{other}: {}", r.body)),
                    }
                }
                (admitted, shed, failed)
            })
        })
        .collect();
    let (mut admitted, mut shed, mut failed) = (0, 0, Vec::new());
    for c in clients {
        let (a, s, f) = c.join().unwrap();
        admitted += a;
        shed += s;
        failed.extend(f);
    }
    assert!(failed.is_empty(), "admitted turns failed: {failed:?}");
    assert!(admitted >= 4, "{admitted} turns admitted");
    assert!(shed > 0, "nothing was shed ({admitted} admitted)");
    // The sheds are counted, and the queues drain once the load stops.
    assert!(
        metric(&s, "agentkit_turns_shed_total").unwrap() >= f64::from(shed),
        "shed {shed}"
    );
    assert!(metric(&s, "agentkit_tasks_alive").unwrap() > 0.0);
    assert!(
        eventually(Duration::from_secs(30), || {
            metric(&s, "agentkit_turns_in_flight") == Some(0.0)
                && metric(&s, "agentkit_index_writes_queued") == Some(0.0)
        }),
        "the turn slots or the index writer's queue did not drain"
    );
    // The index writes are committed in batches, counted: at most the
    // two writes of each turn (its row, its last activity) and the start's.
    let commits = metric(&s, "agentkit_index_commits_total").unwrap();
    assert!(
        commits >= 1.0 && commits <= 2.0 * f64::from(admitted) + 10.0,
        "{commits} index commits for {admitted} turns"
    );
    // The sessions served stay loaded (fewer than the 512 kept idle).
    let loaded = metric(&s, "agentkit_sessions_loaded").unwrap();
    assert!(
        loaded >= 1.0 && loaded <= f64::from(admitted),
        "{loaded} loaded after {admitted} sessions"
    );
}

/// Context switches so far of this process's runtime threads (tokio's
/// workers and blocking threads, the edge's): the suite runs each test in
/// a process of its own.
#[cfg(target_os = "linux")]
fn runtime_switches() -> u64 {
    let mut total = 0;
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if !(comm.starts_with("tokio-") || comm.starts_with("agentkit-")) {
            continue;
        }
        let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
        total += status
            .lines()
            .filter(|l| l.contains("ctxt_switches:"))
            .filter_map(|l| l.split_whitespace().last()?.parse::<u64>().ok())
            .sum::<u64>();
    }
    total
}

/// An idle host sleeps: with no connection open and no turn in flight its
/// samplers look once a second and the turn gate's reaper waits for the
/// next admission (before: 10 ms and 20 ms timers, hundreds of wake-ups a
/// second); the next turn wakes the reaper, which gives its slot back.
#[test]
#[cfg(target_os = "linux")]
fn an_idle_host_sleeps_and_its_next_turn_still_frees_its_slot() {
    let s = server(EdgeOptions::default());
    let turn = || {
        let r = Request::post("/v1/session")
            .json(&json!({"message": "hi"}))
            .send(s.addr())
            .unwrap();
        until_waiting(s.addr(), &r);
    };
    let settled = || {
        eventually(Duration::from_secs(30), || {
            metric(&s, "agentkit_turns_in_flight") == Some(0.0)
        })
    };
    turn();
    assert!(settled(), "the first turn's slot was not given back");
    // The samplers' current (busy) sleeps end, then two idle seconds.
    std::thread::sleep(Duration::from_millis(1500));
    let before = runtime_switches();
    std::thread::sleep(Duration::from_secs(2));
    let switches = runtime_switches() - before;
    // Measured: 24 in two seconds idle, against 541 before.
    assert!(
        switches < 150,
        "{switches} context switches of the runtime threads in 2 s idle"
    );
    turn();
    assert!(
        settled(),
        "after an idle spell, a turn's slot was not given back"
    );
}

/// Sends `head` (a request's line, headers and the start of its body) on
/// a new connection and reads what comes back until the server closes it
/// (bounded by `within`): the whole answer, as text.
fn raw_answer(addr: SocketAddr, head: &str, within: Duration) -> String {
    let mut c = TcpStream::connect(addr).unwrap();
    c.write_all(head.as_bytes()).unwrap();
    c.set_read_timeout(Some(within)).unwrap();
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match c.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!(
                "no answer (or the connection stayed open) within {within:?}): {e}; got {:?}",
                String::from_utf8_lossy(&answer)
            ),
        }
    }
    String::from_utf8_lossy(&answer).into_owned()
}

/// While the gate's turns run, a new turn is refused by the edge itself:
/// before its body is read and before it is routed, so a request whose
/// body has not arrived (it would otherwise wait for it, up to the body
/// timeout) is answered `503` with `Retry-After` and the JSON error, and
/// counted in `/metrics` (shed, the HTTP route, the refusal's time).
#[test]
fn under_a_full_turn_gate_the_edge_refuses_a_turn_before_reading_its_body() {
    let s = server_with_turn(
        EdgeOptions {
            max_turns: Some(2),
            // Far past the read bound below: an answer can only be the
            // refusal, never the body timeout's 408.
            body_read_timeout: Duration::from_secs(300),
            ..EdgeOptions::default()
        },
        r#"{"steps": [{"text": "ok", "delayMs": 20000}]}"#,
    );
    let mut sessions = Vec::new();
    for _ in 0..2 {
        let r = Request::post("/v1/session")
            .json(&json!({"message": "hi"}))
            .send(s.addr())
            .unwrap();
        assert_eq!(r.status, 200, "{}", r.body);
        sessions.push(r.json()["sessionId"].as_str().unwrap().to_owned());
    }
    let within = Duration::from_secs(60);
    for path in [
        "/v1/session".to_owned(),
        format!("/v1/session/{}", sessions[0]),
    ] {
        // One byte of a 100-byte body: the rest never comes.
        let answer = raw_answer(
            s.addr(),
            &format!(
                "POST {path} HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{{"
            ),
            within,
        );
        let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
        assert!(head.starts_with("HTTP/1.1 503"), "{path}: {answer}");
        assert!(
            head.to_ascii_lowercase().contains("\r\nretry-after: 1"),
            "{path}: {answer}"
        );
        assert!(body.contains(r#""code":"overloaded""#), "{path}: {answer}");
    }
    // A complete turn request is refused the same way; other routes,
    // the running sessions' included, are served.
    let r = Request::post("/v1/session")
        .json(&json!({"message": "hi"}))
        .send(s.addr())
        .unwrap();
    assert_eq!(r.status, 503, "{}", r.body);
    assert_eq!(r.error_code(), "overloaded", "{}", r.body);
    assert_eq!(r.header("retry-after"), Some("1"));
    let r = Request::get(&format!("/v1/session/{}", sessions[1]))
        .send(s.addr())
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let metrics = super::http::scrape(s.addr()).body;
    assert!(metrics.contains("agentkit_turns_shed_total 3"), "{metrics}");
    assert!(
        metrics.contains(r#"agentkit_http_requests_total{route="/v1/session",status="503"} 2"#),
        "{metrics}"
    );
    assert!(
        metrics
            .contains(r#"agentkit_http_requests_total{route="/v1/session/{id}",status="503"} 1"#),
        "{metrics}"
    );
    assert!(
        metrics.contains("agentkit_shed_answer_seconds_count 3"),
        "{metrics}"
    );
    // Each runtime's wake delay is sampled every 10 ms: there is one
    // soon (a quick run may scrape before the first).
    assert!(
        eventually(Duration::from_secs(10), || {
            let metrics = super::http::scrape(s.addr()).body;
            metrics.contains(r#"agentkit_runtime_wake_delay_seconds_count{runtime="edge"}"#)
                && metrics.contains(r#"agentkit_runtime_wake_delay_seconds_count{runtime="main"}"#)
        }),
        "no wake delay sampled on each runtime: {}",
        super::http::scrape(s.addr()).body
    );
}

/// With `--edge-threads 0` the edge runs on the main runtime (the
/// default on one core): turns are served and read through the same
/// path (the body read before routing, the slot reserved), a full gate
/// still refuses a half-sent turn before its body, and no edge runtime
/// is sampled.
#[test]
fn on_the_main_runtime_the_edge_serves_and_refuses_turns_the_same_way() {
    let s = server_with_turn(
        EdgeOptions {
            max_turns: Some(1),
            body_read_timeout: Duration::from_secs(300),
            edge_threads: Some(0),
            ..EdgeOptions::default()
        },
        r#"{"steps": [{"text": "ok", "delayMs": 20000}]}"#,
    );
    let r = Request::post("/v1/session")
        .json(&json!({"message": "hi"}))
        .send(s.addr())
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let session = r.json()["sessionId"].as_str().unwrap().to_owned();
    let answer = raw_answer(
        s.addr(),
        "POST /v1/session HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{",
        Duration::from_secs(60),
    );
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains(r#""code":"overloaded""#), "{answer}");
    let r = Request::get(&format!("/v1/session/{session}"))
        .send(s.addr())
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        eventually(Duration::from_secs(10), || {
            super::http::scrape(s.addr())
                .body
                .contains(r#"agentkit_runtime_wake_delay_seconds_count{runtime="main"}"#)
        }),
        "the main runtime is not sampled"
    );
    let metrics = super::http::scrape(s.addr()).body;
    assert!(
        !metrics.contains(r#"runtime="edge""#),
        "an edge runtime is sampled: {metrics}"
    );
    assert!(metrics.contains("agentkit_turns_shed_total 1"), "{metrics}");
}

/// Sends `request` on `c` and reads one answer (its head and a
/// `content-length` body).
fn ask(c: &mut TcpStream, request: &str) -> String {
    c.write_all(request.as_bytes()).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&answer).into_owned();
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse::<usize>().unwrap())
                })
                .expect("an answer with a content-length");
            if answer.len() >= end + 4 + length {
                return text;
            }
        }
        let n = c.read(&mut buf).unwrap();
        assert!(n > 0, "the connection closed mid-answer: {text}");
        answer.extend_from_slice(&buf[..n]);
    }
}

fn closes(answer: &str) -> bool {
    answer
        .to_ascii_lowercase()
        .contains("\r\nconnection: close\r\n")
}

/// While the main runtime is calm a new connection is served on it (no
/// handoff between threads for each request); a full gate puts it under
/// pressure: a connection there is closed after its answer, and new ones
/// are served on the edge's runtime until the main runtime is calm again,
/// when a connection on the edge is closed after its answer in turn and
/// the next one is served on the main runtime.
#[test]
fn connections_are_served_on_the_main_runtime_while_calm_and_on_the_edge_under_pressure() {
    const HEALTH: &str = "GET /v1/health HTTP/1.1\r\nhost: localhost\r\n\r\n";
    const TURN: &str = "POST /v1/session HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: 16\r\n\r\n{\"message\":\"hi\"}";
    let s = server_with_turn(
        EdgeOptions {
            max_turns: Some(1),
            edge_threads: Some(1),
            ..EdgeOptions::default()
        },
        r#"{"steps": [{"text": "ok", "delayMs": 2000}]}"#,
    );
    let on_main = || metric(&s, "agentkit_http_connections_on_main_runtime").unwrap();
    // A keep-alive connection served on the main runtime once it is calm
    // (the host has just booted): it and the scrape's own are counted.
    let calm_connection = || {
        let mut found = None;
        let calm = eventually(Duration::from_secs(60), || {
            let mut c = TcpStream::connect(s.addr()).unwrap();
            let answer = ask(&mut c, HEALTH);
            assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
            let placed = !closes(&answer) && on_main() >= 2.0;
            if placed {
                found = Some(c);
            }
            placed
        });
        assert!(calm, "no connection was served on the main runtime");
        found.unwrap()
    };
    let mut a = calm_connection();
    assert_eq!(
        metric(&s, "agentkit_http_connections_moved_total"),
        Some(0.0)
    );

    // One turn fills the gate; the next, on `a`, is shed: the main runtime
    // is under pressure, and `a` is closed after the `503`.
    let r = Request::post("/v1/session")
        .json(&json!({"message": "hi"}))
        .send(s.addr())
        .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let answer = ask(&mut a, TURN);
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(closes(&answer), "{answer}");
    read_to_close(&mut a, Duration::from_secs(10)).expect("the connection is closed");
    // `a`, and the admitted turn's own: that turn filled the gate, which
    // counts as near shedding.
    assert_eq!(
        metric(&s, "agentkit_http_connections_moved_total"),
        Some(2.0)
    );

    // Shed again, then a new connection: served on the edge's runtime,
    // kept open while the pressure lasts (the scrape's too).
    let mut b = TcpStream::connect(s.addr()).unwrap();
    let answer = ask(&mut b, TURN);
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(!closes(&answer), "{answer}");
    assert_eq!(on_main(), 0.0);

    // The turn settles and nothing more is shed: calm again, `b` is
    // closed after an answer and a new connection is served on the main
    // runtime.
    assert!(
        eventually(Duration::from_secs(60), || closes(&ask(&mut b, HEALTH))),
        "the edge's connection was never moved back"
    );
    read_to_close(&mut b, Duration::from_secs(10)).expect("the connection is closed");
    let _c = calm_connection();
    assert!(metric(&s, "agentkit_http_connections_moved_total").unwrap() >= 3.0);
}
