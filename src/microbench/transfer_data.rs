//! Published host <-> DPU measurements at 1 to 2,048 DPUs, split into the figures used to
//! set the transfer parameters (`Fit`) and those never used to set one (`HoldOut`), and
//! the model's time for each (`pimdes calibrate transfer`). Sources, configurations and
//! the split's reasons: `docs/calibration-data.md`; errors: `docs/validation.md`.
//!
//! - **LK**: GitHub Loremkang/upmem_communication_performance_test,
//!   `direct_interface_performance.xlsx` (branch `dev`), sheets Send, Receive, Launch (4
//!   ranks, 256 DPUs) and ReceiveDev (16 ranks, 1,024 DPUs); SDK calls, means over the
//!   runs' rounds.
//! - **BPF-T**: GitHub plasgroup/bp-forest-exp `data/preliminary/transfer_performance.csv`
//!   (one cold call into MRAM; MiB/s converted to us as size x DPUs / rate).
//! - **BPF-B**: GitHub plasgroup/bp-forest-exp `batch_size.csv` (2,048 DPUs,
//!   `execution_time` of a launch with a near-empty kernel).
//! - **DERF**: GitHub derf/prim-benchmarks `util/upvec-write.tex`, the authors' fitted
//!   CPU->DPU throughput at 8 MiB per DPU against ranks (a fitted curve, not points).
//! - **PrIM**: the PrIM paper's one-rank bandwidths (Gomez-Luna et al., IEEE Access 2022),
//!   the rates `machines/*.toml` take as inputs.

use crate::config::Override;
use crate::error::InputError;
use crate::host::{Direction, Host};
use crate::machine::Machine;
use crate::system::program::TransferKind;

/// Which part of the data a figure is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Set {
    Fit,
    HoldOut,
}

/// What was timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Op {
    Push,
    Pull,
    Broadcast,
    SerialPush,
    /// A launch of an (almost) empty kernel.
    Launch,
    /// The first parallel read after a launch (with the MRAM ownership switch).
    PullAfterLaunch,
}

/// One published figure.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Figure {
    pub source: &'static str,
    pub set: Set,
    pub op: Op,
    pub dpus: u32,
    pub size_per_dpu_bytes: u64,
    pub measured_us: f64,
}

const KIB: u64 = 1024;
const MIB: u64 = 1024 * 1024;

const fn f(source: &'static str, set: Set, op: Op, dpus: u32, size: u64, us: f64) -> Figure {
    Figure {
        source,
        set,
        op,
        dpus,
        size_per_dpu_bytes: size,
        measured_us: us,
    }
}

/// DERF's push of 8 MiB to each of `dpus` DPUs (64 per rank), timed by the source's fitted
/// throughput at its rank count: 5.042768 + 0.258673 x min(ranks, 31.536102) GB/s
/// (`util/upvec-write.tex`, the upstream SDK build, with byte transformation).
const fn derf(dpus: u32) -> Figure {
    const PER_DPU_BYTES: u64 = 8 * MIB;
    let ranks = (dpus / 64) as f64;
    let ranks = if ranks < 31.536102 { ranks } else { 31.536102 };
    let gb_per_s = 5.042768 + 0.258673 * ranks;
    let us = (dpus as u64 * PER_DPU_BYTES) as f64 / (gb_per_s * 1e3);
    f("DERF", HoldOut, Push, dpus, PER_DPU_BYTES, us)
}

use Op::{Broadcast, Launch, Pull, PullAfterLaunch, Push, SerialPush};
use Set::{Fit, HoldOut};

