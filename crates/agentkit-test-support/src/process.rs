//! Servers as child processes: a free port to give them, and a handle
//! that kills the child when the test ends, however it ends.

use std::net::{SocketAddr, TcpListener};
use std::process::Child;

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
