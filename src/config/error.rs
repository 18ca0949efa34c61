//! [`InputError`]: a problem with user input. It lives with the configuration because every
//! layer that reads input (config, machine, workload, partition parameters) produces it, and
//! those layers sit below the experiments and the CLI that report it.

use std::fmt;

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
