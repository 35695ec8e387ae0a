//! agentkit facade.
