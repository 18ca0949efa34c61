//! The seam between the driver and a PIM index. An index places its data on the DPUs, and
//! for each batch computes the answers functionally on the DPU model (its kernels run on
//! real bytes), checks them against its plain reference, and returns the batch's
//! [`Program`]; the driver hands the program to the system executor, which times it. So a
//! new index needs no change to the driver, and every index is timed by the same model.

pub mod bforest;
pub mod pimtree;
pub mod pimtree_ordered;

use crate::config::{Attribution, InputError, blame_rule};
use crate::dpu::{LaunchError, TaskletTimeline};
use crate::engine::Time;
use crate::host::{HostUnit, HostWork};
use crate::machine::Machine;
use crate::system::program::{Program, Step};
use crate::workload::spec::{LaunchMode, Streaming};
use crate::workload::{QueryKind, Workload};
use serde::Serialize;

/// What went wrong inside an index.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// The input asks for something the machine cannot hold or run.
    #[error("{0}")]
    Input(#[from] InputError),
    /// A kernel failed on a DPU.
    #[error("{0}")]
    Kernel(#[from] LaunchError),
    /// The DPUs' answers disagree with the plain reference.
    #[error("{0}")]
    Verification(String),
}

/// One batch, computed: its program and what the DPUs did.
#[derive(Debug, Clone)]
pub struct BatchWork {
    pub program: Program,
    /// Each DPU's kernel time in the batch (over all its launches).
    pub dpu_kernel: Vec<Time>,
    /// Events of the DPU simulations.
    pub events: u64,
    /// Wall seconds spent simulating the DPUs (a fact about the simulating host).
    pub kernel_wall_s: f64,
    /// Queries whose answers were checked against the reference: the driver refuses a
    /// batch in which this is not every query it asked for.
    pub answers_verified: u64,
    /// The tasklet timelines asked for, by DPU (in the order asked).
    pub timelines: Vec<Recording>,
}

/// One DPU's tasklets recorded through a batch: a timeline for each of its launches in the
/// batch, in launch order (several when its share was split to fit MRAM).
#[derive(Debug, Clone)]
pub struct Recording {
    pub dpu: u32,
    pub launches: Vec<TaskletTimeline>,
}

impl Recording {
    /// Whether a launch's timeline reached its bound of spans and was cut.
    pub fn cut(&self) -> bool {
        self.launches.iter().any(|t| t.truncated)
    }
}

/// Which DPUs of a batch to record tasklet by tasklet (for a trace).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    Nothing,
    /// The DPU with the longest kernel (the lowest-numbered among equals).
    Busiest {
        max_spans: usize,
    },
    Dpus {
        dpus: Vec<u32>,
        max_spans: usize,
    },
}

impl Record {
    /// The DPUs to record, by global index, and the span bound; `None` for nothing.
    /// `kernel` is each DPU's kernel time in the batch (to find the busiest).
    pub fn dpus(&self, kernel: &[Time]) -> Option<(Vec<u32>, usize)> {
        match self {
            Record::Nothing => None,
            Record::Busiest { max_spans } => Some((vec![busiest(kernel) as u32], *max_spans)),
            Record::Dpus { dpus, max_spans } => Some((dpus.clone(), *max_spans)),
        }
    }
}

/// The index of the largest value, the lowest index among equals (0 when empty).
pub(crate) fn busiest<T: Ord + Copy>(values: &[T]) -> usize {
    (0..values.len())
        .max_by_key(|&i| (values[i], std::cmp::Reverse(i)))
        .unwrap_or(0)
}

/// A host task of `work` (the host cost model) spread over all the host's threads.
pub(crate) fn host_step(
    machine: &Machine,
    stage: usize,
    label: &'static str,
    work: HostWork,
) -> Step {
    Step::Host {
        stage,
        label,
        work_ps: work.single_thread_ps(&machine.host),
        threads: machine.host.threads,
    }
}

/// Every answer of batch `b` must equal the reference's `want`, and there must be one
/// answer for each of the reference's. Returns how many were compared.
pub(crate) fn verify(
    kind: QueryKind,
    b: u64,
    answers: &[Option<u64>],
    want: &[Option<u64>],
) -> Result<u64, IndexError> {
    if answers.len() != want.len() {
        return Err(IndexError::Verification(format!(
            "batch {b} ({}): the DPUs answered {} queries, the reference {}",
            kind.name(),
            answers.len(),
            want.len()
        )));
    }
    match (0..answers.len()).find(|&i| answers[i] != want[i]) {
        None => Ok(want.len() as u64),
        Some(i) => Err(IndexError::Verification(format!(
            "batch {b}, query {i} ({}): the DPUs answered {:?}, the reference {:?}",
            kind.name(),
            answers[i],
            want[i]
        ))),
    }
}

