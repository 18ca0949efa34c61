//! Tables for people. Scripts should use `--json`.

use crate::experiments::partition::PartitionReport;
use std::fmt::Write;

pub fn partition_report(r: &PartitionReport) -> String {
    let mut s = String::new();
    let w = &r.config.workload;
    let _ = writeln!(
        s,
        "partitioner {} on {} ({} DPUs), workload: {} pairs, {} {} queries per batch, skew {}, alpha {}, seed {}",
        r.partitioner,
        r.config.machine.name,
        r.dpus,
        w.data.pairs,
        w.queries.batch_size,
        w.queries.kind.name(),
        w.queries.skew,
        w.partition.alpha,
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
            "pairs per DPU (max / mean)",
            format!("{} / {:.0}", r.max_pairs_per_dpu, r.mean_pairs_per_dpu),
        ),
        (
            "queries per DPU (max / mean)",
            format!("{} / {:.1}", r.max_queries_per_dpu, r.mean_queries_per_dpu),
        ),
        (
            "fits in MRAM",
            format!(
                "{} (largest need {} of {} bytes, DPU {})",
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

pub fn run_report(r: &crate::experiments::run::RunReport) -> String {
    let mut s = String::new();
    let w = &r.config.workload;
    let _ = writeln!(
        s,
        "B+-Forest on {} ({} DPUs, {} tasklets), partitioner {}, {} pairs, {} {} queries per batch, skew {}, seed {}",
        r.config.machine.name,
        r.dpus,
        r.tasklets,
        r.partitioner,
        w.data.pairs,
        r.queries_per_batch,
        w.queries.kind.name(),
        w.queries.skew,
        r.seed
    );
    let b = &r.breakdown_us;
    let rows = [
        (
            "batch time (mean +- sd)".to_string(),
            format!(
                "{:.1} +- {:.1} us over {} measured batches",
                r.batch_time_us.mean, r.batch_time_us.stddev, r.measured_batches
            ),
        ),
        ("  routing (host)".into(), format!("{:.1} us", b.routing)),
        ("  CPU -> DPU".into(), format!("{:.1} us", b.cpu_to_dpu)),
        ("  DPU kernel".into(), format!("{:.1} us", b.dpu_kernel)),
        ("  DPU -> CPU".into(), format!("{:.1} us", b.dpu_to_cpu)),
        (
            "  postprocessing (host)".into(),
            format!("{:.1} us", b.postprocessing),
        ),
        (
            "throughput".into(),
            format!("{:.3} M queries/s", r.throughput_queries_per_s / 1e6),
        ),
        (
            "DPU kernel time min/p50/p99/max".into(),
            format!(
                "{:.1} / {:.1} / {:.1} / {:.1} us",
                r.dpu_kernel_us.min, r.dpu_kernel_us.p50, r.dpu_kernel_us.p99, r.dpu_kernel_us.max
            ),
        ),
        (
            "IF_q / IF_d".into(),
            format!("{:.3} / {:.3}", r.imbalance.queries, r.imbalance.data),
        ),
        (
            "init: build / partition / exchange".into(),
            format!(
                "{:.0} / {:.0} / {:.0} us",
                r.init_us.build, r.init_us.partition, r.init_us.exchange
            ),
        ),
        (
            "answers verified".into(),
            if r.answers_verified { "yes" } else { "NO" }.into(),
        ),
    ];
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    for (k, v) in rows {
        let _ = writeln!(s, "  {k:<width$}  {v}");
    }
    s
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
            r.partitioner,
            ms(r.batch_time_us.mean),
            ms(b.routing),
            ms(b.cpu_to_dpu),
            ms(b.dpu_kernel),
            ms(b.dpu_to_cpu),
            ms(b.postprocessing),
            r.throughput_queries_per_s / 1e6,
            r.imbalance.queries,
            r.imbalance.data,
            if r.answers_verified { "yes" } else { "NO" }
        );
    }
    let _ = writeln!(s, "(times in ms: mean over the measured batches)");
    s
}
