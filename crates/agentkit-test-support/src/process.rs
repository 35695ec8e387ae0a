//! Servers as child processes: a free port to give them, and a handle
//! that kills the child when the test ends, however it ends.

use std::net::{SocketAddr, TcpListener};
use std::process::Child;
use std::time::{Duration, Instant};

use crate::http::Request;

/// A port nothing listens on (bound, then released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(0)
}

/// A server child process and the address it serves on; killed (and
/// reaped) when dropped.
#[derive(Debug)]
pub struct ServerProcess {
    pub child: Child,
    pub addr: SocketAddr,
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl ServerProcess {
    /// Waits until `child` answers `GET /v1/health` with 200 on
    /// `127.0.0.1:port` (panicking after `within`), and guards it.
    pub fn healthy(child: Child, port: u16, within: Duration) -> ServerProcess {
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let server = ServerProcess { child, addr };
        let deadline = Instant::now() + within;
        while Request::get("/v1/health").send(addr).map(|r| r.status).ok() != Some(200) {
            assert!(
                Instant::now() < deadline,
                "server did not come up on {addr}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        server
    }
}

/// Runs `command` (a server on `port`) until it is healthy, stops it with
/// SIGTERM as a container runtime would, and answers its exit status and
/// what it printed on stdout (its banner). Panics when it does not come up
/// or does not exit within `within`.
#[cfg(unix)]
pub fn serve_then_stop(
    mut command: std::process::Command,
    port: u16,
    within: Duration,
) -> (std::process::ExitStatus, String) {
    use std::io::Read;
    let child = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {command:?}: {e}"));
    let mut server = ServerProcess::healthy(child, port, within);
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status()
        .is_ok_and(|s| s.success());
    assert!(sent, "cannot send SIGTERM to the server");
    let deadline = Instant::now() + within;
    let status = loop {
        if let Ok(Some(status)) = server.child.try_wait() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "server did not exit after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut out = String::new();
    if let Some(mut stdout) = server.child.stdout.take() {
        let _ = stdout.read_to_string(&mut out);
    }
    (status, out)
}
