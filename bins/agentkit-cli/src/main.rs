//! The `agentkit` binary.
fn main() {}
