//! Simulated DPUs run on rayon threads; every number must be the same on one thread and on
//! several: the same batch report (per-DPU cycles, per-tasklet cycles, counters) and the
//! same MRAM bytes.

mod common;

use pimdes::dpu::{Kernel, KernelError, Op, Tasklet};
use pimdes::microbench;
use pimdes::system::System;

const OUT: u64 = 1 << 20;

/// Dynamic work sharing, as an index kernel would do it: tasklets take item numbers from a
/// mutex-protected counter in WRAM; item i reads a variable-size record (16 (i mod 15) + 8
/// bytes), sums its words and writes the sum back. DPU d has 40 + 13 d items.
struct WorkQueue;

fn items(dpu: u32) -> u64 {
    40 + 13 * dpu as u64
}

fn record_bytes(i: u64) -> u32 {
    16 * (i % 15) as u32 + 8
}

impl Kernel for WorkQueue {
    fn wram_globals_bytes(&self) -> u32 {
        8
    }

    async fn tasklet(&self, t: &Tasklet) -> Result<(), KernelError> {
        let buf = t.mem_alloc(256)?;
        let counter = t.globals();
        let mut words = vec![0u64; 32];
        loop {
            t.mutex_lock(0).await?;
            let i = t.wram_read_u64(counter)?;
            t.wram_write_u64(counter, i + 1)?;
            t.mutex_unlock(0).await?;
            if i >= items(t.dpu()) {
                return Ok(());
            }
            let size = record_bytes(i);
            t.mram_read(i * 256, buf, size).await?;
            let n = (size / 8) as usize;
            t.wram_read_u64s(buf, &mut words[..n])?;
            let sum = words[..n].iter().fold(0u64, |a, &w| a.wrapping_add(w));
            t.op(Op::AddI64, n as u64).await?;
            t.wram_write_u64(buf, sum)?;
            t.mram_write(buf, OUT + i * 8, 8).await?;
        }
    }
}

fn simulate(threads: usize) -> (pimdes::system::BatchReport, Vec<Vec<u64>>) {
    let m = common::machine(&["ranks=1", "usable_dpus=12"]);
    let mut system = System::new(&m);
    for d in system.dpus_mut() {
        let words: Vec<u64> = (0..items(d.index()) * 32)
            .map(|w| w * 2654435761 % 1000 + d.index() as u64)
            .collect();
        d.mram_mut().write_u64s(0, &words);
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    let report = pool.install(|| system.launch(&WorkQueue, 11)).unwrap();
    let outputs = system
        .dpus()
        .iter()
        .map(|d| d.mram().read_u64s(OUT, items(d.index()) as usize))
        .collect();
    (report, outputs)
}

#[test]
fn a_system_launch_is_identical_on_one_and_several_threads() {
    let (one, out_one) = simulate(1);
    let (three, out_three) = simulate(3);
    assert_eq!(one, three);
    assert_eq!(out_one, out_three);
    // The answers are right, not only reproducible.
    for (d, out) in out_one.iter().enumerate() {
        for (i, &sum) in out.iter().enumerate() {
            let i = i as u64;
            let n = record_bytes(i) as u64 / 8;
            let expect = (0..n)
                .map(|k| (i * 32 + k) * 2654435761 % 1000 + d as u64)
                .fold(0u64, |a, w| a.wrapping_add(w));
            assert_eq!(sum, expect, "DPU {d} item {i}");
        }
    }
    // DPUs with more items take longer: the batch waits for the last DPU.
    assert_eq!(one.slowest_cycles, one.per_dpu[11].cycles);
    assert!(one.per_dpu.windows(2).all(|w| w[0].cycles < w[1].cycles));
}

#[test]
fn microbenchmark_records_are_identical_on_one_and_several_threads() {
    let m = common::machine(&[]);
    let pool = |n| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build()
            .unwrap()
    };
    for suite in ["mram", "stream", "transfer", "prim-sel"] {
        let one = pool(1).install(|| microbench::run(suite, &m).unwrap().unwrap());
        let four = pool(4).install(|| microbench::run(suite, &m).unwrap().unwrap());
        assert_eq!(one, four, "suite {suite}");
    }
}
