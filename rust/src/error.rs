//! The one error type of the core. Python sees every variant as `ValueError` (see `python/mod.rs`);
//! a search past its time limit as `TimeLimitExceeded`, a subclass of it.

use std::fmt;

/// An error raised by a kernel. `arg` names the offending argument so users can fix their call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CoreError {
    /// An argument broke a rule (wrong length, NaN, k = 0, …).
    InvalidArgument { arg: &'static str, rule: String },
    /// Serialised bytes could not be decoded.
    Corrupt(String),
    /// A stored file's bytes are not those recorded for it (cut, or changed in place): the
    /// message names the file and its first such block.
    Damaged(String),
    /// A search ran past its time limit; `arg` names what made it slow (the pattern).
    TimeLimitExceeded { arg: &'static str, rule: String },
}

impl CoreError {
    /// Shorthand for [`CoreError::InvalidArgument`].
    pub fn invalid(arg: &'static str, rule: impl Into<String>) -> Self {
        Self::InvalidArgument {
            arg,
            rule: rule.into(),
        }
    }
}

impl fmt::Display for CoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidArgument { arg, rule } | Self::TimeLimitExceeded { arg, rule } => {
                write!(f, "{arg}: {rule}")
            }
            Self::Damaged(what) => write!(f, "{what}"),
            Self::Corrupt(what) => {
                write!(f, "data: corrupt or incompatible serialised index ({what})")
            }
        }
    }
}

impl std::error::Error for CoreError {}

/// Result alias used by every kernel.
pub type CoreResult<T> = Result<T, CoreError>;
