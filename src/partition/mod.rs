//! Partitioners: they cut the chunk sequence into partitions and place each on a DPU, as
//! cold (the DPU's own base data) or hot (a dense range moved there).
//!
//! Every partitioner implements [`Partitioner`]; [`by_name`] picks one from the registry.

pub mod ccp;
pub mod keys;
pub mod loads;
pub mod prepared;
pub mod qdd;
pub mod routing;

pub use loads::ChunkLoads;
pub use routing::RoutingTable;

use std::fmt;
use std::ops::Range;

/// Parameters every partitioner receives.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PartitionParams {
    /// P: DPUs, one base partition each.
    pub dpus: u32,
    /// Hot ranges are about (1/alpha)(D/P) pairs wide.
    pub alpha: u64,
    /// Capped CCP: a part holds at most data_cap x D/P pairs.
    pub data_cap: f64,
    /// Double scan: use the authors' later gates.
    pub double_scan_gates: bool,
}

/// One contiguous run of chunks and where it lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    pub chunks: Range<usize>,
    pub dpu: u32,
    /// In the DPU's hot tree (a range moved there) rather than its cold tree.
    pub hot: bool,
}

/// A partitioner's result: parts in chunk order, covering every chunk exactly once.
#[derive(Debug, Clone, PartialEq)]
pub struct Partitioning {
    pub parts: Vec<Part>,
    pub dpus: u32,
    /// Hot partitions placed (each on its own DPU; one may consist of several runs).
    pub hot_partitions: u32,
    /// Things the user should know (for example hot ranges dropped for lack of DPUs).
    pub warnings: Vec<String>,
}

impl Partitioning {
    /// Builds the part list from a per-chunk owner array, merging neighbours.
    pub fn from_owners(owners: &[(u32, bool)], dpus: u32, hot_partitions: u32) -> Partitioning {
        let mut parts: Vec<Part> = Vec::new();
        for (i, &(dpu, hot)) in owners.iter().enumerate() {
            match parts.last_mut() {
                Some(last) if last.dpu == dpu && last.hot == hot => last.chunks.end = i + 1,
                _ => parts.push(Part {
                    chunks: i..i + 1,
                    dpu,
                    hot,
                }),
            }
        }
        Partitioning {
            parts,
            dpus,
            hot_partitions,
            warnings: Vec::new(),
        }
    }

    /// Contiguous parts `ranges`, part k on DPU k, all cold.
    pub fn from_ranges(ranges: &[Range<usize>], dpus: u32) -> Partitioning {
        let parts = ranges
            .iter()
            .enumerate()
            .map(|(k, r)| Part {
                chunks: r.clone(),
                dpu: k as u32,
                hot: false,
            })
            .collect();
        Partitioning {
            parts,
            dpus,
            hot_partitions: 0,
            warnings: Vec::new(),
        }
    }

    /// Pairs on each DPU as (cold, hot).
    pub fn pairs_per_dpu(&self, loads: &ChunkLoads) -> Vec<(u64, u64)> {
        let mut out = vec![(0u64, 0u64); self.dpus as usize];
        for p in &self.parts {
            let size = loads.size(p.chunks.start, p.chunks.end - 1);
            let slot = &mut out[p.dpu as usize];
            if p.hot {
                slot.1 += size;
            } else {
                slot.0 += size;
            }
        }
        out
    }

    /// Reference-batch query counts per DPU as the partitioner saw them (chunk counts).
    pub fn chunk_queries_per_dpu(&self, loads: &ChunkLoads) -> Vec<u64> {
        let mut out = vec![0u64; self.dpus as usize];
        for p in &self.parts {
            out[p.dpu as usize] += loads.queries(p.chunks.start, p.chunks.end - 1);
        }
        out
    }

    /// Checks the structural invariants: parts in order, non-empty, covering `0..chunks`,
    /// DPU indices in range, at most one hot partition per DPU is the caller's to check.
    pub fn check(&self, chunks: usize) -> Result<(), String> {
        let mut next = 0;
        for (k, p) in self.parts.iter().enumerate() {
            if p.chunks.start != next || p.chunks.is_empty() {
                return Err(format!(
                    "part {k} is {:?}, expected to start at {next}",
                    p.chunks
                ));
            }
            if p.dpu >= self.dpus {
                return Err(format!("part {k} is on DPU {} of {}", p.dpu, self.dpus));
            }
            next = p.chunks.end;
        }
        if next != chunks {
            return Err(format!("parts cover {next} of {chunks} chunks"));
        }
        Ok(())
    }
}