/// The tasklets the run asks for must exist on the machine's DPUs.
pub(crate) fn check_tasklets(machine: &Machine, workload: &Workload) -> Result<(), InputError> {
    if workload.tasklets > machine.dpu.max_tasklets {
        // Each side is named where its value came from: its `--set`, or its file.
        let source = |a: &Attribution, key: &str| match a.override_of(key) {
            Some(text) => format!("--set {text}"),
            None => format!("{key} of {}", a.origin),
        };
        let mut requested = source(&workload.attribution, "run.tasklets");
        if workload.attribution.override_of("run.tasklets").is_none() {
            let default = crate::workload::spec::DEFAULT_TASKLETS;
            requested = format!("{requested}, {default} when it is not set");
        }
        let reason = format!(
            "{} tasklets requested ({requested}); the machine's DPUs run at most {} ({})",
            workload.tasklets,
            machine.dpu.max_tasklets,
            source(&machine.attribution, "dpu.max_tasklets"),
        );
        // The overrides of either side broke the rule: each is named.
        let parts: [(&Attribution, &[&str]); 2] = [
            (&workload.attribution, &["run.tasklets"]),
            (&machine.attribution, &["dpu.max_tasklets"]),
        ];
        return Err(blame_rule(
            &parts,
            (&workload.attribution, "run.tasklets"),
            reason,
        ));
    }
    Ok(())
}

/// The largest MRAM need of one DPU.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct MramNeed {
    pub available_bytes: u64,
    /// Largest need of one DPU: its data plus its largest batch buffers.
    pub max_needed_bytes: u64,
    pub max_needed_dpu: u32,
    /// The most launches a batch of the run may be split into so that each DPU's largest
    /// share fits beside its data (at most B+-Forest's `batches.max_launches`; always 1 for
    /// PIM-tree, whose rounds are part of its algorithm): each batch takes the fewest its
    /// own shares fit in, within this bound. Not in the report, so that `mram` keeps the
    /// fields of the partition report's; B+-Forest reports the most a measured batch took,
    /// as `launches_per_batch`.
    #[serde(skip)]
    pub launches_per_batch: u32,
}

/// A PIM index on the simulated machine.
pub trait Index {
    /// The name `run.index` selects it by.
    fn name(&self) -> &'static str;

    /// The one-off programs that place the data (in order, each named), timed once.
    fn init_programs(&self) -> Vec<(&'static str, Program)>;

    /// The largest MRAM need of one DPU (checked before any batch ran).
    fn mram(&self) -> MramNeed;

    /// Batch `batch` with its first `queries` queries: routes them, runs the kernel(s) on
    /// the DPUs, merges, checks every answer against the reference. `measured` says
    /// whether the batch counts in the index's own metrics; `record` which DPUs' tasklets
    /// to record (the recording must not change any result).
    fn run_batch(
        &mut self,
        batch: u64,
        queries: u64,
        measured: bool,
        record: &Record,
    ) -> Result<BatchWork, IndexError>;

    /// Batch `batch` left unsimulated (a warm-up batch with `batches.simulate_warmup =
    /// false`): its program as the batch would make it, from its routing alone, with every
    /// kernel taking no time. The executor runs it so the measured batches start from the
    /// machine as that batch would leave it (which ranks' MRAM their DPUs still own). An
    /// index that does not leave batches unsimulated refuses the key before any work
    /// (PIM-tree); this default says so if one is asked anyway.
    fn skip_batch(&mut self, _batch: u64, _queries: u64) -> Result<Program, IndexError> {
        Err(IndexError::Input(InputError::plain(
            "batches.simulate_warmup",
            format!("{} simulates every batch; set it to true", self.name()),
        )))
    }

    /// Index-specific keys of the run report (flattened into it), from the measured batches.
    fn report(&self) -> serde_json::Map<String, serde_json::Value>;

    /// Index-specific lines of the run table: (label, value).
    fn table_rows(&self) -> Vec<(String, String)>;

    /// Things the user should know (also printed on stderr).
    fn warnings(&self) -> Vec<String>;

    /// The units of host work its programs count: the costs of the others
    /// (`host.*_ns_per_*`) do not touch its runs, and a `--set` of them warns so. By
    /// default every unit (an index that does not say warns of none).
    fn host_units(&self) -> &'static [HostUnit] {
        &HostUnit::ALL
    }

