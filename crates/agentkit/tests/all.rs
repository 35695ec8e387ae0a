//! Integration tests of the facade: the documentation stays in step with
//! the code it documents, and the bundled fixtures work through the facade.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod suite;
