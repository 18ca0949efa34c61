//! The machine description: `RawMachine` mirrors the TOML file; [`Machine`] is the
//! validated model with derived quantities (usable DPUs per rank).

use crate::config::{Override, Source, parse_toml, read_toml_file};
use crate::error::InputError;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Upper bound on simulated DPUs, to keep every per-DPU loop and allocation bounded.
pub const MAX_DPUS: u64 = 1 << 20;

/// The machine file as written (after `--set machine.*` overrides).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawMachine {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub ranks: u64,
    pub dpus_per_rank: u64,
    /// DPUs that work; the rest are faulty and disabled. Defaults to all of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usable_dpus: Option<u64>,
    pub dpu: RawDpu,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RawDpu {
    pub mram_size_bytes: u64,
}

/// The validated machine.
#[derive(Debug, Clone, PartialEq)]
pub struct Machine {
    pub name: String,
    pub ranks: u32,
    pub dpus_per_rank: u32,
    /// Usable DPUs in the whole system.
    pub dpus: u32,
    /// Usable DPUs of each rank; faulty DPUs are spread evenly, earlier ranks keep more.
    pub usable_dpus_per_rank: Vec<u32>,
    pub mram_size_bytes: u64,
    /// The configuration this machine was built from, for the effective-config dump.
    pub raw: RawMachine,
}

impl Machine {
    /// Reads a machine file and applies the `--set machine.*` overrides.
    pub fn load(path: &Path, overrides: &[Override]) -> Result<Machine, InputError> {
        let table = read_toml_file(path)?;
        Self::from_table(path.display().to_string(), table, overrides)
    }

    /// Parses machine TOML text (for embedded defaults); `origin` names it in errors.
    pub fn from_toml_str(
        origin: &str,
        text: &str,
        overrides: &[Override],
    ) -> Result<Machine, InputError> {
        let table = parse_toml(origin, text)?;
        Self::from_table(origin.to_owned(), table, overrides)
    }

    fn from_table(
        origin: String,
        table: toml::Table,
        overrides: &[Override],
    ) -> Result<Machine, InputError> {
        let source = Source::new(origin, table, overrides, Some("machine"), &[])?;
        let raw: RawMachine = source.deserialize()?;
        Self::validate(raw, &source)
    }

    fn validate(raw: RawMachine, source: &Source) -> Result<Machine, InputError> {
        let s = &raw;
        if s.ranks == 0 {
            return Err(source.error_at("ranks", "must be at least 1"));
        }
        if s.dpus_per_rank == 0 || s.dpus_per_rank > 256 {
            return Err(source.error_at("dpus_per_rank", "must be between 1 and 256"));
        }
        let total = s.ranks.saturating_mul(s.dpus_per_rank);
        if total > MAX_DPUS {
            return Err(source.error_at(
                "ranks",
                format!("{total} DPUs in all is above the supported {MAX_DPUS}"),
            ));
        }
        let usable = s.usable_dpus.unwrap_or(total);
        if usable == 0 || usable > total {
            return Err(source.error_at(
                "usable_dpus",
                format!(
                    "{usable} is not between 1 and ranks x dpus_per_rank = {} x {} = {total}",
                    s.ranks, s.dpus_per_rank
                ),
            ));
        }
        // A rank with no usable DPU would be odd but harmless; spreading keeps ranks even.
        let ranks = s.ranks as u32;
        let per_rank: Vec<u32> = (0..s.ranks)
            .map(|r| ((usable * (r + 1)) / s.ranks - (usable * r) / s.ranks) as u32)
            .collect();
        let mram = raw.dpu.mram_size_bytes;
        if mram == 0 || !mram.is_multiple_of(8) {
            return Err(source.error_at(
                "dpu.mram_size_bytes",
                format!("{mram} must be a positive multiple of 8"),
            ));
        }
        Ok(Machine {
            name: raw.name.clone(),
            ranks,
            dpus_per_rank: s.dpus_per_rank as u32,
            dpus: usable as u32,
            usable_dpus_per_rank: per_rank,
            mram_size_bytes: mram,
            raw,
        })
    }

    /// The rank that holds global DPU index `dpu` (DPUs are numbered rank by rank).
    pub fn rank_of(&self, dpu: u32) -> u32 {
        let mut first = 0u32;
        for (rank, &n) in self.usable_dpus_per_rank.iter().enumerate() {
            if dpu < first + n {
                return rank as u32;
            }
            first += n;
        }
        panic!("DPU {dpu} is beyond the machine's {} DPUs", self.dpus)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "name = \"t\"\nranks = 16\ndpus_per_rank = 64\nusable_dpus = 1012\n[dpu]\nmram_size_bytes = 67108864\n";

    #[test]
    fn faulty_dpus_are_spread_over_ranks() {
        let m = Machine::from_toml_str("t.toml", TEXT, &[]).unwrap();
        assert_eq!(m.dpus, 1012);
        assert_eq!(m.usable_dpus_per_rank.iter().sum::<u32>(), 1012);
        assert!(m.usable_dpus_per_rank.iter().all(|&n| n == 63 || n == 64));
        assert_eq!(m.rank_of(0), 0);
        assert_eq!(m.rank_of(1011), 15);
    }

    #[test]
    fn overrides_apply_and_are_named_in_errors() {
        let o = [Override::parse("machine.ranks=2").unwrap()];
        let err = Machine::from_toml_str("t.toml", TEXT, &o).unwrap_err();
        assert_eq!(err.origin, "t.toml");
        assert_eq!(err.key.as_deref(), Some("usable_dpus"));
        let o = [Override::parse("machine.rank=2").unwrap()];
        let err = Machine::from_toml_str("t.toml", TEXT, &o).unwrap_err();
        assert_eq!(err.origin, "--set machine.rank=2", "{err}");
    }
}
