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
