//! The top-level [`Error`] of pimdes's commands, and exit codes. Only the experiments and the
//! CLI use it: the layers below return their own errors ([`InputError`] from configuration,
//! [`LaunchError`] from the DPU model), and this module sorts them by whose fault they are,
//! which decides the exit code:
//!
//! - 2, bad input: a file, flag or override is wrong, or a kernel hit a limit of the machine
//!   description (too little WRAM, a DMA size rule); the message names the key to change.
//! - 3, simulator bug: a failure that is not the input's fault (a kernel's own failure, a
//!   deadlock, the event limit, answers that disagree with the reference); the message
//!   carries the command line and seed that reproduce it.
//! - 1, anything else (writing the output failed).

use crate::config::Attribution;
pub use crate::config::InputError;
use crate::dpu::LaunchError;

/// Exit code for failures that are neither the input's nor the simulator's (output).
pub const EXIT_FAILURE: i32 = 1;
/// Exit code for bad input: files, flags, overrides, or a machine too small for a kernel.
pub const EXIT_BAD_INPUT: i32 = 2;
/// Exit code for a simulator bug: nothing the user typed is wrong.
pub const EXIT_SIMULATOR_BUG: i32 = 3;

/// Every error a command returns.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The input is wrong; nothing was computed. Exit code 2.
    #[error("{0}")]
    Input(#[from] InputError),
    /// A kernel hit a limit of the machine description (`key`, e.g. `dpu.wram_size_bytes`).
    /// Exit code 2.
    #[error("machine key `{key}`: {error}")]
    Machine {
        key: &'static str,
        error: LaunchError,
    },
    /// A kernel failed for a reason that is not the input's. Exit code 3.
    #[error("simulator bug: {0}")]
    Kernel(LaunchError),
    /// The DPUs' answers disagree with the plain reference. Exit code 3.
    #[error("simulator bug: answers not verified: {0}")]
    Verification(String),
    /// A simulator bug with what reproduces it (see [`Error::reproducible`]).
    #[error("{bug}; reproduce with: {command_line}{}", seed_note(.seed))]
    Reproducible {
        bug: Box<Error>,
        command_line: String,
        /// The workload's seed; `None` where no random numbers are drawn (microbenchmarks).
        seed: Option<u64>,
    },
    /// Simulated time passed the simulator's ceiling: the configuration's costs are too
    /// large for its work. Exit code 2 (commands attach the keys; see
    /// [`crate::system::exec::PastCeiling`]).
    #[error("{0}; lower the configuration's costs or its work")]
    PastCeiling(#[from] crate::system::exec::PastCeiling),
    /// Writing output failed. Exit code 1.
    #[error("cannot write {path}: {reason}")]
    Output { path: String, reason: String },
}

fn seed_note(seed: &Option<u64>) -> String {
    match seed {
        Some(s) => format!(" (seed {s})"),
        None => String::new(),
    }
}

impl From<LaunchError> for Error {
    /// Sorts a kernel failure: a limit of the machine description is bad input (the user can
    /// change the key), anything else is a simulator bug (see [`KernelError::machine_key`]).
    ///
    /// [`KernelError::machine_key`]: crate::dpu::KernelError::machine_key
    fn from(error: LaunchError) -> Self {
        match error.error.machine_key() {
            Some(key) => Error::Machine { key, error },
            None => Error::Kernel(error),
        }
    }
}

impl Error {
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Input(_) | Error::Machine { .. } | Error::PastCeiling(_) => EXIT_BAD_INPUT,
            Error::Kernel(_) | Error::Verification(_) => EXIT_SIMULATOR_BUG,
            Error::Reproducible { bug, .. } => bug.exit_code(),
            Error::Output { .. } => EXIT_FAILURE,
        }
    }

    /// A kernel's machine-limit error blamed on where its key came from, in the usual
    /// `origin: key: reason` form, so the user knows which file or flag to change: every
    /// `--set` of a key of the rule, the machine's and then the `workload`'s (a run's
    /// tasklets), at the first such key; the machine file when none was set. Other errors
    /// come back unchanged.
    pub fn attributed(self, machine: &Attribution, workload: Option<&Attribution>) -> Self {
        let Error::Machine { key, error } = self else {
            return self;
        };
        let reason = error.to_string();
        let (machine_keys, workload_keys) = error.error.shared_keys();
        let machine_keys: Vec<&str> = std::iter::once(key)
            .chain(machine_keys.iter().copied())
            .collect();
        let mut parts = vec![(machine, machine_keys.as_slice())];
        if let Some(w) = workload {
            parts.push((w, workload_keys));
        }
        Error::Input(crate::config::blame_rule(&parts, (machine, key), reason))
    }

    /// Attaches the command line (computed only if needed) and the seed to a simulator bug,
    /// so its report says how to reproduce it. Other errors come back unchanged: their
    /// message already says what to change, and a bug keeps the first context attached.
    pub fn reproducible(self, command_line: impl FnOnce() -> String, seed: Option<u64>) -> Self {
        match self {
            Error::Kernel(_) | Error::Verification(_) => Error::Reproducible {
                bug: Box::new(self),
                command_line: command_line(),
                seed,
            },
            other => other,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dpu::{KernelError, SyncKind, TaskletWait};
    use crate::engine::QueueFull;
    use crate::machine::DmaDirection;

    fn sorted(error: KernelError) -> Error {
        Error::from(LaunchError { dpu: 7, error })
    }

    fn dma_size(size_bytes: u32) -> KernelError {
        KernelError::DmaSize {
            tasklet: 1,
            direction: DmaDirection::Read,
            size_bytes,
            min: 8,
            max: 2048,
            multiple: 8,
        }
    }

    /// Each limit of the machine description is bad input naming its key.
    #[test]
    fn machine_limits_are_bad_input_naming_the_key() {
        let wram = KernelError::WramOverflow {
            what: "tasklet 0: mem_alloc(1024)".into(),
            requested_bytes: 1024,
            available_bytes: 8,
            wram_size_bytes: 64,
        };
        let cases = [
            (wram, "dpu.wram_size_bytes"),
            (
                KernelError::IramOverflow {
                    instructions: 9,
                    capacity: 8,
                },
                "dpu.iram_instructions",
            ),
            (
                KernelError::TooManyTasklets {
                    requested: 24,
                    max: 16,
                },
                "dpu.max_tasklets",
            ),
            (dma_size(4), "dma.min_size_bytes"),
            (dma_size(4096), "dma.max_size_bytes"),
            (dma_size(12), "dma.alignment_bytes"),
            (
                KernelError::MramOutOfRange {
                    tasklet: 0,
                    addr: 64,
                    size_bytes: 64,
                    mram_size_bytes: 64,
                },
                "dpu.mram_size_bytes",
            ),
            (
                KernelError::SyncId {
                    tasklet: 0,
                    kind: SyncKind::Mutex,
                    id: 3,
                    limit: 2,
                },
                "dpu.atomic_bits",
            ),
        ];
        for (error, key) in cases {
            let e = sorted(error).reproducible(|| "pimdes x".into(), Some(1));
            assert_eq!(e.exit_code(), EXIT_BAD_INPUT, "{e}");
            let text = e.to_string();
            assert!(
                text.starts_with(&format!("machine key `{key}`: DPU 7: ")),
                "{text}"
            );
            assert!(!text.contains("reproduce"), "{text}");
        }
    }

    /// Everything that is not the machine's limit is a simulator bug, exit code 3.
    #[test]
    fn other_kernel_failures_are_simulator_bugs() {
        let cases = [
            KernelError::Kernel {
                tasklet: 2,
                reason: "wrong sum".into(),
            },
            KernelError::Deadlock {
                cycle: 10,
                waits: vec![TaskletWait::Barrier {
                    id: 0,
                    arrived: 1,
                    expected: 2,
                }],
            },
            KernelError::EventLimit { limit: 100 },
            KernelError::Queue(QueueFull { capacity: 4 }),
            KernelError::AlreadyWaiting { tasklet: 0 },
            KernelError::MutexNotHeld {
                tasklet: 0,
                id: 1,
                holder: None,
            },
            KernelError::WramMisaligned {
                tasklet: 0,
                addr: 3,
                size_bytes: 8,
            },
            KernelError::WramOutOfRange {
                tasklet: 0,
                addr: 64,
                size_bytes: 8,
                wram_size_bytes: 64,
            },
            KernelError::WramInUse {
                tasklet: 0,
                addr: 0,
                size_bytes: 8,
            },
        ];
        for error in cases {
            let e = sorted(error);
            assert_eq!(e.exit_code(), EXIT_SIMULATOR_BUG, "{e}");
            assert!(e.to_string().starts_with("simulator bug: DPU 7: "), "{e}");
        }
    }

    #[test]
    fn a_bug_names_the_command_and_seed_that_reproduce_it() {
        let bug = sorted(KernelError::EventLimit { limit: 100 });
        let e = bug.reproducible(|| "pimdes run --machine m.toml".into(), Some(42));
        assert_eq!(e.exit_code(), EXIT_SIMULATOR_BUG);
        assert_eq!(
            e.to_string(),
            "simulator bug: DPU 7: the launch exceeded 100 events; the kernel probably loops \
             forever; reproduce with: pimdes run --machine m.toml (seed 42)"
        );
        // The first context sticks; a later, outer one does not wrap it again.
        let again = e.reproducible(|| "pimdes".into(), None);
        assert!(again.to_string().ends_with("(seed 42)"), "{again}");
        let wrong = Error::Verification("batch 0".into()).reproducible(|| "pimdes".into(), None);
        assert_eq!(wrong.exit_code(), EXIT_SIMULATOR_BUG);
        assert!(wrong.to_string().ends_with("; reproduce with: pimdes"));
    }
}
