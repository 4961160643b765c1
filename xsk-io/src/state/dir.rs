//! Where the records live: a file of its own because both the errors (in
//! their fixes) and the record files use it.

use std::path::PathBuf;

/// Overrides the directory of the records (default `/run/xsk-io`).
pub const STATE_DIR_ENV: &str = "XSK_IO_STATE_DIR";
const DEFAULT_DIR: &str = "/run/xsk-io";

/// Where the records live: `$XSK_IO_STATE_DIR`, else `/run/xsk-io`.
pub fn state_dir() -> PathBuf {
    std::env::var_os(STATE_DIR_ENV).map_or_else(|| PathBuf::from(DEFAULT_DIR), PathBuf::from)
}
