//! `pimdes microbench NAME`: the PrIM microbenchmarks on the machine model.

use super::write_stdout;
use crate::config::Override;
use crate::error::{Error, InputError};
use crate::experiments::estimate::{Limits, check_prim_point};
use crate::experiments::microbench::MicrobenchReport;
use crate::machine::Machine;
use crate::microbench::{self, PrimSweep, Record, Sweeps, TransferSweep};
use clap::Args;
use std::fmt::Write;
use std::path::PathBuf;

/// The machine used when `--machine` is absent: PrIM's 2,556-DPU system.
const DEFAULT_MACHINE: &str = include_str!("../../machines/upmem-2556-350mhz.toml");
const DEFAULT_MACHINE_NAME: &str = "machines/upmem-2556-350mhz.toml (embedded)";

#[derive(Debug, Args)]
pub struct MicrobenchArgs {
    /// Suite: arithmetic, mram, stream, transfer, prim-va, prim-red, prim-bs, prim-gemv,
    /// prim-sel, prim-uni, apps (every prim-* suite) or all.
    #[arg(value_name = "NAME", value_parser = super::Completes(|| crate::microbench::SUITES.to_vec()), hide_possible_values = true)]
    name: String,
    /// Machine description (TOML). Default: machines/upmem-2556-350mhz.toml, embedded.
    #[arg(long, value_name = "FILE")]
    machine: Option<PathBuf>,
    /// Override a machine key (`machine.dma.read_latency_fixed_cycles=100`), the transfer
    /// suite's sweep (`microbench.transfer.sizes_bytes=[8,4096]`, `microbench.transfer.ranks=[1,4]`)
    /// or the PrIM suites' (`microbench.prim.input_size=1048576`, `microbench.prim.dpus=[1,4]`).
    /// Repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    /// Print one JSON report (the records, the effective machine, the version) instead of tables.
    #[arg(long)]
    json: bool,
    /// Also write the JSON report to FILE (atomically).
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// No progress on stderr (otherwise, for a long run, the elapsed time every second on a terminal, every 5 s elsewhere).
    #[arg(long)]
    quiet: bool,
}

/// The machine and the suites' sweeps from `--machine` and `--set`, every setting checked
/// before anything runs.
fn inputs(
    name: &str,
    machine: &Option<PathBuf>,
    sets: &[String],
) -> Result<(Machine, Sweeps), Error> {
    // The name first: with an unknown one, no `--set` can be right or wrong.
    if !microbench::SUITES.contains(&name) {
        return Err(unknown_suite(name).into());
    }
    let overrides = sets
        .iter()
        .map(|s| Override::parse(s))
        .collect::<Result<Vec<_>, _>>()?;
    let (machine_sets, suite_sets): (Vec<Override>, Vec<Override>) = overrides
        .into_iter()
        .partition(|o| o.strip_prefix("machine").is_some());
    let prim_suites = microbench::benchmarks_of(name);
    if let Some(o) = suite_sets.iter().find(|o| {
        let transfer = o.strip_prefix("microbench.transfer").is_some()
            && microbench::includes(name, "transfer");
        let prim = o.strip_prefix("microbench.prim").is_some() && !prim_suites.is_empty();
        !transfer && !prim
    }) {
        return Err(InputError::key(
            format!("--set {}", o.text),
            &o.key,
            "microbench takes machine keys (machine.*); for the transfer suite, microbench.transfer.sizes_bytes and microbench.transfer.ranks; for the prim-* suites (and apps), microbench.prim.input_size and microbench.prim.dpus",
        )
        .into());
    }
    let machine = match machine {
        Some(path) => Machine::load(path, &machine_sets)?,
        None => Machine::from_toml_str(DEFAULT_MACHINE_NAME, DEFAULT_MACHINE, &machine_sets)?,
    };
    let (transfer_sets, prim_sets): (Vec<Override>, Vec<Override>) = suite_sets
        .into_iter()
        .partition(|o| o.strip_prefix("microbench.transfer").is_some());
    let sweeps = Sweeps {
        transfer: TransferSweep::with_overrides(&machine, &transfer_sets)?,
        prim: PrimSweep::with_overrides(&machine, &prim_sets)?,
    };
    microbench::check_mram(name, &machine)?;
    microbench::check_costs(name, &machine)?;
    for &b in &prim_suites {
        let (held, skipped) = microbench::prim::points(b, &machine, &sweeps.prim)
            .map_err(|e| named_by_set(e, &prim_sets))?;
        // `apps` and `all` run the suites that fit and warn of the points skipped.
        if held.is_empty() && prim_suites.len() == 1 {
            return Err(machine.attribution.error_at(
                "dpu.mram_size_bytes",
                format!(
                    "none of the {skipped} points of {} fits this machine: each needs more MRAM per DPU than its {} bytes, or more DPUs than its {}",
                    b.suite(),
                    machine.dpu.mram_size_bytes,
                    machine.dpus
                ),
            )
            .into());
        }
        check_prim_memory(&machine, b, &held, &prim_sets)?;
    }
    Ok((machine, sweeps))
}

