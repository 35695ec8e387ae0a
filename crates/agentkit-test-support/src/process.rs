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
