//! `agentkit db migrate|status`: the shared database's schema.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};

/// The flags of `agentkit db`.
#[derive(Debug, Args)]
pub(crate) struct DbArgs {
    #[command(subcommand)]
    command: DbCommand,
}

#[derive(Debug, Subcommand)]
enum DbCommand {
    /// Apply every pending migration (safe while hosts start: they take
    /// the same advisory lock). Exits 0 when the schema is current.
    Migrate(Target),
    /// Show the schema version and each migration, applied or pending.
    /// Exits 0 when nothing is pending, 1 otherwise.
    Status(Target),
}

#[derive(Debug, Args)]
struct Target {
    /// The database (postgres://user@host:port/database).
    #[arg(
        long,
        env = "AGENTKIT_DATABASE_URL",
        hide_env_values = true,
        value_name = "URL"
    )]
    database_url: String,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub(crate) fn db(args: DbArgs) -> anyhow::Result<ExitCode> {
    let runtime = crate::boot::tokio_runtime()?;
    match args.command {
        DbCommand::Migrate(target) => runtime.block_on(migrate(target)),
        DbCommand::Status(target) => runtime.block_on(status(target)),
    }
}

async fn migrate(target: Target) -> anyhow::Result<ExitCode> {
    let shown = agentkit::db::redacted(&target.database_url);
    let applied = agentkit::db::migrate(&target.database_url)
        .await
        .with_context(|| format!("cannot migrate {shown}"))?;
    let status = agentkit::db::status(&target.database_url).await?;
    let mut out = anstream::stdout();
    if target.json {
        let doc = serde_json::json!({
            "database": status.database,
            "applied": applied,
            "current": status.current,
            "latest": status.latest,
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&doc)?)?;
    } else if applied.is_empty() {
        writeln!(
            out,
            "{shown}: schema at version {}, nothing to apply",
            status.current
        )?;
    } else {
        let list: Vec<String> = applied.iter().map(i32::to_string).collect();
        writeln!(
            out,
            "{shown}: applied {} (schema now at version {})",
            list.join(", "),
            status.current
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

async fn status(target: Target) -> anyhow::Result<ExitCode> {
    let shown = agentkit::db::redacted(&target.database_url);
    let status = agentkit::db::status(&target.database_url)
        .await
        .with_context(|| format!("cannot read the schema of {shown}"))?;
    let mut out = anstream::stdout();
    if target.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&status)?)?;
    } else {
        writeln!(
            out,
            "{}: schema at version {} of {} ({} pending)",
            status.database,
            status.current,
            status.latest,
            status.pending()
        )?;
        for m in &status.migrations {
            match &m.applied_at {
                Some(at) => writeln!(out, "  {:>4}  {:<24} applied {at}", m.version, m.name)?,
                None => writeln!(out, "  {:>4}  {:<24} pending", m.version, m.name)?,
            }
        }
        for v in &status.unknown {
            writeln!(
                out,
                "  {v:>4}  (unknown to this binary: a newer agentkit migrated it)"
            )?;
        }
    }
    Ok(if status.pending() == 0 && status.unknown.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
