//! Simulated events per second of the DPU model (`cargo bench --bench engine`).
//!
//! The workload is the shape of an index kernel: 16 tasklets, each repeating a small DMA
//! read and a short compute (two events per iteration). Prints events/s on one thread
//! (one DPU after another) and on all threads (a `System` launch, DPUs in parallel), per
//! wall-clock second and per CPU second of the process (read from /proc/self/stat on
//! Linux; the CPU figure is the one to trust on a busy machine).

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

/// CPU seconds (user + system) of this process so far, from /proc/self/stat.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which ends with ')'): utime is the 12th, stime the 13th.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    // USER_HZ is 100 on every Linux configuration Rust supports.
    Some(ticks / 100.0)
}

fn report(label: &str, events: u64, wall: f64, cpu: Option<f64>) {
    let per_cpu = match cpu {
        Some(c) if c > 0.0 => format!(", {:.1} M events per CPU second", events as f64 / c / 1e6),
        _ => String::new(),
    };
    println!(
        "{label}: {events} events in {wall:.3} s = {:.1} M events/s wall{per_cpu}",
        events as f64 / wall / 1e6
    );
}

fn main() {
    let machine = Machine::from_toml_str(
        "upmem-2556-350mhz.toml",
        include_str!("../machines/upmem-2556-350mhz.toml"),
        &[],
    )
    .expect("embedded machine is valid");

    // One thread: DPUs simulated one after another.
    let dpus = 24;
    let cpu0 = cpu_seconds();
    let start = Instant::now();
    let mut events = 0;
    for i in 0..dpus {
        let mut dpu = Dpu::new(&machine.dpu, i);
        let r = dpu.launch(&DmaAndCompute, TASKLETS).expect("kernel runs");
        events += r.stats.events;
    }
    let secs = start.elapsed().as_secs_f64();
    let cpu = cpu_seconds().zip(cpu0).map(|(b, a)| b - a);
    report("one thread", events, secs, cpu);

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
    let cpu0 = cpu_seconds();
    let start = Instant::now();
    let batch = system
        .launch(&DmaAndCompute, TASKLETS)
        .expect("kernel runs");
    let secs = start.elapsed().as_secs_f64();
    let cpu = cpu_seconds().zip(cpu0).map(|(b, a)| b - a);
    let label = format!("all {} threads", rayon::current_num_threads());
    report(&label, batch.events, secs, cpu);
}
