//! TLS to the database with rustls: `sslmode=require` against the test
//! server (when it has `ssl = on`), and `verify-full` / `verify-ca`
//! against a throwaway cluster started with `ssl = on` and a certificate
//! this test makes (`openssl req`, the CLI only) and signs with its own
//! CA: the right CA connects, another CA is refused, a name the
//! certificate does not hold is refused by `verify-full` and accepted by
//! `verify-ca`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agentkit_pg::Database;
use agentkit_test_support::pg::{server_url, throwaway_database};

fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Says why a test did not run (in its captured output).
fn skipped(why: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "skipped: {why}");
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

#[tokio::test]
async fn sslmode_require_encrypts_the_connections() {
    let Some(db) = throwaway_database() else {
        return;
    };
    if db.query("SHOW ssl") != "on" {
        skipped(&format!("the server at {} has ssl = off", server_url()));
        return;
    }
    let plain = Database::connect(&db.url).await.unwrap();
    assert!(!plain.encrypted().await.unwrap(), "no sslmode: plain");
    let url = format!("{}?sslmode=require", db.url);
    let tls = Database::connect(&url).await.unwrap();
    assert!(tls.encrypted().await.unwrap());
    tls.migrate().await.unwrap();
    assert_eq!(tls.status().await.unwrap().pending(), 0);
}

/// A CA and a server certificate it signed for `127.0.0.1` and
/// `localhost`, and a second CA that signed nothing.
struct Certs {
    ca: PathBuf,
    other_ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

fn make_certs(dir: &Path) -> Result<Certs, String> {
    let p = |name: &str| dir.join(name);
    for ca in ["ca", "other"] {
        run(Command::new("openssl")
            .args([
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            ])
            .args(["-subj", &format!("/CN=agentkit test {ca}")])
            .arg("-keyout")
            .arg(p(&format!("{ca}.key")))
            .arg("-out")
            .arg(p(&format!("{ca}.pem"))))?;
    }
    run(Command::new("openssl")
        .args([
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=127.0.0.1",
        ])
        .arg("-keyout")
        .arg(p("server.key"))
        .arg("-out")
        .arg(p("server.csr")))?;
    std::fs::write(
        p("san.ext"),
        "subjectAltName = IP:127.0.0.1, DNS:localhost\nbasicConstraints = CA:FALSE\n",
    )
    .map_err(|e| e.to_string())?;
    run(Command::new("openssl")
        .args(["x509", "-req", "-days", "2"])
        .arg("-in")
        .arg(p("server.csr"))
        .arg("-CA")
        .arg(p("ca.pem"))
        .arg("-CAkey")
        .arg(p("ca.key"))
        .arg("-CAcreateserial")
        .arg("-extfile")
        .arg(p("san.ext"))
        .arg("-out")
        .arg(p("server.pem")))?;
    Ok(Certs {
        ca: p("ca.pem"),
        other_ca: p("other.pem"),
        cert: p("server.pem"),
        key: p("server.key"),
    })
}

/// A PostgreSQL cluster of its own (`initdb`, `pg_ctl`), with `ssl = on`,
/// on a free port; stopped when dropped. Run as `postgres` when this
/// process is root (initdb refuses root).
struct Cluster {
    dir: PathBuf,
    port: u16,
    as_postgres: bool,
    _server: Option<Child>,
}

fn as_server_user(as_postgres: bool, program: &str) -> Command {
    if as_postgres {
        let mut cmd = Command::new("runuser");
        cmd.args(["-u", "postgres", "--", program]);
        cmd
    } else {
        Command::new(program)
    }
}

impl Cluster {
    fn start(root: &Path, certs: &Certs) -> Result<Cluster, String> {
        let as_postgres = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
        let dir = root.join("cluster");
        if as_postgres {
            run(Command::new("chmod").arg("755").arg(root))?;
            std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
            run(Command::new("chown").arg("postgres").arg(&dir))?;
        }
        run(as_server_user(as_postgres, "initdb")
            .args(["-A", "trust", "-U", "postgres", "-D"])
            .arg(&dir))?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        for (from, to) in [(&certs.cert, "server.crt"), (&certs.key, "server.key")] {
            std::fs::copy(from, dir.join(to)).map_err(|e| e.to_string())?;
            if as_postgres {
                run(Command::new("chown").arg("postgres").arg(dir.join(to)))?;
            }
            run(Command::new("chmod").arg("600").arg(dir.join(to)))?;
        }
        let conf = format!(
            "\nport = {port}\nlisten_addresses = '127.0.0.1,127.0.0.2'\nunix_socket_directories = ''\nssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\nfsync = off\n"
        );
        let mut existing =
            std::fs::read_to_string(dir.join("postgresql.conf")).map_err(|e| e.to_string())?;
        existing.push_str(&conf);
        std::fs::write(dir.join("postgresql.conf"), existing).map_err(|e| e.to_string())?;
        run(as_server_user(as_postgres, "pg_ctl")
            .arg("-D")
            .arg(&dir)
            .arg("-l")
            .arg(dir.join("log"))
            .args(["-w", "-t", "30", "start"]))?;
        Ok(Cluster {
            dir,
            port,
            as_postgres,
            _server: None,
        })
    }