fn unknown_suite(name: &str) -> InputError {
    InputError::plain(
        "NAME",
        format!(
            "unknown microbenchmark `{name}`; expected one of: {}",
            microbench::SUITES.join(", ")
        ),
    )
}

/// An error the sweep's rules gave under the bare key (`microbench.prim.input_size`),
/// told against the `--set` that gave the key.
fn named_by_set(e: InputError, sets: &[Override]) -> InputError {
    match sets.iter().rev().find(|o| o.key == e.origin) {
        Some(o) => InputError::key(format!("--set {}", o.text), &o.key, e.reason),
        None => e,
    }
}

/// Refuses PrIM points (DPUs, elements) the host has too little memory for, naming the
/// `--set` of the sweep's size (or of its DPUs), or else the machine's MRAM size. The points
/// run on rayon's threads, so the largest of them may run at once: their MRAM is summed.
fn check_prim_memory(
    machine: &Machine,
    b: microbench::prim::Benchmark,
    points: &[(u32, u64)],
    sets: &[Override],
) -> Result<(), InputError> {
    let mut sizes: Vec<(u64, u32, u64)> = points
        .iter()
        .map(|&(d, n)| (b.mram_bytes(n, d).saturating_mul(u64::from(d)), d, n))
        .collect();
    sizes.sort_unstable_by(|x, y| y.cmp(x));
    let at_once = rayon::current_num_threads().clamp(1, sizes.len().max(1));
    let mram = (sizes.iter().take(at_once)).fold(0u64, |sum, s| sum.saturating_add(s.0));
    let Some(&(_, d, n)) = sizes.first() else {
        return Ok(());
    };
    let Err(reason) = check_prim_point(mram, &Limits::host()) else {
        return Ok(());
    };
    let with = if at_once > 1 {
        format!(" beside {} more of its points at once", at_once - 1)
    } else {
        String::new()
    };
    let elements = if n == 1 { "element" } else { "elements" };
    let what = format!(
        "{} with {n} {elements} on {}{with} {reason}",
        b.suite(),
        crate::machine::dpus_phrase(d)
    );
    let keys = ["microbench.prim.input_size", "microbench.prim.dpus"];
    match keys
        .iter()
        .find_map(|&k| sets.iter().rev().find(|o| o.key == k))
    {
        Some(o) => Err(InputError::key(format!("--set {}", o.text), &o.key, what)),
        // The published points (a few MiB per DPU) fit any host; were they too large, the
        // machine's MRAM, which decides the points that run, would be what to change.
        None => Err(machine.attribution.error_at("dpu.mram_size_bytes", what)),
    }
}

