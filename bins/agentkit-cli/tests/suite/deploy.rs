//! The deployment recipe of docs/guides/deploy.md: the guide shows the
//! files under `deploy/` as they are; the server command of each (the
//! container's entrypoint, the systemd unit's `ExecStart`, the Kubernetes
//! container's `args`) starts this build's server, which answers the
//! probes' path and exits 0 on `SIGTERM` (how a container runtime and
//! systemd stop it); the systemd unit passes `systemd-analyze verify`
//! where it is installed.

use std::path::{Path, PathBuf};
use std::time::Duration;

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(workspace().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

#[test]
fn the_guide_shows_the_deploy_files_as_they_are() {
    let guide = read("docs/guides/deploy.md");
    for rel in [
        "deploy/Dockerfile",
        "deploy/agentkit.service",
        "deploy/agentkit.toml",
        "deploy/kubernetes/agentkit.yaml",
    ] {
        assert!(
            guide.contains(&read(rel)),
            "docs/guides/deploy.md does not show {rel} as it is"
        );
    }
}

/// The host configuration file each recipe's `--config` names: the
/// systemd unit's `deploy/agentkit.toml`, the Kubernetes ConfigMap's
/// `agentkit.toml`.
fn config_of(what: &str) -> Option<String> {
    match what {
        "systemd unit" => Some(read("deploy/agentkit.toml")),
        "Kubernetes" => {
            let manifest = read("deploy/kubernetes/agentkit.yaml");
            let at = manifest
                .find("  agentkit.toml: |\n")
                .expect("the ConfigMap's file");
            let text: Vec<&str> = manifest[at..]
                .lines()
                .skip(1)
                .take_while(|l| *l != "---")
                .map(|l| l.strip_prefix("    ").unwrap_or(l))
                .collect();
            Some(text.join("\n") + "\n")
        }
        _ => None,
    }
}

/// `text` made local to this test: its secrets files under `secrets`
/// (written here), its state root `state`, its port `port`; the shared
/// database a throwaway one (its line dropped when no PostgreSQL is
/// reachable outside CI).
fn local_config(
    text: &str,
    dir: &Path,
    state: &Path,
    port: &str,
) -> (PathBuf, Option<agentkit_test_support::pg::PgDatabase>) {
    let secrets = dir.join("secrets");
    std::fs::create_dir_all(&secrets).unwrap();
    std::fs::write(secrets.join("operator-token"), "ops-token\n").unwrap();
    let mut text = text
        .replace(
            "/run/credentials/agentkit.service/",
            &format!("{}/", secrets.display()),
        )
        .replace("/run/secrets/agentkit/", &format!("{}/", secrets.display()))
        .replace("/var/lib/agentkit", &state.display().to_string())
        .replace("0.0.0.0:3000", &format!("127.0.0.1:{port}"))
        .replace("127.0.0.1:3000", &format!("127.0.0.1:{port}"));
    let mut database = None;
    if text.contains("database-url") {
        database = agentkit_test_support::pg::throwaway_database();
        match &database {
            Some(db) => std::fs::write(secrets.join("database-url"), &db.url).unwrap(),
            None => {
                text = text
                    .lines()
                    .filter(|l| !l.starts_with("database_url"))
                    .collect::<Vec<_>>()
                    .join("\n");
            }
        }
    }
    let path = dir.join("agentkit.toml");
    std::fs::write(&path, text).unwrap();
    (path, database)
}

/// The server arguments of each recipe (after `agentkit`).
fn commands() -> Vec<(&'static str, Vec<String>)> {
    let docker = read("deploy/Dockerfile");
    let entry = docker
        .lines()
        .find_map(|l| l.strip_prefix("ENTRYPOINT "))
        .expect("an ENTRYPOINT");
    let entry: Vec<String> = serde_json::from_str(entry).expect("ENTRYPOINT in exec form");
    let unit = read("deploy/agentkit.service");
    let exec = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .expect("an ExecStart");
    let manifest = read("deploy/kubernetes/agentkit.yaml");
    let args_at = manifest
        .find("          args:\n")
        .expect("the container's args");
    let k8s: Vec<String> = manifest[args_at..]
        .lines()
        .skip(1)
        .map_while(|l| l.strip_prefix("            - "))
        .map(|a| a.trim_matches('"').to_owned())
        .collect();
    vec![
        ("Dockerfile", entry[1..].to_vec()),
        (
            "systemd unit",
            exec.split_whitespace().skip(1).map(str::to_owned).collect(),
        ),
        ("Kubernetes", k8s),
    ]
}

#[cfg(unix)]
#[test]
fn each_recipe_command_serves_the_probe_path_and_stops_on_sigterm() {
    for (what, args) in commands() {
        assert_eq!(args.first().map(String::as_str), Some("serve"), "{what}");
        let state = tempfile::tempdir().unwrap();
        let port = agentkit_test_support::process::free_port().to_string();
        let agents = super::fixtures().join("agents");
        let etc = tempfile::tempdir().unwrap();
        let config = match config_of(what) {
            Some(text) => {
                assert!(
                    args.iter().any(|a| a == "--config"),
                    "{what} names its file"
                );
                Some(local_config(&text, etc.path(), state.path(), &port))
            }
            None => None,
        };
        // The recipe's paths and address, made local to this test.
        let local: Vec<String> = args
            .iter()
            .map(|a| match a.as_str() {
                "/srv/agents" => agents.display().to_string(),
                "/etc/agentkit/agentkit.toml" => match &config {
                    Some((path, _)) => path.display().to_string(),
                    None => a.clone(),
                },
                "/var/lib/agentkit" => state.path().display().to_string(),
                "0.0.0.0" => "127.0.0.1".to_owned(),
                "3000" => port.clone(),
                other => other
                    .replace("$(POD_IP)", "127.0.0.1")
                    .replace(":3000", &format!(":{port}")),
            })
            .collect();
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_agentkit"));
        command
            .args(&local)
            .env("AGENTKIT_MODEL", "test")
            .env("NO_COLOR", "1")
            .env_remove("AGENTKIT_DATABASE_URL");
        let (status, _) = agentkit_test_support::process::serve_then_stop(
            command,
            port.parse().unwrap(),
            Duration::from_secs(30),
        );
        assert!(status.success(), "{what}: {local:?} exited with {status}");
        // The file's state root was used.
        assert!(
            std::fs::read_dir(state.path()).unwrap().next().is_some(),
            "{what}: nothing under the state root"
        );
    }
}

#[test]
fn the_systemd_unit_verifies() {
    let Ok(probe) = std::process::Command::new("systemd-analyze")
        .arg("--version")
        .output()
    else {
        assert!(
            std::env::var("CI").is_err(),
            "systemd-analyze is missing under CI"
        );
        return;
    };
    assert!(probe.status.success());
    // The unit as installed, its program this build's binary.
    let dir = tempfile::tempdir().unwrap();
    let unit = read("deploy/agentkit.service")
        .replace("/usr/local/bin/agentkit", env!("CARGO_BIN_EXE_agentkit"));
    let path: &Path = &dir.path().join("agentkit.service");
    std::fs::write(path, unit).unwrap();
    let out = std::process::Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stderr.trim().is_empty(),
        "systemd-analyze verify: {stderr}"
    );
}
