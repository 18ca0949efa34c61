//! The paper's experiments as named sweeps: `pimdes experiment NAME --scale quick|paper`.
//! Each is one or more manifests under `experiments/NAME/` (`SCALE-PART.toml`), each a sweep
//! whose `[[plot]]` tables name its figures.

use std::path::{Path, PathBuf};

/// One experiment: its name, what it shows, and its manifests' parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Experiment {
    pub name: &'static str,
    pub about: &'static str,
    /// Each scale has one manifest per part: `experiments/NAME/SCALE-PART.toml`.
    pub parts: &'static [&'static str],
}

/// The scales every experiment has.
pub const SCALES: [&str; 2] = ["quick", "paper"];

pub const EXPERIMENTS: [Experiment; 8] = [
    Experiment {
        name: "imbalance-vs-skew",
        about: "IF_q, IF_d and batch time against skew: the five partitioners' imbalance, the three B+-Forest partitioners' batch time and breakdown",
        parts: &["partition", "run"],
    },
    Experiment {
        name: "time-vs-alpha",
        about: "batch time against IF_d as the double scan's alpha varies",
        parts: &["run"],
    },
    Experiment {
        name: "time-vs-dpus",
        about: "batch time and breakdown against the number of DPUs at two data sizes; configurations whose data does not fit in MRAM recorded as refused",
        parts: &["run"],
    },
    Experiment {
        name: "zcamp",
        about: "ZcAmp(b_i, 10) for every base partition i: IF_q, and how much of the busiest DPU's load is on its hot tree",
        parts: &["partition"],
    },
    Experiment {
        name: "raq-vs-get",
        about: "throughput of range-count-if and get batches against skew",
        parts: &["run"],
    },
    Experiment {
        name: "batch-size",
        about: "throughput against batch size at skew 1.0 and 1.2",
        parts: &["run"],
    },
    Experiment {
        name: "get-vs-pim-tree",
        about: "get batches on B+-Forest and PIM-tree against skew, both with PIM-tree's protocol (11 tasklets, async, 2 batches in flight): throughput and breakdown",
        parts: &["run"],
    },
    Experiment {
        name: "scan-pim-tree",
        about: "range-count-if batches on B+-Forest and on PIM-tree (a scan, then host aggregation) against skew, both with PIM-tree's protocol, batches of 10,000 ranges: throughput and breakdown",
        parts: &["run"],
    },
];

/// The experiment named `name`.
pub fn find(name: &str) -> Option<&'static Experiment> {
    EXPERIMENTS.iter().find(|e| e.name == name)
}

/// Where the manifests live: `./experiments` when it exists (a checkout's root), else the
/// checkout this binary was built from.
pub fn root() -> PathBuf {
    let here = Path::new("experiments");
    if here.is_dir() {
        return here.to_path_buf();
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("experiments")
}

/// Every experiment's parts, each once, in the order the catalog first names them: the
/// subdirectories an experiment's output directory may hold.
pub fn all_parts() -> Vec<&'static str> {
    let mut parts: Vec<&'static str> = Vec::new();
    for part in EXPERIMENTS.iter().flat_map(|e| e.parts) {
        if !parts.contains(part) {
            parts.push(part);
        }
    }
    parts
}

/// The manifest of one part of an experiment at one scale.
pub fn manifest(root: &Path, e: &Experiment, scale: &str, part: &str) -> PathBuf {
    root.join(e.name).join(format!("{scale}-{part}.toml"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every experiment has a manifest for every part at every scale, in the checkout, and
    /// every point of each is a valid configuration with figures.
    #[test]
    fn every_manifest_loads_and_every_point_is_valid() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("experiments");
        for e in &EXPERIMENTS {
            for scale in SCALES {
                for part in e.parts {
                    let path = manifest(&root, e, scale, part);
                    let m = crate::experiments::sweep::load_manifest(&path)
                        .unwrap_or_else(|err| panic!("{err}"));
                    assert!(!m.plots.is_empty(), "{}", path.display());
                    crate::experiments::sweep::index(&m)
                        .unwrap_or_else(|err| panic!("{}: {err}", path.display()));
                }
            }
        }
    }
}