pub fn run(args: MicrobenchArgs) -> Result<(), Error> {
    let machine_file = args.machine.as_deref().map(|m| ("--machine", m));
    super::check_output_paths(&[("--out", args.out.as_deref())], machine_file.as_slice())?;
    let (machine, sweeps) = inputs(&args.name, &args.machine, &args.set)?;
    let prim_suites = microbench::benchmarks_of(&args.name);
    for w in machine.timing_warnings() {
        eprintln!("warning: {w}");
    }
    let phase = format!("running suite {}", args.name);
    let progress = super::progress::heartbeat("pimdes microbench", args.quiet, &phase);
    let records = microbench::run_with(&args.name, &machine, &sweeps)
        .ok_or_else(|| unknown_suite(&args.name))?
        .map_err(|e| e.attributed(&machine.attribution, None))?;
    drop(progress);
    let skipped = microbench::prim::skipped(&prim_suites, &machine);
    let skipped = (skipped > 0 && sweeps.prim == PrimSweep::default()).then(|| {
        format!(
            "{skipped} of the published PrIM application runs need more DPUs or MRAM than machine {} has; they were skipped",
            machine.name
        )
    });
    if let Some(w) = &skipped {
        eprintln!("warning: {w}");
    }
    let transfer = microbench::includes(&args.name, "transfer").then_some(sweeps.transfer);
    let prim = (!prim_suites.is_empty()).then_some(sweeps.prim);
    let text = if args.json || args.out.is_some() {
        let table = (!args.json).then(|| tables(&machine, &records));
        let mut report = MicrobenchReport::new(&args.name, &machine, (transfer, prim), records);
        report.command_line = Some(super::command_line());
        report.warnings.extend(skipped);
        let json = super::json_with_out(&report, args.out.as_deref())?;
        table.unwrap_or(json)
    } else {
        tables(&machine, &records)
    };
    write_stdout(&text)
}

fn tables(machine: &Machine, records: &[Record]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "machine {} ({} at {} MHz); selected columns, every record with --json",
        machine.name,
        crate::machine::dpus_phrase(machine.dpus),
        machine.dpu.clock.hz() as f64 / 1e6
    );
    arithmetic_table(&mut s, records);
    mram_table(&mut s, records);
    stream_table(&mut s, records);
    transfer_table(&mut s, machine, records);
    apps_table(&mut s, records);
    s
}

fn arithmetic_table(s: &mut String, records: &[Record]) {
    let arithmetic: Vec<_> = records
        .iter()
        .filter_map(|r| match r {
            Record::Arithmetic(a) => Some(a),
            _ => None,
        })
        .collect();
    if !arithmetic.is_empty() {
        let _ = writeln!(s, "\narithmetic throughput, MOPS per DPU, by tasklets");
        pivot_by_tasklets(
            s,
            &arithmetic,
            PivotColumns {
                label: "op type",
                label_width: 14,
                value_width: 9,
                tasklets: &[1, 2, 4, 8, 11, 12, 16, 24],
            },
            |a, b| a.op == b.op && a.data_type == b.data_type,
            |a| names((a.op, a.data_type)),
            |a| (a.tasklets, a.mops),
        );
    }
}

fn mram_table(s: &mut String, records: &[Record]) {
    let mram: Vec<_> = records
        .iter()
        .filter_map(|r| match r {
            Record::Mram(m) => Some(m),
            _ => None,
        })
        .collect();
    if !mram.is_empty() {
        let _ = writeln!(s, "\nMRAM <-> WRAM DMA, one tasklet");
        let _ = writeln!(
            s,
            "{:<10}{:>8}{:>16}{:>14}",
            "direction", "bytes", "latency cycles", "MB/s"
        );
        for m in mram {
            let dir = serde_json::to_value(m.direction).expect("name");
            let _ = writeln!(
                s,
                "{:<10}{:>8}{:>16.1}{:>14.2}",
                dir.as_str().unwrap_or(""),
                m.size_bytes,
                m.latency_cycles,
                m.bandwidth_mb_per_s
            );
        }
    }
}

fn stream_table(s: &mut String, records: &[Record]) {
    let stream: Vec<_> = records
        .iter()
        .filter_map(|r| match r {
            Record::Stream(m) => Some(m),
            _ => None,
        })
        .collect();
    if !stream.is_empty() {
        let _ = writeln!(s, "\nSTREAM, MB/s per DPU, by tasklets");
        pivot_by_tasklets(
            s,
            &stream,
            PivotColumns {
                label: "kernel memory",
                label_width: 18,
                value_width: 10,
                tasklets: &[1, 2, 4, 8, 11, 16],
            },
            |a, b| a.kernel == b.kernel && a.memory == b.memory,
            |a| names((a.kernel, a.memory)),
            |a| (a.tasklets, a.bandwidth_mb_per_s),
        );
    }
}

