//! PostgreSQL for tests: a throwaway database per test on the server at
//! `AGENTKIT_TEST_PG` (default `postgres://postgres@127.0.0.1:5432`),
//! created with `psql` and dropped (with its connections) when the guard
//! goes. Under `CI=true` a missing server fails the test; elsewhere the
//! test is skipped with a line saying so.

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// The PostgreSQL backend, for suites below the facade that run over both
/// shared stores (the in-memory one and this).
pub use agentkit_pg::PgBackend;

/// The server tests use, without a database name.
pub fn server_url() -> String {
    std::env::var("AGENTKIT_TEST_PG")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432".to_owned())
}

/// A database that exists for one test.
#[derive(Debug)]
pub struct PgDatabase {
    /// `postgres://…/agentkit_t_<random>`.
    pub url: String,
    pub name: String,
    server: String,
}

impl Drop for PgDatabase {
    fn drop(&mut self) {
        let _ = psql(
            &self.server,
            "postgres",
            &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
        );
    }
}

impl PgDatabase {
    /// Runs `sql` in this database with `psql`, answering its unaligned,
    /// tuples-only output (`|`-separated columns, a row per line).
    pub fn query(&self, sql: &str) -> String {
        psql(&self.server, &self.name, sql).unwrap_or_else(|e| panic!("psql {sql}: {e}"))
    }
}

fn psql(server: &str, db: &str, sql: &str) -> Result<String, String> {
    let out = Command::new("psql")
        .arg(format!("{server}/{db}"))
        .args(["-v", "ON_ERROR_STOP=1", "-At", "-c", sql])
        .env("PGCONNECT_TIMEOUT", "3")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run psql: {e}"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_owned());
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// A fresh, empty database, or `None` (after printing why) when no
/// server is reachable outside CI. Under `CI=true` an unreachable server
/// panics: the tests that need it must run there.
pub fn throwaway_database() -> Option<PgDatabase> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let server = server_url();
    if let Err(e) = psql(&server, "postgres", "SELECT 1") {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("PostgreSQL not reachable at {server} under CI=true: {e}");
        }
        // The test's own output (captured unless it fails or runs with
        // --nocapture), so a skipped run says so.
        use std::io::Write as _;
        let _ = writeln!(
            std::io::stderr(),
            "skipped: PostgreSQL not reachable at {server} ({e})"
        );
        return None;
    }
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let name = format!(
        "agentkit_t_{}_{}_{}",
        std::process::id(),
        nanos % 1_000_000_000,
        COUNTER.fetch_add(1, Ordering::SeqCst)
    );
    psql(&server, "postgres", &format!("CREATE DATABASE {name}"))
        .unwrap_or_else(|e| panic!("CREATE DATABASE {name}: {e}"));
    Some(PgDatabase {
        url: format!("{server}/{name}"),
        name,
        server,
    })
}
