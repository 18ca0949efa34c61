//! The paper's ZcAmp observation as a regression check: amplifying queries on one cold base
//! partition makes the cold partitions, not the hot ones, the busiest DPU's load.

use pimdes::config::Override;
use pimdes::experiments::partition::run_partition;
use pimdes::machine::Machine;
use pimdes::partition::by_name;
use pimdes::workload::Workload;

fn hot_share(extra: &[&str]) -> (f64, f64) {
    let machine = Machine::from_toml_str(
        "paper-2rank.toml",
        include_str!("../machines/paper-2rank.toml"),
        &[],
    )
    .unwrap();
    let o: Vec<Override> = extra.iter().map(|s| Override::parse(s).unwrap()).collect();
    let workload = Workload::from_toml_str(
        "quick-raq.toml",
        include_str!("../workloads/quick-raq.toml"),
        &o,
    )
    .unwrap();
    let r = run_partition(
        &machine,
        &workload,
        by_name("qdd-double-scan").unwrap().as_ref(),
    )
    .unwrap();
    (r.bottleneck_hot_share, r.imbalance.queries)
}

#[test]
fn amplifying_a_cold_base_partition_moves_the_bottleneck_to_cold_data() {
    let (plain_share, plain_if) = hot_share(&[]);
    let (amp_share, amp_if) = hot_share(&["deviation.base_partition=64", "deviation.factor=10"]);
    assert!(
        plain_share > 0.5,
        "without deviation the busiest DPU is busy with a hot range: {plain_share}"
    );
    assert!(
        amp_share < 0.5,
        "under ZcAmp the busiest DPU is busy with cold data: {amp_share}"
    );
    assert!(amp_if > plain_if);
}
