//! B+-Forest: the per-DPU B+-trees and their memory layout.

pub mod layout;
pub mod tree;
