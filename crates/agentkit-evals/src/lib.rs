//! agentkit's eval runner: which cases to run ([`select`]), running them
//! against a server through [`agentkit_client`] ([`run`]: iterations,
//! bounded concurrency, per-turn timeouts, parked calls denied), every
//! expectation checked and reported with what was expected and what was
//! seen ([`expect`]), LLM judges ([`judge`], through the harness's
//! providers and cassettes), and the reports: one stable JSON document
//! ([`Report`]), JUnit XML ([`junit_xml`]), text for terminals and logs
//! ([`text`]), and the comparison with an earlier run ([`compare`]).
//!
//! Not here: booting a server (the binary or the facade does, then hands
//! over a [`agentkit_client::Client`]) and anything of the runtime's
//! internals: cases see the server only through its public API.

mod baseline;
mod error;
pub mod expect;
pub mod judge;
mod junit;
mod report;
mod runner;
mod select;
pub mod text;

pub use baseline::{Comparison, Regression, compare, read_baseline};
pub use error::{Error, Result};
pub use junit::junit_xml;
pub use report::{
    CaseReport, CheckResult, IterationReport, JudgeRecord, Outcome, REPORT_VERSION, Report,
    Summary, ToolCallSeen, TurnReport,
};
pub use runner::{JudgeOptions, NoProgress, Progress, RunOptions, run};
pub use select::{list_json, select};