/// BPF-T's MRAM rows at 8 B, 1 KiB, 64 KiB and 1 MiB per DPU: (bytes per DPU, DPUs,
/// push, serial push, broadcast), MiB/s of size x DPUs as the file prints them (0: not
/// measured).
const BPF_T: &[(u64, u32, f64, f64, f64)] = &[
    (8, 1, 0.2062, 0.086698, 0.082928),
    (8, 2, 0.391251, 0.105233, 0.155702),
    (8, 4, 0.824799, 0.119209, 0.346791),
    (8, 8, 1.606188, 0.102408, 0.616517),
    (8, 16, 3.130008, 0.150148, 1.271566),
    (8, 32, 6.260016, 0.149048, 2.491231),
    (8, 64, 12.207031, 0.139549, 4.932134),
    (8, 128, 14.57556, 0.133119, 8.491848),
    (8, 256, 19.53125, 0.102365, 11.695359),
    (8, 512, 19.53125, 0.069676, 12.682631),
    (8, 1024, 29.818705, 0.047409, 21.522039),
    (8, 2048, 29.096834, 0.037592, 29.648956),
    (1024, 1, 25.040066, 9.668936, 9.48119),
    (1024, 2, 47.637196, 13.19679, 19.929848),
    (1024, 4, 95.274391, 13.469828, 41.11842),
    (1024, 8, 130.208344, 13.286565, 78.125),
    (1024, 16, 325.520813, 17.877575, 161.082474),
    (1024, 32, 512.295105, 18.701376, 276.548676),
    (1024, 64, 992.063477, 19.124847, 548.245605),
    (1024, 128, 1024.59021, 16.903313, 771.60498),
    (1024, 256, 1712.328735, 12.059235, 1050.420166),
    (1024, 512, 1533.74231, 8.963786, 1285.347046),
    (1024, 1024, 2688.171875, 5.829714, 2127.659668),
    (1024, 2048, 3412.969482, 4.204498, 2554.27832),
    (65536, 1, 207.641205, 175.561798, 0.0),
    (65536, 2, 382.263, 180.375183, 0.0),
    (65536, 4, 724.637695, 182.615051, 0.0),
    (65536, 8, 1228.501221, 177.809387, 0.0),
    (65536, 16, 1285.347046, 190.912567, 0.0),
    (65536, 32, 2645.502686, 192.56691, 0.0),
    (65536, 64, 4662.004395, 187.50293, 0.0),
    (65536, 128, 4542.873535, 164.392563, 0.0),
    (65536, 256, 5880.190918, 148.643631, 0.0),
    (65536, 512, 7450.523926, 131.453552, 0.0),
    (65536, 1024, 7635.40918, 108.577637, 0.0),
    (65536, 2048, 8978.675781, 92.091904, 0.0),
    (1048576, 1, 222.123505, 237.868698, 0.0),
    (1048576, 2, 422.654266, 176.55368, 0.0),
    (1048576, 4, 801.924622, 240.240234, 0.0),
    (1048576, 8, 1202.465088, 234.576584, 0.0),
    (1048576, 16, 1044.932007, 269.016083, 0.0),
    (1048576, 32, 1633.319702, 183.77919, 0.0),
    (1048576, 64, 2630.281006, 171.968582, 0.0),
    (1048576, 128, 2410.864014, 172.863419, 0.0),
    (1048576, 256, 3233.752441, 170.785873, 0.0),
    (1048576, 512, 3127.347656, 173.010269, 0.0),
    (1048576, 1024, 4603.737305, 161.232956, 0.0),
    (1048576, 2048, 6712.641113, 148.98262, 0.0),
];

/// DPU counts of BPF-T used to fit; the others (2, 8, 32, 128, 512, 2,048) are held out.
const BPF_T_FIT_DPUS: [u32; 6] = [1, 4, 16, 64, 256, 1024];

/// The figures other than BPF-T's, in the order of `docs/calibration-data.md`.
const OTHERS: &[Figure] = &[
    // F1: LK Send and Receive, 4 ranks (the 32-byte rows left out: slower than 64 B, a
    // first-call effect).
    f("LK", Fit, Push, 256, 64, 96.4243),
    f("LK", Fit, Push, 256, 256, 114.082),
    f("LK", Fit, Push, 256, KIB, 160.047),
    f("LK", Fit, Push, 256, 4 * KIB, 234.305),
    f("LK", Fit, Push, 256, 16 * KIB, 696.655),
    f("LK", Fit, Push, 256, 64 * KIB, 2351.39),
    f("LK", Fit, Pull, 256, 64, 104.782),
    f("LK", Fit, Pull, 256, 256, 145.104),
    f("LK", Fit, Pull, 256, KIB, 210.019),
    f("LK", Fit, Pull, 256, 4 * KIB, 325.595),
    f("LK", Fit, Pull, 256, 16 * KIB, 1041.28),
    f("LK", Fit, Pull, 256, 64 * KIB, 4017.98),
    // F2: LK Launch sheet, 4 ranks.
    f("LK", Fit, Launch, 256, 0, 182.781),
    f("LK", Fit, PullAfterLaunch, 256, 256, 273.455),
    // F5: BPF-B, a launch with a near-empty kernel at 2,048 DPUs (an upper bound).
    f("BPF-B", Fit, Launch, 2048, 0, 670.0),
    // PrIM's one-rank rates, 32 MiB per DPU (inputs of the machine files).
    f(
        "PrIM",
        Fit,
        Push,
        64,
        32 * MIB,
        64.0 * 32.0 * MIB as f64 / 6.68e3,
    ),
    f(
        "PrIM",
        Fit,
        Pull,
        64,
        32 * MIB,
        64.0 * 32.0 * MIB as f64 / 4.74e3,
    ),
    f(
        "PrIM",
        Fit,
        Broadcast,
        64,
        32 * MIB,
        64.0 * 32.0 * MIB as f64 / 16.88e3,
    ),
    // H1: LK ReceiveDev, 16 ranks.
    f("LK", HoldOut, Pull, 1024, 320, 495.174),
    f("LK", HoldOut, Pull, 1024, 1280, 604.861),
    f("LK", HoldOut, Pull, 1024, 5 * KIB, 1252.9),
    f("LK", HoldOut, Pull, 1024, 20 * KIB, 4315.3),
    f("LK", HoldOut, Pull, 1024, 80 * KIB, 17039.4),
    f("LK", HoldOut, Pull, 1024, 160 * KIB, 26908.8),
    // H3: DERF's fitted CPU->DPU throughput at 8 MiB per DPU, 64 DPUs per rank.
    derf(64),
    derf(256),
    derf(1024),
    derf(2048),
];

