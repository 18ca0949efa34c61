//! PrIM applications as named suites (`pimdes microbench prim-va`, `prim-red`, `prim-bs`,
//! `prim-gemv`, `prim-sel`, `prim-uni`; `apps` runs them all): each runs the application's kernel on
//! the DPU model with real data (every result checked) and prices the host's transfers as
//! PrIM's host makes them, so a record holds PrIM's three host timers: the input pushes
//! (`cpu_dpu_ms`), the synchronous launch (`kernel_ms`) and the result retrieval
//! (`dpu_cpu_ms`).
//!
//! By default a suite runs at 1, 4, 16 and 64 DPUs with the input sizes of the published
//! real-hardware runs ([`super::prim_data`]) at each DPU count, and carries the published
//! figures beside its own; `microbench.prim.input_size` and `microbench.prim.dpus` replace
//! the sizes and the DPU counts.

use super::apps::{self, AppRecord};
use super::prim_data::{PUBLISHED, PublishedRun};
use crate::config::Override;
use crate::engine::Time;
use crate::error::{Error, InputError};
use crate::host::{Direction, Host};
use crate::machine::{Machine, dpus_phrase};
use serde::Serialize;

/// A modelled PrIM application.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Benchmark {
    Va,
    Red,
    Bs,
    Gemv,
    Sel,
    Uni,
}

impl Benchmark {
    pub const ALL: [Benchmark; 6] = [
        Benchmark::Va,
        Benchmark::Red,
        Benchmark::Bs,
        Benchmark::Gemv,
        Benchmark::Sel,
        Benchmark::Uni,
    ];

    /// The suite's CLI name, `prim-va` and so on.
    pub fn suite(self) -> &'static str {
        match self {
            Benchmark::Va => "prim-va",
            Benchmark::Red => "prim-red",
            Benchmark::Bs => "prim-bs",
            Benchmark::Gemv => "prim-gemv",
            Benchmark::Sel => "prim-sel",
            Benchmark::Uni => "prim-uni",
        }
    }

    pub fn from_suite(name: &str) -> Option<Benchmark> {
        Benchmark::ALL.into_iter().find(|b| b.suite() == name)
    }

    /// MRAM one DPU needs for `size` in all on `dpus` DPUs.
    pub fn mram_bytes(self, size: u64, dpus: u32) -> u64 {
        match self {
            Benchmark::Va => apps::va_mram_bytes(size, dpus),
            Benchmark::Red => size.div_ceil(u64::from(dpus)) * 8,
            Benchmark::Bs => super::bs::bs_mram_bytes(size, dpus),
            Benchmark::Gemv => super::gemv::gemv_mram_bytes(size, dpus),
            Benchmark::Sel | Benchmark::Uni => super::compact::sel_mram_bytes(size, dpus),
        }
    }

    fn kernel(self, machine: &Machine, dpus: u32, size: u64) -> Result<AppRecord, Error> {
        match self {
            Benchmark::Va => apps::va(machine, dpus, size),
            Benchmark::Red => apps::red(machine, dpus, size),
            Benchmark::Bs => super::bs::bs(machine, dpus, size),
            Benchmark::Gemv => super::gemv::gemv(machine, dpus, size),
            Benchmark::Sel => super::compact::sel(machine, dpus, size),
            Benchmark::Uni => super::compact::uni(machine, dpus, size),
        }
    }

    /// The input size of its published one-DPU run: the size used at DPU counts the
    /// published runs do not cover.
    fn own_size(self) -> u64 {
        published(self)
            .find(|r| r.dpus == 1)
            .map_or(1 << 20, |r| r.input_size)
    }
}

/// The published runs of `benchmark`.
pub fn published(benchmark: Benchmark) -> impl Iterator<Item = &'static PublishedRun> {
    PUBLISHED.iter().filter(move |r| r.benchmark == benchmark)
}