/// Why a partitioner could not produce a partitioning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PartitionError {
    /// One chunk alone holds more pairs than a part may.
    ChunkAboveCap {
        chunk: usize,
        pairs: u64,
        cap_pairs: u64,
    },
    /// No way to cut the chunks into P parts under the data cap.
    CapInfeasible {
        dpus: u32,
        cap_pairs: u64,
        /// Pairs of the data set.
        pairs: u64,
    },
    /// Fewer chunks than DPUs.
    TooFewChunks { chunks: usize, dpus: u32 },
}

impl fmt::Display for PartitionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PartitionError::ChunkAboveCap {
                chunk,
                pairs,
                cap_pairs,
            } => write!(
                f,
                "chunk {chunk} holds {pairs} pairs, above the data cap of {cap_pairs} pairs per part; raise partition.data_cap or lower partition.chunk_pairs"
            ),
            PartitionError::CapInfeasible {
                dpus,
                cap_pairs,
                pairs,
            } if u64::from(*dpus).saturating_mul(*cap_pairs) < *pairs => write!(
                f,
                "{dpus} parts of at most {cap_pairs} pairs hold fewer than the {pairs} pairs of the data; raise partition.data_cap"
            ),
            PartitionError::CapInfeasible {
                dpus, cap_pairs, ..
            } => write!(
                f,
                "the chunks cannot be cut into {dpus} parts of at most {cap_pairs} pairs; raise partition.data_cap or lower partition.chunk_pairs"
            ),
            PartitionError::TooFewChunks { chunks, dpus } => {
                write!(f, "{chunks} chunks cannot be spread over {dpus} DPUs")
            }
        }
    }
}

impl std::error::Error for PartitionError {}

/// A partitioning policy.
pub trait Partitioner: Send + Sync {
    /// The name users select it by.
    fn name(&self) -> &'static str;
    /// The workload's tuning keys this partitioner reads, of [`TUNING_KEYS`].
    fn tuning_keys(&self) -> &'static [&'static str] {
        &[]
    }
    /// Whether it places chunks by the reference batch's queries (all but data-balanced).
    fn reads_queries(&self) -> bool {
        true
    }
    fn partition(
        &self,
        loads: &ChunkLoads,
        params: &PartitionParams,
    ) -> Result<Partitioning, PartitionError>;
}

/// The workload keys that tune one partitioner or another: setting one that the chosen
/// partitioner does not read changes nothing, which the user should hear of.
pub const TUNING_KEYS: [&str; 3] = [
    "partition.alpha",
    "partition.data_cap",
    "partition.double_scan_gates",
];

/// Every partitioner, in the order reports list them.
pub fn registry() -> Vec<Box<dyn Partitioner>> {
    vec![
        Box::new(DataBalanced),
        Box::new(ccp::QueryBalanced),
        Box::new(ccp::CappedCcp),
        Box::new(qdd::QddGreedy),
        Box::new(qdd::QddDoubleScan),
    ]
}

/// The names of every partitioner.
pub fn names() -> Vec<&'static str> {
    registry().iter().map(|p| p.name()).collect()
}

pub fn by_name(name: &str) -> Option<Box<dyn Partitioner>> {
    registry().into_iter().find(|p| p.name() == name)
}

/// The P base partitions as they are: equal data, each on its own DPU.
pub struct DataBalanced;

impl Partitioner for DataBalanced {
    fn name(&self) -> &'static str {
        "data-balanced"
    }

    fn reads_queries(&self) -> bool {
        false
    }

    fn partition(
        &self,
        loads: &ChunkLoads,
        params: &PartitionParams,
    ) -> Result<Partitioning, PartitionError> {
        let p = params.dpus as usize;
        check_enough_chunks(loads, params.dpus)?;
        let ranges: Vec<Range<usize>> = (0..p)
            .map(|j| {
                let (a, b) = loads.base_partition(j, p);
                a..b
            })
            .collect();
        Ok(Partitioning::from_ranges(&ranges, params.dpus))
    }
}

pub(crate) fn check_enough_chunks(loads: &ChunkLoads, dpus: u32) -> Result<(), PartitionError> {
    if dpus == 0 || loads.chunks() < dpus as usize {
        return Err(PartitionError::TooFewChunks {
            chunks: loads.chunks(),
            dpus,
        });
    }
    Ok(())
}