/// Every figure: the others, then BPF-T's (F3, F4 and H2), push, serial push, broadcast.
pub fn figures() -> Vec<Figure> {
    let mut out = OTHERS.to_vec();
    for &(size, dpus, push, serial, broadcast) in BPF_T {
        let set = if BPF_T_FIT_DPUS.contains(&dpus) {
            Fit
        } else {
            HoldOut
        };
        let us = |mib_per_s: f64| size as f64 * dpus as f64 / (mib_per_s * MIB as f64) * 1e6;
        for (op, rate) in [(Push, push), (SerialPush, serial), (Broadcast, broadcast)] {
            if rate > 0.0 {
                out.push(f("BPF-T", set, op, dpus, size, us(rate)));
            }
        }
    }
    out
}

/// DPUs per rank of the measured servers (PrIM's, LK's and the B+-Forest authors' ranks).
pub const DPUS_PER_RANK: u32 = 64;

/// The model's time for `figure`, on `load(overrides)` cut to the figure's DPUs: whole
/// ranks of 64 DPUs, or one rank with fewer.
pub fn model_us(
    figure: &Figure,
    load: &dyn Fn(&[Override]) -> Result<Machine, InputError>,
) -> Result<f64, InputError> {
    let ranks = figure.dpus.div_ceil(DPUS_PER_RANK);
    let sets = [
        format!("machine.ranks={ranks}"),
        format!("machine.dpus_per_rank={DPUS_PER_RANK}"),
        format!("machine.usable_dpus={}", figure.dpus),
    ];
    let sets: Vec<Override> = sets
        .iter()
        .map(|s| Override::parse(s).expect("well-formed"))
        .collect();
    let machine = load(&sets)?;
    let host = Host::new(&machine);
    let sizes = vec![figure.size_per_dpu_bytes; machine.dpus as usize];
    let time = match figure.op {
        Op::Push => {
            host.transfer(Direction::CpuDpu, TransferKind::Parallel, &sizes)
                .time
        }
        Op::Pull => {
            host.transfer(Direction::DpuCpu, TransferKind::Parallel, &sizes)
                .time
        }
        Op::Broadcast => {
            host.broadcast(&vec![true; sizes.len()], figure.size_per_dpu_bytes)
                .time
        }
        Op::SerialPush => {
            host.transfer(Direction::CpuDpu, TransferKind::Serial, &sizes)
                .time
        }
        Op::Launch => host
            .launch(&vec![0; sizes.len()])
            .expect("an empty launch stays below the ceiling"),
        Op::PullAfterLaunch => host.pull_after_launch(&sizes),
    };
    Ok(time.as_us_f64())
}

/// One figure beside the model.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Compared {
    #[serde(flatten)]
    pub figure: Figure,
    pub model_us: f64,
    /// (model - measured) / measured.
    pub error: f64,
}

/// Every figure beside the model.
pub fn compare(
    load: &dyn Fn(&[Override]) -> Result<Machine, InputError>,
) -> Result<Vec<Compared>, InputError> {
    figures()
        .iter()
        .map(|figure| {
            let model_us = model_us(figure, load)?;
            Ok(Compared {
                figure: *figure,
                model_us,
                error: (model_us - figure.measured_us) / figure.measured_us,
            })
        })
        .collect()
}

/// Mean absolute relative error of the figures `keep` selects, and how many there are.
pub fn mean_abs_error(rows: &[Compared], keep: impl Fn(&Compared) -> bool) -> (f64, usize) {
    let errors: Vec<f64> = rows
        .iter()
        .filter(|r| keep(r))
        .map(|r| r.error.abs())
        .collect();
    let n = errors.len();
    (errors.iter().sum::<f64>() / n.max(1) as f64, n)
}
