//! Tables for people. Scripts should use `--json`.

use crate::config::shown;
use crate::experiments::partition::PartitionReport;
use crate::machine::dpus_phrase;
use std::collections::BTreeMap;
use std::fmt::Write;

pub fn partition_report(r: &PartitionReport) -> String {
    let mut s = String::new();
    let w = &r.config.workload;
    let tuning = tuning_phrase(r);
    let _ = writeln!(
        s,
        "partitioner {} on {} ({}), workload: {} pairs, {} {} queries per batch, skew {}{tuning}, seed {}",
        r.partitioner,
        r.config.machine.name,
        dpus_phrase(r.dpus),
        w.data.pairs,
        w.queries.batch_size,
        w.queries.kind.name(),
        shown(w.queries.skew),
        r.seed
    );
    let rows = [
        ("chunks", r.chunks.to_string()),
        ("partitions (routing entries)", r.partitions.to_string()),
        ("hot partitions", r.hot_partitions.to_string()),
        ("IF_d (data imbalance)", format!("{:.3}", r.imbalance.data)),
        (
            "IF_q (query imbalance, measured mean)",
            format!("{:.3}", r.imbalance.queries),
        ),
        (
            "IF_q on the reference batch",
            format!("{:.3}", r.imbalance.queries_reference),
        ),
        (
            "chunk floor (busiest chunk over Q/P)",
            r.imbalance
                .chunk_floor
                .map_or("none (cut between keys)".to_owned(), |f| format!("{f:.2}")),
        ),
        (
            "pairs per DPU (max / mean)",
            format!("{} / {:.0}", r.max_pairs_per_dpu, r.mean_pairs_per_dpu),
        ),
        (
            // The largest in any measured batch, the mean over DPUs and batches (so their
            // ratio is not IF_q, a mean of each batch's ratio).
            "queries per DPU-batch (max / mean)",
            format!(
                "{} / {}",
                r.max_queries_per_dpu,
                mean_shown(r.mean_queries_per_dpu)
            ),
        ),
        (
            "busiest DPU's queries on its hot tree",
            format!("{:.0}%", 100.0 * r.bottleneck_hot_share),
        ),
        (
            "trees fit in MRAM",
            format!(
                "{} (largest need {} of {} bytes, DPU {}; a run also needs its batches' buffers)",
                if r.fits_in_mram { "yes" } else { "NO" },
                r.mram.max_needed_bytes,
                r.mram.available_bytes,
                r.mram.max_needed_dpu
            ),
        ),
    ];
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    for (k, v) in rows {
        let _ = writeln!(s, "  {k:<width$}  {v}");
    }
    s
}

/// One comparison row per report.
pub fn comparison(rows: &[(f64, PartitionReport)]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:>5}  {:<16}  {:>7}  {:>9}  {:>7}  {:>10}  {:>4}  fits",
        "skew", "partitioner", "IF_q", "IF_q ref", "IF_d", "partitions", "hot"
    );
    for (skew, r) in rows {
        let _ = writeln!(
            s,
            "{:>5.2}  {:<16}  {:>7.3}  {:>9.3}  {:>7.3}  {:>10}  {:>4}  {}",
            skew,
            r.partitioner,
            r.imbalance.queries,
            r.imbalance.queries_reference,
            r.imbalance.data,
            r.partitions,
            r.hot_partitions,
            if r.fits_in_mram { "yes" } else { "NO" }
        );
    }
    s
}

/// A stage's label in the run table (B+-Forest's stages keep their long-standing labels).
fn stage_label(name: &str) -> String {
    match name {
        "routing" => "routing (host)".into(),
        "cpu_to_dpu" => "CPU -> DPU".into(),
        "dpu_kernel" => "DPU kernel".into(),
        "dpu_to_cpu" => "DPU -> CPU".into(),
        "postprocessing" => "postprocessing (host)".into(),
        "waiting" => "waiting for the DPUs".into(),
        other => other.replace('_', " "),
    }
}

pub fn run_report(r: &crate::experiments::run::RunReport) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{}", run_heading(r));
    let mut rows = vec![(
        "batch time (mean +- sd)".to_string(),
        format!(
            "{:.1} +- {:.1} us over {}",
            r.batch_time_us.mean,
            r.batch_time_us.stddev,
            crate::config::counted(r.measured_batches, "measured batch")
        ),
    )];
    rows.extend(breakdown_rows(&r.breakdown_us, &r.launch_split));
    rows.extend(transfer_bounds_row(r));
    rows.extend(protocol_rows(r));
    rows.extend(r.index_rows.iter().cloned());
    let names: Vec<&str> = r.init_us.0.iter().map(|(k, _)| k.as_str()).collect();
    let values: Vec<String> = r.init_us.0.iter().map(|(_, v)| format!("{v:.0}")).collect();
    rows.push((
        format!("init: {}", names.join(" / ")),
        format!("{} us", values.join(" / ")),
    ));
    let batches = &r.config.workload.batches;
    let verified = match (r.answers_verified, batches.simulate_warmup) {
        (false, _) => "NO".to_owned(),
        (true, true) => "yes".to_owned(),
        (true, false) => format!(
            "yes, of the measured batches ({} warm-up not simulated: batches.simulate_warmup = false)",
            batches.warmup
        ),
    };
    rows.push(("answers verified".into(), verified));
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    for (k, v) in rows {
        let _ = writeln!(s, "  {k:<width$}  {v}");
    }
    s
}

