//! The `agentkit-serve` binary.
fn main() {}