/// A bandwidth for the transfer table: three decimals, or three significant digits below
/// 0.01 GB/s (a few bytes per DPU), which three decimals showed as 0.000.
fn gb_per_s(v: f64) -> String {
    match v {
        0.0 => "0".to_owned(),
        v if v.abs() < 0.01 => format!("{v:.2e}"),
        v => format!("{v:.3}"),
    }
}

fn transfer_table(s: &mut String, machine: &Machine, records: &[Record]) {
    let transfer: Vec<_> = records
        .iter()
        .filter_map(|r| match r {
            Record::Transfer(m) => Some(m),
            _ => None,
        })
        .collect();
    if transfer.is_empty() {
        return;
    }
    let mut sizes: Vec<u64> = transfer.iter().map(|t| t.size_per_dpu_bytes).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let _ = writeln!(
        s,
        "\nhost <-> DPU transfers, GB/s (a broadcast's: bytes delivered to all its DPUs), by bytes per DPU"
    );
    let _ = write!(
        s,
        "{:<11}{:<9}{:>5}{:>6}",
        "direction", "mode", "ranks", "DPUs"
    );
    for size in &sizes {
        let _ = write!(s, "{:>9}", human_bytes(*size));
    }
    s.push_str("  bound by (the term of the transfer model that set the time)\n");
    let mut rows: Vec<Vec<&microbench::TransferRecord>> = Vec::new();
    for t in &transfer {
        match rows
            .iter_mut()
            .find(|r| r[0].direction == t.direction && r[0].mode == t.mode && r[0].dpus == t.dpus)
        {
            Some(r) => r.push(t),
            None => rows.push(vec![t]),
        }
    }
    for row in rows {
        let name = serde_json::to_value((row[0].direction, row[0].mode)).expect("names");
        let _ = write!(
            s,
            "{:<11}{:<9}{:>5}{:>6}",
            name[0].as_str().unwrap_or(""),
            name[1].as_str().unwrap_or(""),
            row[0].ranks,
            row[0].dpus
        );
        for size in &sizes {
            match row.iter().find(|t| t.size_per_dpu_bytes == *size) {
                Some(t) => {
                    let _ = write!(s, "{:>9}", gb_per_s(t.bandwidth_gb_per_s));
                }
                None => {
                    let _ = write!(s, "{:>9}", "-");
                }
            }
        }
        let _ = writeln!(s, "  {}", bound_runs(&row, &sizes));
    }
    if let Some(note) = short_ranks_note(machine, &transfer) {
        let _ = writeln!(s, "{note}");
    }
}

/// Why a row of several ranks holds fewer DPUs than they have, if one does.
fn short_ranks_note(machine: &Machine, transfer: &[&microbench::TransferRecord]) -> Option<String> {
    let full = u64::from(machine.dpus_per_rank);
    let short = |t: &&&microbench::TransferRecord| {
        t.ranks > 1 && u64::from(t.dpus) < u64::from(t.ranks) * full
    };
    let t = transfer.iter().find(short)?;
    Some(format!(
        "(a row of several ranks takes every usable DPU on them: {} of the {} ranks' {} DPUs are usable (`usable_dpus`), so {} ranks hold {})",
        machine.dpus,
        machine.ranks,
        u64::from(machine.ranks) * full,
        t.ranks,
        t.dpus
    ))
}

/// A row's bounds by size, each over the run of sizes it held: `per-call to 2K,
/// per-dpu-rate from 4K` (or the one bound alone).
fn bound_runs(row: &[&microbench::TransferRecord], sizes: &[u64]) -> String {
    let mut runs: Vec<(String, u64, u64)> = Vec::new();
    for size in sizes {
        let Some(t) = row.iter().find(|t| t.size_per_dpu_bytes == *size) else {
            continue;
        };
        let bound = serde_json::to_value(t.bound).expect("a bound's name");
        let bound = bound.as_str().unwrap_or("").to_owned();
        match runs.last_mut() {
            Some((b, _, last)) if *b == bound => *last = *size,
            _ => runs.push((bound, *size, *size)),
        }
    }
    let n = runs.len();
    let said = runs
        .iter()
        .enumerate()
        .map(|(i, (b, first, last))| match i {
            _ if n == 1 => b.clone(),
            0 => format!("{b} to {}", human_bytes(*last)),
            i if i == n - 1 => format!("{b} from {}", human_bytes(*first)),
            _ if first == last => format!("{b} at {}", human_bytes(*first)),
            _ => format!("{b} {}-{}", human_bytes(*first), human_bytes(*last)),
        });
    said.collect::<Vec<_>>().join(", ")
}

