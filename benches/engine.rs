//! Simulated events per second of the DPU model (`cargo bench --bench engine`).
//!
//! The workload is the shape of an index kernel: 16 tasklets, each repeating a small DMA
//! read and a short compute (two events per iteration). Prints events/s on one thread
//! (one DPU after another) and on all threads (a `System` launch, DPUs in parallel).

use pimdes::dpu::{Dpu, Kernel, KernelError, Tasklet};
use pimdes::machine::Machine;
use pimdes::system::System;
use std::time::Instant;

const ITERATIONS: u64 = 20_000;
const TASKLETS: u32 = 16;

struct DmaAndCompute;

impl Kernel for DmaAndCompute {
    async fn tasklet(&self, t: &Tasklet) -> Result<(), KernelError> {
        let buf = t.mem_alloc(64)?;
        let base = t.id() as u64 * (1 << 20);
        for i in 0..ITERATIONS {
            t.mram_read(base + (i % 1024) * 64, buf, 64).await?;
            t.compute(20).await?;
        }
        Ok(())
    }
}

fn main() {
    let machine = Machine::from_toml_str(
        "upmem-2556-350mhz.toml",
        include_str!("../machines/upmem-2556-350mhz.toml"),
        &[],
    )
    .expect("embedded machine is valid");

    // One thread: DPUs simulated one after another.
    let dpus = 8;
    let start = Instant::now();
    let mut events = 0;
    for i in 0..dpus {
        let mut dpu = Dpu::new(&machine.dpu, i);
        events += dpu
            .launch(&DmaAndCompute, TASKLETS)
            .expect("kernel runs")
            .stats
            .events;
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "one thread: {events} events in {secs:.3} s = {:.1} M events/s",
        events as f64 / secs / 1e6
    );

    // All threads: a whole-system launch on a 64-DPU machine.
    let small = Machine::from_toml_str(
        "upmem-2556-350mhz.toml",
        include_str!("../machines/upmem-2556-350mhz.toml"),
        &[
            pimdes::config::Override::parse("machine.ranks=1").unwrap(),
            pimdes::config::Override::parse("machine.usable_dpus=64").unwrap(),
        ],
    )
    .expect("64-DPU machine is valid");
    let mut system = System::new(&small);
    let start = Instant::now();
    let report = system
        .launch(&DmaAndCompute, TASKLETS)
        .expect("kernel runs");
    let secs = start.elapsed().as_secs_f64();
    println!(
        "all {} threads: {} events in {secs:.3} s = {:.1} M events/s",
        rayon::current_num_threads(),
        report.events,
        report.events as f64 / secs / 1e6
    );
}
