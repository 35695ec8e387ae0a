//! The agentkit harness: model providers (`openai`, `anthropic`,
//! `scripted:<file>`, `test`) and the agent loop.
//!
//! Not built yet: the providers and the loop arrive with the sessions and
//! harness issues. The model strings they will accept are already parsed
//! and validated by `agentkit-manifest`. Until then this crate exports
//! nothing.