/// PrIM's host timers on real hardware for the same run, and uPIMulator's simulated kernel.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Hardware {
    pub kernel_ms: f64,
    pub cpu_dpu_ms: f64,
    pub dpu_cpu_ms: f64,
    pub upimulator_kernel_ms: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct PrimRecord {
    pub benchmark: Benchmark,
    pub dpus: u32,
    pub tasklets: u32,
    /// The whole input (PrIM's `-i` with strong scaling; BS: the vector every DPU holds;
    /// GEMV: the matrix's rows).
    pub input_size: u64,
    /// Elements each DPU processes (BS: its queries; GEMV: its rows).
    pub input_per_dpu: u64,
    /// PrIM's "DPU Kernel" timer: the synchronous launch, its fixed cost and the slowest DPU.
    pub kernel_ms: f64,
    /// The slowest DPU's kernel alone.
    pub slowest_dpu_ms: f64,
    /// PrIM's "CPU-DPU" timer: the arguments and the inputs, one parallel push each.
    pub cpu_dpu_ms: f64,
    /// The retrieval after the launch: the results' parallel read (with the MRAM ownership
    /// switch) and, for SEL and UNI, PrIM's serial copy of each DPU's kept elements.
    pub dpu_cpu_ms: f64,
    /// The published run with the same DPUs and input size, if there is one.
    pub hardware: Option<Hardware>,
}

/// What the PrIM suites sweep (`--set microbench.prim.input_size=N`,
/// `--set microbench.prim.dpus=[..]`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, schemars::JsonSchema)]
pub struct PrimSweep {
    /// One input size at every DPU count instead of the published sizes.
    pub input_size: Option<u64>,
    /// DPU counts instead of 1, 4, 16 and 64.
    pub dpus: Option<Vec<u32>>,
}

/// The DPU counts of the published runs, the default sweep.
pub const DEFAULT_DPUS: [u32; 4] = [1, 4, 16, 64];
/// The largest input size a sweep takes (PrIM's hosts count elements in 32 bits).
pub const MAX_INPUT_SIZE: u64 = u32::MAX as u64;

impl PrimSweep {
    /// The default with the `microbench.prim.*` overrides applied; each names its key in
    /// errors.
    pub fn with_overrides(
        machine: &Machine,
        overrides: &[Override],
    ) -> Result<PrimSweep, InputError> {
        let mut sweep = PrimSweep::default();
        for o in overrides {
            let bad = |reason: String| InputError::key(format!("--set {}", o.text), &o.key, reason);
            match o.strip_prefix("microbench.prim").unwrap_or("") {
                "input_size" => {
                    let n = o
                        .value
                        .as_integer()
                        .and_then(|n| u64::try_from(n).ok())
                        .filter(|n| (1..=MAX_INPUT_SIZE).contains(n))
                        .ok_or_else(|| {
                            bad(format!("expected an integer from 1 to {MAX_INPUT_SIZE}"))
                        })?;
                    sweep.input_size = Some(n);
                }
                "dpus" => {
                    let max = u64::from(machine.dpus);
                    sweep.dpus =
                        Some(super::transfer::positive_list(&o.value, 1, max).map_err(bad)?);
                }
                _ => {
                    return Err(bad(
                        "unknown key; the PrIM suites take microbench.prim.input_size and microbench.prim.dpus".into(),
                    ));
                }
            }
        }
        Ok(sweep)
    }

    fn is_default(&self) -> bool {
        self.input_size.is_none() && self.dpus.is_none()
    }
}