    /// Units of [`host_units`](Self::host_units)' complement that other query kinds of the
    /// same index do, each with who does: a note of one names the run's query kind. By
    /// default none.
    fn units_of_other_kinds(&self) -> &'static [(HostUnit, &'static str)] {
        &[]
    }

    /// The `[dpu.instructions]` keys its kernels read (a `--set` of another warns so; its
    /// other counts are fixed in its source). By default not said (warns of none).
    fn instruction_keys(&self) -> Option<Vec<&'static str>> {
        None
    }
}

/// Names `run.index` accepts.
pub fn names() -> &'static [&'static str] {
    &[bforest::NAME, pimtree::NAME]
}

/// The stages of the index called `name`, in its batches' order (none for an unknown name).
pub fn stages_of(name: &str) -> Vec<&'static str> {
    let stages: &[_] = match name {
        bforest::NAME => &bforest::STAGES,
        pimtree::NAME => &pimtree::STAGES,
        _ => &[],
    };
    stages.iter().map(|s| s.name).collect()
}

/// The stages of every index's batches, each name once (the per-stage keys of a run's
/// `breakdown_us`).
pub fn stage_names() -> Vec<&'static str> {
    let mut stages: Vec<&'static str> = Vec::new();
    for stage in names().iter().flat_map(|&index| stages_of(index)) {
        if !stages.contains(&stage) {
            stages.push(stage);
        }
    }
    stages
}

/// The schema of each index's own keys of the run report, by `run.index` name (the run
/// report's schema applies each where `index` names it).
pub fn report_schemas(
    generator: &mut schemars::SchemaGenerator,
) -> Vec<(&'static str, schemars::Schema)> {
    vec![
        (bforest::NAME, bforest::report_schema(generator)),
        (pimtree::NAME, pimtree::report_schema(generator)),
    ]
}

/// [est] DPU time to stream `bytes` through the DMA engine in transfers of 2,048 bytes, or
/// of the machine's largest DMA when it is smaller (the one-off builds' kernels).
pub(crate) fn streaming_time(machine: &Machine, bytes: u64) -> Time {
    let block = machine.dpu.dma.max_size_bytes.min(2048);
    let per_block = machine.dpu.dma.occupancy_cycles(block);
    let blocks = bytes.div_ceil(u64::from(block));
    machine
        .dpu
        .clock
        .to_time(crate::engine::Cycles(blocks.saturating_mul(per_block)))
}

/// Whether the workload's index records tasklet timelines for a trace: of PIM-tree's kernels
/// only the gets' are recorded (docs/pim-tree.md).
pub fn records_timelines(workload: &Workload) -> bool {
    workload.index != pimtree::NAME || workload.kind == QueryKind::Get
}

/// Builds the index the workload names, with its data placed on `machine`'s DPUs.
pub fn build(
    machine: &Machine,
    workload: &Workload,
    partitioner: &dyn crate::partition::Partitioner,
    progress: &mut crate::meter::Phases<'_>,
) -> Result<Box<dyn Index>, IndexError> {
    if workload.streaming == Streaming::Always && workload.index != bforest::NAME {
        let reason = format!(
            "only {} streams its batches; `{}` holds them (use \"auto\" or \"never\")",
            bforest::NAME,
            workload.index
        );
        return Err(workload
            .attribution
            .error_at("batches.streaming", reason)
            .into());
    }
    match workload.index.as_str() {
        bforest::NAME => Ok(Box::new(bforest::BForest::new(
            machine,
            workload,
            partitioner,
            progress,
        )?)),
        pimtree::NAME if workload.kind == QueryKind::Get => Ok(Box::new(pimtree::PimTree::new(
            machine, workload, progress,
        )?)),
        pimtree::NAME => {
            pimtree::check_workload(machine, workload)?;
            Ok(Box::new(pimtree_ordered::PimTreeOrdered::new(
                machine, workload, progress,
            )?))
        }
        _ => Err(unknown_index(workload).into()),
    }
}

