//! Error types shared by the library. Every input problem becomes an [`InputError`] that
//! names where it came from (a file, a `--set` override or a flag), the key and the reason;
//! the binary prints it and exits with code 2.

use std::fmt;

/// Exit code for bad input (files, flags, overrides).
pub const EXIT_BAD_INPUT: i32 = 2;
/// Exit code for failures that are not the input's fault.
pub const EXIT_FAILURE: i32 = 1;

/// A problem with user input. `origin` is a file path, `--set key=value` or a flag such as
/// `--partitioner`; `key` is the dotted key inside it, when there is one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputError {
    pub origin: String,
    pub key: Option<String>,
    pub reason: String,
}

impl InputError {
    pub fn new(origin: impl Into<String>, key: Option<&str>, reason: impl Into<String>) -> Self {
        InputError {
            origin: origin.into(),
            key: key.map(str::to_owned),
            reason: reason.into(),
        }
    }

    pub fn key(origin: impl Into<String>, key: &str, reason: impl Into<String>) -> Self {
        Self::new(origin, Some(key), reason)
    }

    pub fn plain(origin: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::new(origin, None, reason)
    }
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.key {
            Some(key) => write!(f, "{}: key `{}`: {}", self.origin, key, self.reason),
            None => write!(f, "{}: {}", self.origin, self.reason),
        }
    }
}

impl std::error::Error for InputError {}

/// Every error the library returns.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The input is wrong; nothing was computed. Exit code 2.
    #[error("{0}")]
    Input(#[from] InputError),
    /// A kernel failed on a DPU (for a microbenchmark: the machine cannot run it, e.g. too
    /// little WRAM). Exit code 2: the machine description is the cause.
    #[error("{0}")]
    Kernel(#[from] crate::dpu::LaunchError),
    /// The simulation failed for a reason that is not the input's (a kernel bug).
    #[error("simulation failed: {0}")]
    Simulation(String),
    /// The DPUs' answers disagree with the plain reference.
    #[error("answers not verified: {0}")]
    Verification(String),
    /// Writing output failed.
    #[error("cannot write {path}: {reason}")]
    Output { path: String, reason: String },
}

impl Error {
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Input(_) | Error::Kernel(_) => EXIT_BAD_INPUT,
            Error::Output { .. } | Error::Simulation(_) | Error::Verification(_) => EXIT_FAILURE,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