/// The (DPUs, input size) points of `benchmark` under `sweep` that `machine` holds, and
/// how many default points it cannot hold (skipped). A point set by the user that does not
/// fit is an error naming the key.
pub fn points(
    benchmark: Benchmark,
    machine: &Machine,
    sweep: &PrimSweep,
) -> Result<(Vec<(u32, u64)>, usize), InputError> {
    if benchmark == Benchmark::Bs
        && let Some(n) = sweep
            .input_size
            .filter(|&n| !super::bs::bs_answers_every_query(n))
    {
        return Err(InputError::plain(
            "microbench.prim.input_size",
            format!(
                "prim-bs with {n} elements: PrIM's binary search answers every query only for a power of two of at least 64 elements (it halves byte addresses and reads whole 256-byte blocks), so pimdes runs those sizes only"
            ),
        ));
    }
    let dpus = sweep.dpus.clone().unwrap_or(DEFAULT_DPUS.to_vec());
    let mut all = Vec::new();
    for &d in &dpus {
        match sweep.input_size {
            Some(n) => all.push((d, n)),
            None => {
                let sizes: Vec<u64> = published(benchmark)
                    .filter(|r| r.dpus == d)
                    .map(|r| r.input_size)
                    .collect();
                if sizes.is_empty() {
                    all.push((d, benchmark.own_size()));
                }
                all.extend(sizes.into_iter().map(|n| (d, n)));
            }
        }
    }
    let fits = |&(d, n): &(u32, u64)| {
        d <= machine.dpus && benchmark.mram_bytes(n, d) <= machine.dpu.mram_size_bytes
    };
    if !sweep.is_default()
        && let Some(&(d, n)) = all.iter().find(|p| !fits(p))
    {
        return Err(refusal(benchmark, machine, sweep, (d, n)));
    }
    let held: Vec<(u32, u64)> = all.iter().copied().filter(fits).collect();
    let skipped = all.len() - held.len();
    Ok((held, skipped))
}

/// Why point `(d, n)` of a chosen sweep cannot run on `machine`: more DPUs than it has, or
/// more MRAM per DPU. The DPUs first: on a machine too small for them, the MRAM is moot.
fn refusal(
    benchmark: Benchmark,
    machine: &Machine,
    sweep: &PrimSweep,
    (d, n): (u32, u64),
) -> InputError {
    let suite = benchmark.suite();
    // The DPUs first: on a machine too small for them, the MRAM per DPU is moot.
    let (key, reason) = if d > machine.dpus {
        let default = match sweep.dpus {
            Some(_) => String::new(),
            None => format!(" ({d} is among the default counts {DEFAULT_DPUS:?}: give others)"),
        };
        let reason = format!(
            "{suite} on {}: machine {} has {} usable DPU{} (machine.usable_dpus){default}",
            dpus_phrase(d),
            machine.name,
            machine.dpus,
            if machine.dpus == 1 { "" } else { "s" }
        );
        ("microbench.prim.dpus", reason)
    } else {
        let key = match sweep.input_size {
            Some(_) => "microbench.prim.input_size",
            None => "microbench.prim.dpus",
        };
        let reason = format!(
            "{suite} with {n} elements on {} needs {} bytes of MRAM per DPU; machine {} has {} (dpu.mram_size_bytes)",
            dpus_phrase(d),
            benchmark.mram_bytes(n, d),
            machine.name,
            machine.dpu.mram_size_bytes
        );
        (key, reason)
    };
    InputError::plain(key, reason)
}

/// Every point of `benchmark` under `sweep`, in order, on rayon's threads.
pub fn prim(
    benchmark: Benchmark,
    machine: &Machine,
    sweep: &PrimSweep,
) -> Result<Vec<PrimRecord>, Error> {
    use rayon::prelude::*;
    let (points, _) = points(benchmark, machine, sweep)?;
    super::in_order(
        points
            .par_iter()
            .map(|&(d, n)| one(benchmark, machine, d, n)),
    )
}

/// One run: the kernel on every DPU that differs, the host's transfers, the published run.
fn one(benchmark: Benchmark, machine: &Machine, dpus: u32, size: u64) -> Result<PrimRecord, Error> {
    let k = benchmark.kernel(machine, dpus, size)?;
    let (cpu_dpu, dpu_cpu) = transfers(benchmark, machine, dpus, size);
    let hardware = published(benchmark)
        .find(|r| r.dpus == dpus && r.input_size == size)
        .map(|r| Hardware {
            kernel_ms: r.kernel_ms,
            cpu_dpu_ms: r.cpu_dpu_ms,
            dpu_cpu_ms: r.dpu_cpu_ms,
            upimulator_kernel_ms: r.upimulator_kernel_ms,
        });
    Ok(PrimRecord {
        benchmark,
        dpus,
        tasklets: k.tasklets,
        input_size: size,
        input_per_dpu: k.elements_per_dpu,
        kernel_ms: k.launch_ms,
        slowest_dpu_ms: k.dpu_kernel_ms,
        cpu_dpu_ms: cpu_dpu.as_us_f64() / 1000.0,
        dpu_cpu_ms: dpu_cpu.as_us_f64() / 1000.0,
        hardware,
    })
}

