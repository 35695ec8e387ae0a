//! `agentkit migrate`: converts a TypeScript framework project with the
//! facade's `migrate`, prints its report, then validates what it wrote.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use crate::render;
use agentkit_cli::EXIT_INVALID;

#[derive(Debug, clap::Args)]
pub(crate) struct MigrateArgs {
    /// The TypeScript project (the folder holding agent/), or a folder of
    /// such projects (each becomes a project of the same name in --to).
    #[arg(long, value_name = "PATH")]
    from: PathBuf,
    /// Where the agentkit project is written; it must be empty or absent
    /// unless --force.
    #[arg(long, value_name = "DIR")]
    to: PathBuf,
    /// Write into a non-empty --to (files of the same name are replaced).
    #[arg(long)]
    force: bool,
    /// Print the report (and the validation of the output) as JSON.
    #[arg(long)]
    json: bool,
    /// The node program that loads the project's modules (default: `node`
    /// on PATH).
    #[arg(long, value_name = "PATH", conflicts_with = "no_node")]
    node: Option<PathBuf>,
    /// Do not use Node: convert only what needs no code run.
    #[arg(long)]
    no_node: bool,
    /// A node_modules folder where the shim finds `zod` and `typescript`
    /// when the project has none of its own (repeatable).
    #[arg(
        long = "node-modules",
        value_name = "DIR",
        env = "AGENTKIT_MIGRATE_NODE_MODULES",
        value_delimiter = ':'
    )]
    node_modules: Vec<PathBuf>,
}

pub(crate) fn migrate(args: MigrateArgs) -> anyhow::Result<ExitCode> {
    let node = if args.no_node {
        None
    } else {
        args.node
            .clone()
            .or_else(|| agentkit::migrate::node_on_path(std::env::var_os("PATH").as_deref()))
    };
    let options = agentkit::migrate::MigrateOptions {
        from: args.from.clone(),
        to: args.to.clone(),
        force: args.force,
        node,
        node_modules: args.node_modules.clone(),
    };
    let report = agentkit::migrate::migrate(&options)
        .with_context(|| format!("cannot migrate `{}`", args.from.display()))?;
    let env = agentkit::EnvLookup::process();
    let found = agentkit::validate(&args.to, |name| env.is_set(name))
        .with_context(|| format!("cannot validate `{}`", args.to.display()))?;
    let mut out = anstream::stdout();
    if args.json {
        let doc = serde_json::json!({
            "report": report,
            "validation": {
                "ok": !found.diagnostics.has_errors(),
                "errors": found.diagnostics.error_count(),
                "warnings": found.diagnostics.warning_count(),
                "diagnostics": found.diagnostics,
            },
        });
        render::json(&mut out, &doc)?;
    } else {
        write!(out, "{}", report.to_text())?;
        writeln!(
            out,
            "\nvalidate {}: {} error(s), {} warning(s)",
            args.to.display(),
            found.diagnostics.error_count(),
            found.diagnostics.warning_count()
        )?;
        if !found.diagnostics.is_empty() {
            render::diagnostics(&mut out, &found)?;
        }
    }
    // A module Node could not load lost its code (tools, route handlers,
    // schedules): the migration is not done, whatever validates.
    Ok(
        if found.diagnostics.has_errors() || report.modules_failed() > 0 {
            ExitCode::from(EXIT_INVALID)
        } else {
            ExitCode::SUCCESS
        },
    )
}
