//! The HTTP edge on a real socket: a stream follower that stops reading is
//! dropped after the write-stall bound, a request whose body never
//! arrives is answered `408`, and a half-sent request head is closed after
//! the header-read timeout.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use agentkit::{EdgeOptions, ServeOptions};
use agentkit_test_support::http::Request;
use serde_json::json;

use super::http::{Server, write};

/// One scripted agent `bot` whose turns answer "ok" at once, in single
/// mode, with `edge` bounds and a body limit for large messages.
fn server(edge: EdgeOptions) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("agents/bot/agent");
    let turns = vec![r#"{"steps": [{"text": "ok"}]}"#; 64].join(",");
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
    let options = ServeOptions {
        port: 0,
        mode: agentkit::Mode::Single,
        state_root: Some(dir.path().join("state")),
        body_limit: 4 * 1024 * 1024,
        edge,
        ..ServeOptions::default()
    };
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

#[test]
fn at_the_connection_cap_new_connections_wait_and_are_served_later() {
    let s = server(EdgeOptions {
        header_read_timeout: Duration::from_secs(1),
        max_connections: Some(2),
        ..EdgeOptions::default()
    });
    let held: Vec<TcpStream> = (0..2)
        .map(|_| {
            let mut c = TcpStream::connect(s.addr()).unwrap();
            c.write_all(b"GET /v1/health HTTP/1.1\r\n").unwrap();
            c
        })
        .collect();
    // Accepted only once the header timeout has closed a held connection
    // (a connection is closed before its slot is given back).
    let r = Request::get("/v1/health").send(s.addr()).unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
    let mut buf = [0; 16];
    let closed = held
        .iter()
        .filter(|c| {
            let mut c: &TcpStream = c;
            c.set_nonblocking(true).unwrap();
            let closed = match c.read(&mut buf) {
                Ok(0) => true,
                Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
                Ok(_) => false,
            };
            c.set_nonblocking(false).unwrap();
            closed
        })
        .count();
    assert!(
        closed >= 1,
        "a third connection was served while two were held"
    );
    for mut c in held {
        read_to_close(&mut c, Duration::from_secs(30)).unwrap();
    }
}