/// PrIM's host transfers of one run (CMU-SAFARI/prim-benchmarks, `*/host/app.c`), as bytes
/// per DPU: the pushes of the "CPU-DPU" timer, one call each (the arguments first), then
/// the parallel read and the serial reads after the launch.
struct HostTransfers {
    pushes: Vec<u64>,
    read: u64,
    /// SEL: the bytes each DPU's serial copy retrieves.
    serial: Option<Vec<u64>>,
}

fn host_transfers(benchmark: Benchmark, dpus: u32, size: u64) -> HostTransfers {
    let d = u64::from(dpus);
    let (pushes, read, serial) = match benchmark {
        // VA: arguments (12 B), A and B; B read back.
        Benchmark::Va => {
            let bytes = apps::va_mram_bytes(size, dpus) / 2;
            (vec![12, bytes, bytes], bytes, None)
        }
        // RED: arguments (16 B), A; each tasklet's 16-byte result read back.
        Benchmark::Red => (vec![16, size.div_ceil(d) * 8], 16 * 16, None),
        // BS: arguments (24 B), the whole vector to every DPU, the DPU's queries; each
        // tasklet's 8-byte result read back.
        Benchmark::Bs => {
            let queries = super::bs::bs_queries(size, dpus) / d;
            (vec![24, size * 8, queries * 8], 16 * 8, None)
        }
        // GEMV: arguments (16 B), the rows (padded to an even count), the vector; the
        // results read back.
        Benchmark::Gemv => {
            let rows = size.div_ceil(d).next_multiple_of(2);
            (vec![16, rows * 64 * 4, 64 * 4], rows * 4, None)
        }
        // SEL: arguments (8 B), A; each tasklet's 4-byte count read back ("Inter-DPU"),
        // then each DPU's kept elements, one serial call per DPU ("DPU-CPU").
        Benchmark::Sel => {
            let share = super::compact::sel_share(size, dpus);
            let kept = (0..dpus)
                .map(|i| super::compact::sel_kept(size, dpus, i) * 8)
                .collect();
            (vec![8, share * 8], 16 * 4, Some(kept))
        }
        // UNI: as SEL, each tasklet's count, first and last value (24 bytes) read back,
        // then each DPU's kept values, one serial call per DPU.
        Benchmark::Uni => {
            let share = super::compact::sel_share(size, dpus);
            let kept = (0..dpus)
                .map(|i| super::compact::uni_kept(size, dpus, i) * 8)
                .collect();
            (vec![8, share * 8], 16 * 24, Some(kept))
        }
    };
    HostTransfers {
        pushes,
        read,
        serial,
    }
}

/// The "CPU-DPU" and the retrieval times of one run on the first `dpus` DPUs (PrIM's
/// allocation, as the launch in [`apps::record`]).
fn transfers(benchmark: Benchmark, machine: &Machine, dpus: u32, size: u64) -> (Time, Time) {
    let host = Host::new(&machine.allocated(dpus));
    let on_set = |bytes: u64| vec![bytes; dpus as usize];
    let t = host_transfers(benchmark, dpus, size);
    let cpu_dpu = t.pushes.iter().fold(Time::ZERO, |sum, &b| {
        sum + host.push_parallel(&on_set(b)).time
    });
    let mut dpu_cpu = host.pull_after_launch(&on_set(t.read));
    if let Some(kept) = t.serial {
        dpu_cpu += host.serial(Direction::DpuCpu, &kept).time;
    }
    (cpu_dpu, dpu_cpu)
}

/// How many default points of `benchmarks` `machine` cannot hold.
pub fn skipped(benchmarks: &[Benchmark], machine: &Machine) -> usize {
    benchmarks
        .iter()
        .map(|&b| points(b, machine, &PrimSweep::default()).map_or(0, |(_, s)| s))
        .sum()
}