fn unknown_index(workload: &Workload) -> InputError {
    let reason = format!(
        "unknown index `{}`; expected one of: {}",
        workload.index,
        names().join(", ")
    );
    workload.attribution.error_at("run.index", reason)
}

/// Checks the workload's `[run]` choices before any work: an index of that name, policies
/// of those names, and tasklets the machine's DPUs have. `partition` builds no index but
/// checks them too, so that no report records a run no index would accept.
pub fn check_choices(machine: &Machine, workload: &Workload) -> Result<(), InputError> {
    if !names().contains(&workload.index.as_str()) {
        return Err(unknown_index(workload));
    }
    bforest::Policies::of(workload)?;
    check_tasklets(machine, workload)
}

/// Machine keys that decide only what fits, never a simulated time: the run fit, so a
/// change of them that still fits moves nothing (docs/machine-model.md).
const CAPACITY_KEYS: [&str; 5] = [
    "dpu.max_tasklets",
    "dpu.wram_size_bytes",
    "dpu.stack_bytes_per_tasklet",
    "dpu.iram_instructions",
    "dpu.atomic_bits",
];

/// What joins a `--set` to the reason it changes nothing in a run (see
/// [`unused_machine_keys`]); `pimdes sensitivity` finds such notes by it.
pub const NOT_READ: &str = " changes nothing in this run: ";

/// Notes on the machine keys a `--set` changed that this run does not read, so that a
/// what-if that moves nothing says why: another index's host costs, the broadcast rate
/// (no index broadcasts), the poll interval of a run that does not poll with it, the
/// instruction costs its kernels do not read, and the capacities.
pub fn unused_machine_keys(
    index: &dyn Index,
    machine: &Machine,
    workload: &Workload,
) -> Vec<String> {
    let a = &machine.attribution;
    let mut notes = Vec::new();
    let mut note = |key: &str, why: &str| {
        if let Some(set) = a.changed(key) {
            notes.push(format!("--set {set}{NOT_READ}{why}"));
        }
    };
    for unit in HostUnit::ALL {
        if !index.host_units().contains(&unit) {
            let other_kinds = index.units_of_other_kinds();
            let queries = match other_kinds.iter().find(|(u, _)| *u == unit) {
                Some((_, who)) => format!(" for {} queries ({who})", workload.kind.name()),
                None => String::new(),
            };
            let why = format!(
                "{} does no {} on the host{queries}",
                index.name(),
                unit.what()
            );
            note(unit.key(), &why);
        }
    }
    let broadcast = "no index broadcasts (only `pimdes microbench transfer` does)";
    note("transfer.broadcast_gb_per_s_per_rank", broadcast);
    match (workload.launch, workload.poll_interval_us) {
        (LaunchMode::Sync, _) => note(
            "transfer.poll_interval_us",
            "only async launches poll (run.launch = \"async\")",
        ),
        (_, Some(_)) => note(
            "transfer.poll_interval_us",
            "the run's own run.poll_interval_us replaces it",
        ),
        _ => {}
    }
    let read = index.instruction_keys();
    for (key, _) in machine.dpu.costs.named() {
        if let Some(read) = read.as_ref().filter(|read| !read.contains(&key)) {
            let why = format!(
                "{}'s kernels read only dpu.instructions {}",
                index.name(),
                read.join(", ")
            );
            note(&format!("dpu.instructions.{key}"), &why);
        }
    }
    let capacity = "it is a capacity, not a speed; the run fit, and no simulated time depends on it (docs/machine-model.md)";
    // A capacity raised above the file's may be what let the run fit (more tasklets, a
    // larger stack): only one lowered, under which the run still fit, surely did nothing.
    for key in CAPACITY_KEYS.iter().filter(|&&key| !a.raised(key)) {
        note(key, capacity);
    }
    notes
}

/// Notes on the choices a run names that its index does not use (`partitioner`: the one
/// the run was given).
pub fn unused_choices(workload: &Workload, partitioner: &str) -> Vec<String> {
    let mut notes = match workload.index.as_str() {
        pimtree::NAME => pimtree::unused_choices_note(workload, partitioner),
        _ => Vec::new(),
    };
    let ranges = workload.attribution.changed("queries.range_pairs");
    if let Some(set) = ranges.filter(|_| !workload.kind.is_range()) {
        notes.push(format!(
            "--set {set} had no effect: {} queries have no range (range_pairs is read by range-count-if and range-max)",
            workload.kind.name()
        ));
    }
    notes
}
