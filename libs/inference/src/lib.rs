//! Chat models and embedders for docchat. This first part is the model registry: the
//! models file of ARCHITECTURE.md §5, read once at start.

pub mod registry;

pub use registry::{ModelEntry, ModelKind, Registry};