fn apps_table(s: &mut String, records: &[Record]) {
    let apps: Vec<_> = records.iter().filter_map(Record::as_prim).collect();
    if apps.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "\nPrIM applications: PrIM's host timers, ms (hardware: the published run, where there is one)"
    );
    let _ = writeln!(
        s,
        "{:<5}{:>6}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}",
        "app",
        "DPUs",
        "input",
        "per DPU",
        "CPU-DPU",
        "kernel",
        "DPU-CPU",
        "hw C-D",
        "hw kern",
        "hw D-C"
    );
    for a in apps {
        let name = serde_json::to_value(a.benchmark).expect("names serialise");
        let _ = write!(
            s,
            "{:<5}{:>6}{:>10}{:>10}{:>10.3}{:>10.3}{:>10.3}",
            name.as_str().unwrap_or(""),
            a.dpus,
            a.input_size,
            a.input_per_dpu,
            a.cpu_dpu_ms,
            a.kernel_ms,
            a.dpu_cpu_ms
        );
        match &a.hardware {
            Some(h) => {
                let _ = writeln!(
                    s,
                    "{:>10.3}{:>10.3}{:>10.3}",
                    h.cpu_dpu_ms, h.kernel_ms, h.dpu_cpu_ms
                );
            }
            None => {
                let _ = writeln!(s, "{:>10}{:>10}{:>10}", "-", "-", "-");
            }
        }
    }
}

fn human_bytes(b: u64) -> String {
    if b >= 1 << 20 && b.is_multiple_of(1 << 20) {
        format!("{}M", b >> 20)
    } else if b >= 1 << 10 && b.is_multiple_of(1 << 10) {
        format!("{}K", b >> 10)
    } else {
        format!("{b}")
    }
}

/// The two names of a pair of serialisable enums, as "first second".
fn names(pair: impl serde::Serialize) -> String {
    let v = serde_json::to_value(pair).expect("enum names serialise");
    format!(
        "{} {}",
        v[0].as_str().unwrap_or(""),
        v[1].as_str().unwrap_or("")
    )
}

/// Layout of a table with one column per tasklet count.
struct PivotColumns<'a> {
    label: &'a str,
    label_width: usize,
    value_width: usize,
    tasklets: &'a [u32],
}

/// A table with one row per group of consecutive records (`same_row`) and one column per
/// tasklet count; `cell` gives a record's tasklets and value.
fn pivot_by_tasklets<T>(
    s: &mut String,
    records: &[&T],
    cols: PivotColumns,
    same_row: impl Fn(&T, &T) -> bool,
    label: impl Fn(&T) -> String,
    cell: impl Fn(&T) -> (u32, f64),
) {
    let (lw, vw) = (cols.label_width, cols.value_width);
    let _ = write!(s, "{:<lw$}", cols.label);
    for c in cols.tasklets {
        let _ = write!(s, "{c:>vw$}");
    }
    s.push('\n');
    for row in records.chunk_by(|a, b| same_row(a, b)) {
        let _ = write!(s, "{:<lw$}", label(row[0]));
        for &c in cols.tasklets {
            match row.iter().map(|r| cell(r)).find(|&(t, _)| t == c) {
                Some((_, v)) => {
                    let _ = write!(s, "{v:>vw$.2}");
                }
                None => {
                    let _ = write!(s, "{:>vw$}", "-");
                }
            }
        }
        s.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::gb_per_s;

    #[test]
    fn small_bandwidths_keep_their_digits() {
        assert_eq!(gb_per_s(0.00008), "8.00e-5");
        assert_eq!(gb_per_s(0.00993), "9.93e-3");
        assert_eq!(gb_per_s(0.019), "0.019");
        assert_eq!(gb_per_s(16.87), "16.870");
        assert_eq!(gb_per_s(0.0), "0");
    }
}
