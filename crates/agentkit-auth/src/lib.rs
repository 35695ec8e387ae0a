//! agentkit auth: the `AuthContext` and the request policy chain.
//!
//! This crate will evaluate the policy chains that `agentkit-manifest`
//! already parses and validates (`local_dev_strict`, `local_dev`,
//! `loopback_only`, `bearer`, `shared_secret`, `hmac_signature`,
//! `allow_all`, `public_endpoint`). Evaluation arrives with the HTTP
//! serving issue; until then this crate exports nothing.
