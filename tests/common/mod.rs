//! Shared helpers of the integration tests.
#![allow(dead_code)]

use pimdes::config::Override;
use pimdes::machine::Machine;

pub const PRIM: &str = include_str!("../../machines/upmem-2556-350mhz.toml");

/// The PrIM machine, with `--set`-style overrides (`machine.` prefix added).
pub fn machine(sets: &[&str]) -> Machine {
    let overrides: Vec<Override> = sets
        .iter()
        .map(|s| Override::parse(&format!("machine.{s}")).unwrap())
        .collect();
    Machine::from_toml_str("upmem-2556-350mhz.toml", PRIM, &overrides).unwrap()
}
