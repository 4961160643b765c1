//! Shared pieces of the `rr-server` and `rr-bench` binaries: command-line options common to
//! both (backend, AF_XDP knobs, durations), the KV load workload, the progress wrapper for
//! long runs, and the result records (`--json`) with their human-readable table; and, for the
//! tools that start rr-server in a lab (rr-bench, rr-demo, flood-bench), the server process.
//!
//! The items of `options`, `recovery`, `process`, `report`, `values` and `workload` are re-exported
//! here, so the binaries name them `apps::XskOpts`, `apps::BenchResult`, ...

pub mod cpu;
pub mod deploy;
pub mod doctor;
pub mod netrx;
pub mod plot;
pub mod resp;
pub mod server_process;
pub mod stats;
pub mod table;

mod options;
mod process;
mod recovery;
mod report;
mod values;
mod workload;

pub use options::*;
pub use process::*;
pub use recovery::*;
pub use report::*;
pub use values::*;
pub use workload::*;
