//! B+-Forest: the per-DPU B+-trees, their memory layout, the placement of the data, the
//! host's routing and merging, and the plain reference answers are checked against.

pub mod batch;
pub mod build;
pub mod image;
pub mod kernel;
pub mod layout;
pub mod reference;
pub mod tree;
