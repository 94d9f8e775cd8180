//! octobrain-core: the pure-Rust kernels behind `octobrain._core`.
//!
//! Every kernel is plain Rust over owned data (no IO, no Python). The PyO3 bindings live in
//! `python/` (one file per family of kernels), compiled only with the `python` feature, so
//! `cargo test` runs without Python.

pub mod bm25;
pub mod cluster;
pub mod decay;
pub mod error;
pub mod fusion;
pub mod idindex;
pub mod regex_deadline;
mod regex_dfa;
pub mod regex_match;
mod regex_nfa;
pub mod rowcrc;
pub mod tokenize;
pub mod topk;

#[cfg(feature = "python")]
mod python;

pub use error::{CoreError, CoreResult};
