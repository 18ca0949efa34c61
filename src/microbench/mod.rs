//! The PrIM microbenchmarks (CMU-SAFARI/prim-benchmarks, folder `Microbenchmarks`) as
//! kernels on the machine model. Each suite returns typed records; the CLI prints them as
//! a table or one JSON array.
//!
//! Configurations of a suite are independent simulations; they run on rayon's threads and
//! are gathered in a fixed order, so output never depends on the thread count.

mod apps;
mod arithmetic;
mod bs;
mod compact;
mod gemv;
mod mram;
pub mod prim;
pub mod prim_data;
mod stream;
mod transfer;
pub mod transfer_data;

pub use apps::{AppRecord, red, va};
pub use arithmetic::{ArithOp, ArithmeticRecord, DataType, arithmetic};
pub use bs::bs;
pub use compact::{sel, sel_kept, sel_share, uni, uni_kept};
pub use gemv::gemv;
pub use mram::{MramRecord, mram};
pub use prim::{Benchmark, PrimRecord, PrimSweep};
pub use stream::{Memory, StreamKernel, StreamRecord, stream};
pub use transfer::{TransferDirection, TransferMode, TransferRecord, TransferSweep, transfer};

use crate::config::InputError;
use crate::dpu::{Dpu, Kernel, LaunchError, LaunchReport};
use crate::error::Error;
use crate::machine::Machine;
use serde::Serialize;

/// The suites, by CLI name: `apps` runs every `prim-*` suite, `all` every suite.
pub const SUITES: [&str; 12] = [
    "arithmetic",
    "mram",
    "stream",
    "transfer",
    "prim-va",
    "prim-red",
    "prim-bs",
    "prim-gemv",
    "prim-sel",
    "prim-uni",
    "apps",
    "all",
];

/// One record of any suite, tagged with its suite's name (`"suite": "mram"`).
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(tag = "suite", rename_all = "lowercase")]
pub enum Record {
    Arithmetic(ArithmeticRecord),
    Mram(MramRecord),
    Stream(StreamRecord),
    Transfer(TransferRecord),
    #[serde(rename = "prim-va")]
    PrimVa(PrimRecord),
    #[serde(rename = "prim-red")]
    PrimRed(PrimRecord),
    #[serde(rename = "prim-bs")]
    PrimBs(PrimRecord),
    #[serde(rename = "prim-gemv")]
    PrimGemv(PrimRecord),
    #[serde(rename = "prim-sel")]
    PrimSel(PrimRecord),
    #[serde(rename = "prim-uni")]
    PrimUni(PrimRecord),
}

impl Record {
    /// A PrIM application's record, tagged with its suite.
    pub fn prim(r: PrimRecord) -> Record {
        match r.benchmark {
            Benchmark::Va => Record::PrimVa(r),
            Benchmark::Red => Record::PrimRed(r),
            Benchmark::Bs => Record::PrimBs(r),
            Benchmark::Gemv => Record::PrimGemv(r),
            Benchmark::Sel => Record::PrimSel(r),
            Benchmark::Uni => Record::PrimUni(r),
        }
    }

    /// The PrIM record, for the five PrIM suites.
    pub fn as_prim(&self) -> Option<&PrimRecord> {
        match self {
            Record::PrimVa(r)
            | Record::PrimRed(r)
            | Record::PrimBs(r)
            | Record::PrimGemv(r)
            | Record::PrimSel(r)
            | Record::PrimUni(r) => Some(r),
            _ => None,
        }
    }
}

/// Whether running `name` (one of [`SUITES`]) runs `suite`.
pub fn includes(name: &str, suite: &str) -> bool {
    name == suite || name == "all" || (name == "apps" && Benchmark::from_suite(suite).is_some())
}

/// The PrIM applications suite `name` runs.
pub fn benchmarks_of(name: &str) -> Vec<Benchmark> {
    Benchmark::ALL
        .into_iter()
        .filter(|b| includes(name, b.suite()))
        .collect()
}

/// What the suites sweep where they take settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Sweeps {
    pub transfer: TransferSweep,
    pub prim: PrimSweep,
}

impl Sweeps {
    pub fn default_for(machine: &Machine) -> Sweeps {
        Sweeps {
            transfer: TransferSweep::default_for(machine),
            prim: PrimSweep::default(),
        }
    }
}

/// Runs suite `name` (one of [`SUITES`]) with the default sweeps; `None` if the name is
/// unknown.
pub fn run(name: &str, machine: &Machine) -> Option<Result<Vec<Record>, Error>> {
    run_with(name, machine, &Sweeps::default_for(machine))
}