    fn url(&self, host: &str, query: &str) -> String {
        format!("postgres://postgres@{host}:{}/postgres?{query}", self.port)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = as_server_user(self.as_postgres, "pg_ctl")
            .arg("-D")
            .arg(&self.dir)
            .args(["-m", "immediate", "-w", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

#[tokio::test]
async fn verify_full_checks_the_ca_and_the_name_and_verify_ca_the_ca() {
    let tmp = tempfile::tempdir().unwrap();
    let started = make_certs(tmp.path()).and_then(|certs| {
        let cluster = Cluster::start(tmp.path(), &certs)?;
        Ok((certs, cluster))
    });
    let (certs, cluster) = match started {
        Ok(started) => started,
        Err(e) if ci() => panic!("cannot start a TLS cluster under CI=true: {e}"),
        Err(e) => {
            skipped(&format!("cannot start a TLS cluster ({e})"));
            return;
        }
    };
    let ca = certs.ca.display().to_string();
    let other = certs.other_ca.display().to_string();
    let began = Instant::now();

    let full = Database::connect(&cluster.url(
        "127.0.0.1",
        &format!("sslmode=verify-full&sslrootcert={ca}"),
    ))
    .await
    .unwrap();
    assert!(full.encrypted().await.unwrap());
    full.migrate().await.unwrap();
    // The LISTEN connection and dedicated ones use TLS too: the mailbox
    // needs both.
    let by_name = Database::connect(&cluster.url(
        "localhost",
        &format!("sslmode=verify-full&sslrootcert={ca}"),
    ))
    .await
    .unwrap();
    assert!(by_name.encrypted().await.unwrap());

    // A certificate another CA signed is refused.
    let e = Database::connect(&cluster.url(
        "127.0.0.1",
        &format!("sslmode=verify-full&sslrootcert={other}"),
    ))
    .await
    .unwrap_err();
    assert!(e.to_string().to_lowercase().contains("certificate"), "{e}");
    let e = Database::connect(&cluster.url(
        "127.0.0.1",
        &format!("sslmode=verify-ca&sslrootcert={other}"),
    ))
    .await
    .unwrap_err();
    assert!(e.to_string().to_lowercase().contains("certificate"), "{e}");

    // A name the certificate does not hold: verify-full refuses it,
    // verify-ca (the chain only) accepts it.
    let host = "127.0.0.2";
    let e = Database::connect(&cluster.url(host, &format!("sslmode=verify-full&sslrootcert={ca}")))
        .await
        .unwrap_err();
    assert!(e.to_string().to_lowercase().contains("certificate"), "{e}");
    let ca_only =
        Database::connect(&cluster.url(host, &format!("sslmode=verify-ca&sslrootcert={ca}")))
            .await
            .unwrap();
    assert!(ca_only.encrypted().await.unwrap());

    // require: encrypted, whatever signed the certificate.
    let require = Database::connect(&cluster.url("127.0.0.1", "sslmode=require"))
        .await
        .unwrap();
    assert!(require.encrypted().await.unwrap());
    // verify-* without a CA file says what is missing.
    if std::env::var_os("HOME")
        .is_none_or(|h| !Path::new(&h).join(".postgresql/root.crt").is_file())
    {
        let e = Database::connect(&cluster.url("127.0.0.1", "sslmode=verify-full"))
            .await
            .unwrap_err();
        assert!(e.to_string().contains("sslrootcert"), "{e}");
    }
    assert!(began.elapsed() < Duration::from_secs(60));
}
