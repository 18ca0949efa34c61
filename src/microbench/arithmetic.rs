//! PrIM `Arithmetic-Throughput`: each tasklet streams 1,024-byte blocks of an MRAM array
//! into WRAM and applies `x = x op scalar` to every element; only the WRAM loop is timed
//! (between two barriers, as PrIM does with its perfcounter).

use super::launch_one;
use crate::config::InputError;
use crate::dpu::{Kernel, KernelError, LaunchError, Op, Tasklet};
use crate::machine::Machine;
use rayon::prelude::*;
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};

/// Elements per DPU (PrIM uses 1,048,576; the model is in steady state far sooner, and the
/// records are the same to the last digit with 65,536).
const ELEMENTS: u64 = 1 << 14;
const BLOCK_BYTES: u32 = 1024;
const MRAM_IN: u64 = 0;
const MRAM_OUT: u64 = 32 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ArithOp {
    Add,
    Sub,
    Mul,
    Div,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DataType {
    Int32,
    Int64,
    Float,
    Double,
}

impl DataType {
    fn bytes(self) -> u32 {
        match self {
            DataType::Int32 | DataType::Float => 4,
            DataType::Int64 | DataType::Double => 8,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ArithmeticRecord {
    pub op: ArithOp,
    #[serde(rename = "type")]
    pub data_type: DataType,
    pub tasklets: u32,
    /// Millions of operations per second of one DPU.
    pub mops: f64,
}

fn op_code(op: ArithOp, ty: DataType) -> Op {
    use ArithOp::*;
    use DataType::*;
    match (op, ty) {
        (Add, Int32) => Op::AddI32,
        (Sub, Int32) => Op::SubI32,
        (Mul, Int32) => Op::MulI32,
        (Div, Int32) => Op::DivI32,
        (Add, Int64) => Op::AddI64,
        (Sub, Int64) => Op::SubI64,
        (Mul, Int64) => Op::MulI64,
        (Div, Int64) => Op::DivI64,
        (Add, Float) => Op::AddF32,
        (Sub, Float) => Op::SubF32,
        (Mul, Float) => Op::MulF32,
        (Div, Float) => Op::DivF32,
        (Add, Double) => Op::AddF64,
        (Sub, Double) => Op::SubF64,
        (Mul, Double) => Op::MulF64,
        (Div, Double) => Op::DivF64,
    }
}

/// `x op scalar` on the bytes of one element, for the real result.
fn apply(op: ArithOp, ty: DataType, bytes: &mut [u8], scalar: u64) {
    macro_rules! go {
        ($t:ty, $s:expr, $wrapping:expr) => {{
            let x = <$t>::from_le_bytes(bytes.try_into().expect("element bytes"));
            let s: $t = $s;
            let y: $t = match op {
                ArithOp::Add => $wrapping(x, s, 0),
                ArithOp::Sub => $wrapping(x, s, 1),
                ArithOp::Mul => $wrapping(x, s, 2),
                ArithOp::Div => $wrapping(x, s, 3),
            };
            bytes.copy_from_slice(&y.to_le_bytes());
        }};
    }
    fn int32(x: i32, s: i32, k: u8) -> i32 {
        match k {
            0 => x.wrapping_add(s),
            1 => x.wrapping_sub(s),
            2 => x.wrapping_mul(s),
            _ => x.wrapping_div(s),
        }
    }
    fn int64(x: i64, s: i64, k: u8) -> i64 {
        match k {
            0 => x.wrapping_add(s),
            1 => x.wrapping_sub(s),
            2 => x.wrapping_mul(s),
            _ => x.wrapping_div(s),
        }
    }
    fn float(x: f32, s: f32, k: u8) -> f32 {
        match k {
            0 => x + s,
            1 => x - s,
            2 => x * s,
            _ => x / s,
        }
    }
    fn double(x: f64, s: f64, k: u8) -> f64 {
        match k {
            0 => x + s,
            1 => x - s,
            2 => x * s,
            _ => x / s,
        }
    }
    match ty {
        DataType::Int32 => go!(i32, scalar as i32, int32),
        DataType::Int64 => go!(i64, scalar as i64, int64),
        DataType::Float => go!(f32, scalar as f32, float),
        DataType::Double => go!(f64, scalar as f64, double),
    }
}

struct Throughput {
    op: ArithOp,
    ty: DataType,
    iterations: u64,
    /// Timed cycles of each tasklet.
    cycles: Vec<AtomicU64>,
}

impl Kernel for Throughput {
    async fn tasklet(&self, t: &Tasklet) -> Result<(), KernelError> {
        let buf = t.mem_alloc(BLOCK_BYTES)?;
        let elements = (BLOCK_BYTES / self.ty.bytes()) as u64;
        let per_element = element_instructions(op_code(self.op, self.ty), |o| t.cost(o));
        let stride = BLOCK_BYTES as u64 * t.tasklets() as u64;
        let mut timed = 0;
        t.barrier_wait(0).await?;
        for i in 0..self.iterations {
            let offset = i * stride + t.id() as u64 * BLOCK_BYTES as u64;
            t.mram_read(MRAM_IN + offset, buf, BLOCK_BYTES).await?;
            t.barrier_wait(0).await?;
            let start = t.cycle();
            let size = self.ty.bytes() as usize;
            t.with_wram(buf, BLOCK_BYTES, |bytes| {
                for x in bytes.chunks_exact_mut(size) {
                    apply(self.op, self.ty, x, ELEMENTS);
                }
            })?;
            t.compute(per_element * elements).await?;
            timed += t.cycle() - start;
            t.barrier_wait(0).await?;
            t.mram_write(buf, MRAM_OUT + offset, BLOCK_BYTES).await?;
        }
        self.cycles[t.id() as usize].store(timed, Ordering::Relaxed);
        Ok(())
    }
}

/// Instructions of one element of the loop under `cost`: a WRAM load and store, the
/// operation `code`, the loop's overhead.
fn element_instructions(code: Op, cost: impl Fn(Op) -> u64) -> u64 {
    2 * cost(Op::WramAccess) + cost(code) + cost(Op::LoopIteration)
}

/// The MRAM the suite lays out: the output region starts at 32 MiB and holds as many
/// 8-byte elements as the input, rounded up to whole blocks of every tasklet.
pub(super) fn mram_need_bytes(machine: &Machine) -> u64 {
    (1..=u64::from(machine.dpu.max_tasklets.min(24)))
        .map(|tasklets| {
            let stride = u64::from(BLOCK_BYTES) * tasklets;
            MRAM_OUT + (ELEMENTS * 8).div_ceil(stride) * stride
        })
        .max()
        .unwrap_or(MRAM_OUT)
}

/// Every operation and type the suite measures.
fn measured() -> impl Iterator<Item = (ArithOp, DataType)> {
    let ops = [ArithOp::Add, ArithOp::Sub, ArithOp::Mul, ArithOp::Div];
    let types = [
        DataType::Int32,
        DataType::Int64,
        DataType::Float,
        DataType::Double,
    ];
    ops.into_iter()
        .flat_map(move |op| types.into_iter().map(move |ty| (op, ty)))
}

/// Refuses instruction costs under which an element of some operation costs no cycle: its
/// throughput would be unbounded (it printed `inf` and wrote `null`).
pub(super) fn check_costs(machine: &Machine) -> Result<(), InputError> {
    let costs = &machine.dpu.costs;
    for (op, ty) in measured() {
        let code = op_code(op, ty);
        if element_instructions(code, |o| o.cost(costs)) == 0 {
            let parts = [Op::WramAccess, code, Op::LoopIteration];
            let keys = parts.map(|p| format!("dpu.instructions.{}", p.key()));
            let reason = format!(
                "{}, {} and {} are all 0: an element of the `{}` loop (two WRAM accesses, the operation, the loop's overhead) costs no cycle, so its throughput is unbounded; give one of them a cost",
                keys[1],
                keys[0],
                keys[2],
                code.key()
            );
            let keys = [&keys[1], &keys[0], &keys[2]].map(String::as_str);
            return Err(machine.attribution.error_at_any(&keys, reason));
        }
    }
    Ok(())
}

/// Every op x type at 1 to `min(24, dpu.max_tasklets)` tasklets.
pub fn arithmetic(machine: &Machine) -> Result<Vec<ArithmeticRecord>, LaunchError> {
    let mut configs = Vec::new();
    for (op, ty) in measured() {
        for tasklets in 1..=machine.dpu.max_tasklets.min(24) {
            configs.push((op, ty, tasklets));
        }
    }
    super::in_order(
        configs
            .into_par_iter()
            .map(|(op, ty, tasklets)| run_one(machine, op, ty, tasklets)),
    )
}

fn run_one(
    machine: &Machine,
    op: ArithOp,
    ty: DataType,
    tasklets: u32,
) -> Result<ArithmeticRecord, LaunchError> {
    let stride = BLOCK_BYTES as u64 * tasklets as u64;
    let iterations = (ELEMENTS * ty.bytes() as u64).div_ceil(stride);
    let kernel = Throughput {
        op,
        ty,
        iterations,
        cycles: (0..tasklets).map(|_| AtomicU64::new(0)).collect(),
    };
    let input: Vec<u8> = (0..iterations * stride / ty.bytes() as u64)
        .flat_map(|i| element_bytes(ty, i + 1))
        .collect();
    let (_, dpu) = launch_one(machine, &kernel, tasklets, |d| {
        d.mram_mut().write(MRAM_IN, &input)
    })?;
    // The results are real: check them against the same operation on the host.
    let mut out = vec![0u8; input.len()];
    dpu.mram().read(MRAM_OUT, &mut out);
    let size = ty.bytes() as usize;
    for (i, (x, y)) in input
        .chunks_exact(size)
        .zip(out.chunks_exact(size))
        .enumerate()
    {
        let mut expect = [0u8; 8];
        let expect = &mut expect[..size];
        expect.copy_from_slice(x);
        apply(op, ty, expect, ELEMENTS);
        if expect != y {
            let reason =
                format!("arithmetic {op:?} on {ty:?}: element {i} is {y:?}, the host's {expect:?}");
            let error = KernelError::Kernel { tasklet: 0, reason };
            return Err(LaunchError { dpu: 0, error });
        }
    }
    let timed = kernel
        .cycles
        .iter()
        .map(|c| c.load(Ordering::Relaxed))
        .max()
        .unwrap_or(0);
    let ops = iterations * stride / ty.bytes() as u64;
    let seconds = timed as f64 / machine.dpu.clock.hz() as f64;
    Ok(ArithmeticRecord {
        op,
        data_type: ty,
        tasklets,
        mops: ops as f64 / seconds / 1e6,
    })
}

fn element_bytes(ty: DataType, i: u64) -> Vec<u8> {
    match ty {
        DataType::Int32 => (i as i32).to_le_bytes().to_vec(),
        DataType::Int64 => (i as i64).to_le_bytes().to_vec(),
        DataType::Float => (i as f32).to_le_bytes().to_vec(),
        DataType::Double => (i as f64).to_le_bytes().to_vec(),
    }
}
