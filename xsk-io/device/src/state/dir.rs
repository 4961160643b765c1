//! Where the records live: a file of its own because both the errors (in
//! their fixes) and the record files use it.

use std::path::PathBuf;
use std::sync::RwLock;

/// Overrides the directory of the records (default `/run/xsk-io`).
pub const STATE_DIR_ENV: &str = "XSK_IO_STATE_DIR";
const DEFAULT_DIR: &str = "/run/xsk-io";

/// Set by [`set_state_dir`]: before the environment and the default.
static OVERRIDE: RwLock<Option<PathBuf>> = RwLock::new(None);

/// Where the records live: the directory given to [`set_state_dir`], else
/// `$XSK_IO_STATE_DIR`, else `/run/xsk-io`. The process needs write access
/// to it (systemd: `RuntimeDirectory=xsk-io` makes `/run/xsk-io` the service
/// user's).
pub fn state_dir() -> PathBuf {
    if let Some(d) = OVERRIDE.read().unwrap_or_else(|e| e.into_inner()).as_ref() {
        return d.clone();
    }
    std::env::var_os(STATE_DIR_ENV).map_or_else(|| PathBuf::from(DEFAULT_DIR), PathBuf::from)
}

/// Puts the records in `dir` for the rest of the process (a program's
/// `--state-dir`): set it before the first port opens. Every process working
/// on an interface must use the same directory, or a crashed owner's record
/// is not found.
pub fn set_state_dir(dir: impl Into<PathBuf>) {
    *OVERRIDE.write().unwrap_or_else(|e| e.into_inner()) = Some(dir.into());
}
