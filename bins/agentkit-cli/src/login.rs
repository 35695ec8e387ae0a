//! `agentkit login`, `logout` and `whoami`: the stored provider keys.

use std::io::BufRead;
use std::process::ExitCode;

use agentkit::credentials::CredentialStore;
use anyhow::Context;
use clap::Args;

/// The flags of `agentkit login`.
#[derive(Debug, Args)]
pub(crate) struct LoginArgs {
    /// `openai` or `anthropic`.
    #[arg(long)]
    provider: String,
    /// The key; without it, the first line of standard input is read (so
    /// the key stays out of shell history).
    #[arg(long, value_name = "KEY")]
    api_key: Option<String>,
}

/// The flags of `agentkit logout`.
#[derive(Debug, Args)]
pub(crate) struct LogoutArgs {
    /// `openai` or `anthropic`.
    #[arg(long)]
    provider: String,
}

/// The flags of `agentkit whoami`.
#[derive(Debug, Args)]
pub(crate) struct WhoamiArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

fn store() -> anyhow::Result<CredentialStore> {
    let dir = CredentialStore::default_dir(env)
        .context("cannot find a config directory: set HOME or XDG_CONFIG_HOME")?;
    Ok(CredentialStore::new(dir))
}

/// The provider endpoints every command uses: the environment, then the
/// stored keys.
pub(crate) fn provider_config(api_keys: &[String]) -> anyhow::Result<agentkit::ProviderConfig> {
    let mut config = agentkit::credentials::resolve_providers(env);
    agentkit::credentials::apply_api_keys(&mut config, api_keys)?;
    Ok(config)
}

pub(crate) fn login(args: LoginArgs) -> anyhow::Result<ExitCode> {
    let key = match args.api_key {
        Some(k) => k,
        None => {
            let mut line = String::new();
            std::io::stdin()
                .lock()
                .read_line(&mut line)
                .context("cannot read the key from standard input")?;
            line
        }
    };
    let store = store()?;
    store.login(&args.provider, &key)?;
    println!(
        "stored the {} key in {} (mode 0600)",
        args.provider,
        store.path().display()
    );
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn logout(args: LogoutArgs) -> anyhow::Result<ExitCode> {
    let store = store()?;
    if store.logout(&args.provider)? {
        println!("removed the stored {} key", args.provider);
    } else {
        println!("no stored {} key", args.provider);
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn whoami(args: WhoamiArgs) -> anyhow::Result<ExitCode> {
    let sources = store()?.whoami(env);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&sources)?);
    } else {
        for s in &sources {
            let detail = s
                .variable
                .as_deref()
                .or(s.path.as_deref())
                .map(|d| format!(" ({d})"))
                .unwrap_or_default();
            println!("{}: {}{detail}", s.provider, s.source);
        }
    }
    Ok(ExitCode::SUCCESS)
}