fn run_heading(r: &crate::experiments::run::RunReport) -> String {
    let w = &r.config.workload;
    let partitioner = match r.index_str("partitioner") {
        "" => String::new(),
        name => format!(", partitioner {name}"),
    };
    // Open arrivals close a batch when its time is up, so it may hold fewer queries.
    let up_to = if r.protocol.queries_per_s.is_some() {
        "up to "
    } else {
        ""
    };
    format!(
        "{} on {} ({}, {}){partitioner}, {} pairs, {up_to}{} {} queries per batch, skew {}, seed {}",
        match r.index.as_str() {
            "b+forest" => "B+-Forest",
            "pim-tree" => "PIM-tree",
            other => other,
        },
        r.config.machine.name,
        dpus_phrase(r.dpus),
        crate::config::counted(r.tasklets, "tasklet"),
        w.data.pairs,
        r.queries_per_batch,
        w.queries.kind.name(),
        shown(w.queries.skew),
        r.seed
    )
}

/// One row per stage (and waiting, when there was any; a launching stage followed by its
/// split), then the split by class.
fn breakdown_rows(
    b: &crate::experiments::run::Named,
    launches: &BTreeMap<String, crate::experiments::run::LaunchSplit>,
) -> Vec<(String, String)> {
    let classes = crate::system::program::Class::ALL.map(|c| c.key());
    let mut rows = Vec::new();
    for (name, us) in &b.0 {
        let class = classes.contains(&name.as_str());
        let idle = name == "waiting" && *us == 0.0;
        if class || idle {
            continue;
        }
        rows.push((format!("  {}", stage_label(name)), format!("{us:.1} us")));
        if let Some(l) = launches.get(name) {
            rows.push((
                "    launch / slowest DPU / until seen".into(),
                format!(
                    "{:.1} / {:.1} / {:.1} us{}",
                    l.launch_us,
                    l.slowest_dpu_us,
                    l.until_seen_us,
                    match l.launches {
                        n if (n - 1.0).abs() < 1e-9 => String::new(),
                        n => format!(
                            ", over {} launches per batch",
                            shown((n * 100.0).round() / 100.0)
                        ),
                    }
                ),
            ));
        }
    }
    rows.push((
        "  as cpu / communication / pim".into(),
        format!(
            "{:.1} / {:.1} / {:.1} us",
            b.get("cpu"),
            b.get("communication"),
            b.get("pim")
        ),
    ));
    rows
}

/// Which term of the transfer model bounds each transfer stage (`transfer_bounds`): the
/// term alone when every transfer of the stage had it, else each with its count.
fn transfer_bounds_row(r: &crate::experiments::run::RunReport) -> Option<(String, String)> {
    let stages: Vec<String> = r
        .transfer_bounds
        .iter()
        .map(|(stage, bounds)| {
            let terms: Vec<String> = match bounds.len() {
                1 => bounds.keys().cloned().collect(),
                _ => bounds.iter().map(|(b, n)| format!("{b} x{n}")).collect(),
            };
            format!("{} {}", stage_label(stage), terms.join(", "))
        })
        .collect();
    (!stages.is_empty()).then(|| ("transfers bound by".to_owned(), stages.join("; ")))
}

fn protocol_rows(r: &crate::experiments::run::RunReport) -> Vec<(String, String)> {
    let p = &r.protocol;
    let arrivals = match p.queries_per_s {
        Some(q) => format!("open arrivals at {q} queries/s"),
        None => "closed arrivals".into(),
    };
    let cooldown = match p.cooldown_batches {
        0 => String::new(),
        n => format!(
            " ({} after the measured ones)",
            crate::config::counted(n, "cool-down batch")
        ),
    };
    let protocol = format!(
        "{} launch, {} in flight{cooldown}, {arrivals}",
        format!("{:?}", p.launch).to_lowercase(),
        p.batches_in_flight
    );
    let l = &r.latency_us;
    let k = &r.dpu_kernel_us;
    let mut rows = vec![("protocol".into(), protocol)];
    if p.queries_per_s.is_some() {
        let q = &r.queries_per_measured_batch;
        rows.push((
            "queries per measured batch".into(),
            format!("{:.1} (std {:.1})", q.mean, q.stddev),
        ));
    }
    rows.extend([
        (
            "batch interval (mean)".into(),
            format!("{:.1} us", r.batch_interval_us.mean),
        ),
        (
            "throughput".into(),
            format!(
                "{}{}",
                queries_per_s(r.throughput_queries_per_s),
                if r.saturated { " (SATURATED)" } else { "" }
            ),
        ),
        (
            "query latency p50/p99/p99.9".into(),
            format!("{:.1} / {:.1} / {:.1} us", l.p50, l.p99, l.p999),
        ),
        (
            "DPU kernel time min/p50/p99/max".into(),
            format!(
                "{:.1} / {:.1} / {:.1} / {:.1} us",
                k.min, k.p50, k.p99, k.max
            ),
        ),
    ]);
    rows
}