/// As [`run`], with `sweeps`.
pub fn run_with(
    name: &str,
    machine: &Machine,
    sweeps: &Sweeps,
) -> Option<Result<Vec<Record>, Error>> {
    if let Some(b) = Benchmark::from_suite(name) {
        return Some(
            prim::prim(b, machine, &sweeps.prim).map(|r| r.into_iter().map(Record::prim).collect()),
        );
    }
    let records = match name {
        "arithmetic" => arithmetic(machine)
            .map(|r| r.into_iter().map(Record::Arithmetic).collect())
            .map_err(Error::from),
        "mram" => mram(machine)
            .map(|r| r.into_iter().map(Record::Mram).collect())
            .map_err(Error::from),
        "stream" => stream(machine)
            .map(|r| r.into_iter().map(Record::Stream).collect())
            .map_err(Error::from),
        "transfer" => Ok(transfer(machine, &sweeps.transfer)
            .into_iter()
            .map(Record::Transfer)
            .collect()),
        "apps" | "all" => {
            let mut all = Vec::new();
            for suite in SUITES[..10].iter().filter(|s| includes(name, s)) {
                match run_with(suite, machine, sweeps)? {
                    Ok(r) => all.extend(r),
                    Err(e) => return Some(Err(e)),
                }
            }
            Ok(all)
        }
        _ => return None,
    };
    Some(records)
}

/// Checks, before anything runs, that suite `name` fits its MRAM layout in the machine's
/// MRAM: the suites write their inputs at fixed addresses (PrIM's layout), and a small
/// `dpu.mram_size_bytes` would otherwise fail inside a kernel or while filling MRAM.
/// Unknown names pass; [`run`] reports them.
pub fn check_mram(name: &str, machine: &Machine) -> Result<(), InputError> {
    let suites: &[&str] = if name == "all" { &SUITES[..4] } else { &[name] };
    for &suite in suites {
        let need = match suite {
            "arithmetic" => arithmetic::mram_need_bytes(machine),
            "mram" => mram::mram_need_bytes(machine),
            "stream" => stream::mram_need_bytes(machine),
            _ => 0,
        };
        let have = machine.dpu.mram_size_bytes;
        if need > have {
            return Err(machine.attribution.error_at(
                "dpu.mram_size_bytes",
                format!(
                    "the `{suite}` microbenchmark lays out {need} bytes of MRAM but each DPU has {have}; give at least {need}"
                ),
            ));
        }
    }
    Ok(())
}

/// Checks, before anything runs, that suite `name` (or `all`) has a bounded throughput on
/// the machine: the arithmetic suite's loop must cost at least one cycle per element.
pub fn check_costs(name: &str, machine: &Machine) -> Result<(), InputError> {
    match name {
        "arithmetic" | "all" => arithmetic::check_costs(machine),
        _ => Ok(()),
    }
}

/// Launches `kernel` on a fresh DPU 0 after `setup` fills its MRAM; returns the report and
/// the DPU (for checking results).
fn launch_one<K: Kernel>(
    machine: &Machine,
    kernel: &K,
    tasklets: u32,
    setup: impl FnOnce(&mut Dpu),
) -> Result<(LaunchReport, Dpu), LaunchError> {
    let mut dpu = Dpu::new(&machine.dpu, 0);
    setup(&mut dpu);
    let report = dpu
        .launch(kernel, tasklets)
        .map_err(|error| LaunchError { dpu: 0, error })?;
    Ok((report, dpu))
}

/// The records of a suite's configurations, simulated in parallel, in their order; on
/// failure, the error of the first failing configuration. (A parallel `collect` into a
/// `Result` returns whichever error a thread met first, so the message, and for PrIM even
/// the exit code, would depend on the thread count.)
fn in_order<T: Send, E: Send>(
    configs: impl rayon::iter::IndexedParallelIterator<Item = Result<T, E>>,
) -> Result<Vec<T>, E> {
    let all: Vec<Result<T, E>> = configs.collect();
    all.into_iter().collect()
}

/// `bytes` moved in `cycles` at the DPU clock, in MB/s (10^6 bytes per second).
fn mb_per_s(machine: &Machine, bytes: u64, cycles: u64) -> f64 {
    if cycles == 0 {
        return 0.0;
    }
    bytes as f64 * machine.dpu.clock.hz() as f64 / cycles as f64 / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;
    use rayon::prelude::*;

    /// The first configuration fails last in wall time, on a pool of its own: still its
    /// error is the one returned.
    #[test]
    fn the_first_failing_configuration_is_reported_whatever_the_threads() {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        let configs: Vec<u32> = (0..1000).collect();
        let result = pool.install(|| {
            in_order(configs.par_iter().map(|&i| match i {
                0 => {
                    std::thread::sleep(std::time::Duration::from_millis(50));
                    Err(i)
                }
                i if i >= 500 => Err(i),
                i => Ok(i),
            }))
        });
        assert_eq!(result, Err(0));
    }
}
