//! Crash-safe device state: what the port is about to change on an interface
//! (offloads, channels, MTU, sysctls) is written to a record under `/run`
//! before anything changes, so that a process killed by SIGKILL, the OOM
//! killer, a second Ctrl-C or a panic that aborts leaves a way back.
//!
//! Per interface (and network namespace) there are two files in
//! [`state_dir`]: `<ifname>.net<inode>.lock`, held with `flock` by the owner
//! for its whole life (the kernel drops the lock when the process dies, however
//! it dies), and `<ifname>.net<inode>.state`, the record, replaced atomically
//! (write to a temporary file, rename). The next owner that gets the lock and
//! finds a record restores it before looking at the device; `xsk-bench restore
//! IF` does only that. A second owner while the first lives gets
//! [`StateError::InUse`] and changes nothing.
//!
//! A clean exit restores through [`crate::tune::Tuning`] (the undo log) and
//! then removes the record; the record itself is applied only after a crash,
//! and then only where the device differs from it.

mod apply;
mod dir;
mod error;
mod files;
mod owner;
mod record;

pub use apply::read_sysctl;
pub use error::StateError;
pub use dir::{set_state_dir, state_dir, STATE_DIR_ENV};
pub use files::forget_netns;
pub use owner::{restore, Owner, Recovered};
pub use record::{DeviceState, Record};

#[cfg(test)]
mod tests;