/// A throughput in a unit that shows its digits: millions, thousands, or queries.
fn queries_per_s(q: f64) -> String {
    if q >= 1e6 {
        format!("{:.3} M queries/s", q / 1e6)
    } else if q >= 1e3 {
        format!("{:.3} k queries/s", q / 1e3)
    } else {
        format!("{q:.1} queries/s")
    }
}

/// One row per timed run.
pub fn run_comparison(rows: &[crate::experiments::run::RunReport]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:>5}  {:<16}  {:>9}  {:>8}  {:>8}  {:>8}  {:>8}  {:>8}  {:>9}  {:>6}  {:>6}  verified",
        "skew",
        "partitioner",
        "batch ms",
        "route",
        "cpu>dpu",
        "kernel",
        "dpu>cpu",
        "merge",
        "Mquery/s",
        "IF_q",
        "IF_d"
    );
    for r in rows {
        let b = &r.breakdown_us;
        let ms = |us: f64| us / 1000.0;
        let _ = writeln!(
            s,
            "{:>5.2}  {:<16}  {:>9.3}  {:>8.3}  {:>8.3}  {:>8.3}  {:>8.3}  {:>8.3}  {:>9.2}  {:>6.2}  {:>6.3}  {}",
            r.config.workload.queries.skew,
            r.index_str("partitioner"),
            ms(r.batch_time_us.mean),
            ms(b.get("routing")),
            ms(b.get("cpu_to_dpu")),
            ms(b.get("dpu_kernel")),
            ms(b.get("dpu_to_cpu")),
            ms(b.get("postprocessing")),
            r.throughput_queries_per_s / 1e6,
            r.index_f64(&["imbalance", "queries"]),
            r.index_f64(&["imbalance", "data"]),
            if r.answers_verified { "yes" } else { "NO" }
        );
    }
    let _ = writeln!(s, "(times in ms: mean over the measured batches)");
    s
}

/// The settings that shape this partitioning beside the workload's size and skew: the
/// partitioner's own tuning keys (only those it reads), pair granularity and a ZcAmp
/// deviation, each `, name value`.
fn tuning_phrase(r: &PartitionReport) -> String {
    let p = &r.config.workload.partition;
    let reads = |key: &str| {
        crate::partition::by_name(&r.partitioner).is_some_and(|q| q.tuning_keys().contains(&key))
    };
    let mut phrase = String::new();
    if reads("partition.alpha") {
        let _ = write!(phrase, ", alpha {}", p.alpha);
    }
    if reads("partition.data_cap") {
        let _ = write!(phrase, ", data_cap {}", shown(p.data_cap));
    }
    if reads("partition.double_scan_gates") && p.double_scan_gates {
        phrase.push_str(", double-scan gates");
    }
    if p.granularity == crate::workload::spec::Granularity::Pair {
        phrase.push_str(", pair granularity");
    }
    if let Some(d) = &r.config.workload.deviation {
        let (base, factor) = (d.base_partition, shown(d.factor));
        let _ = write!(phrase, ", ZcAmp(b_{base}, {factor})");
    }
    phrase
}

/// A mean count: one decimal, or three significant digits below 1 (a mean of 0.0078 queries
/// per DPU had read 0.0).
fn mean_shown(mean: f64) -> String {
    match mean {
        m if m > 0.0 && m < 1.0 => format!("{m:.2e}")
            .parse::<f64>()
            .map_or(format!("{m}"), |x| x.to_string()),
        m => format!("{m:.1}"),
    }
}

#[cfg(test)]
mod tests {
    use super::{mean_shown, queries_per_s};

    #[test]
    fn a_mean_below_one_keeps_three_digits() {
        assert_eq!(mean_shown(1.0 / 128.0), "0.00781");
        assert_eq!(mean_shown(0.5), "0.5");
        assert_eq!(mean_shown(0.0), "0.0");
        assert_eq!(mean_shown(1022.43), "1022.4");
    }

    #[test]
    fn a_throughput_keeps_its_digits_at_any_rate() {
        assert_eq!(queries_per_s(43_299_065.8), "43.299 M queries/s");
        assert_eq!(queries_per_s(1_000_000.0), "1.000 M queries/s");
        assert_eq!(queries_per_s(25_400.0), "25.400 k queries/s");
        // An open-arrival run at 100 queries per second, once shown as 0.000 M.
        assert_eq!(queries_per_s(100.02), "100.0 queries/s");
        assert_eq!(queries_per_s(0.0), "0.0 queries/s");
    }
}
