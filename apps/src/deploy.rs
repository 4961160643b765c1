//! rr-server's deployment options: where the device records live (`--state-dir`), and least
//! privilege once the AF_XDP stack is set up (`--user`, `--group`; the capabilities it no
//! longer needs are dropped in any case).

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use stack::xsk::privileges::{self, Capability, Dropped};

/// Deployment options of the xsk backend.
#[derive(Args, Clone, Debug, Default)]
#[command(next_help_heading = "Deployment (--backend xsk)")]
pub struct DeployOpts {
    /// Directory of the crash-safe records of what the stack changed on the interface
    /// (default /run/xsk-io, or $XSK_IO_STATE_DIR); must be writable, and the same for every
    /// process that works on the interface (systemd: RuntimeDirectory=xsk-io).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Once the stack is set up, switch to this user (name or uid), keeping only the
    /// capabilities still needed: CAP_NET_ADMIN (to put the device back at exit), and
    /// CAP_NET_BIND_SERVICE if held. Needs root (or CAP_SETUID and CAP_SETGID) at start; the
    /// state directory must be writable by that user.
    #[arg(long, value_name = "USER")]
    pub user: Option<String>,
    /// With --user: the group (name or gid; default: the user's primary group).
    #[arg(long, value_name = "GROUP", requires = "user")]
    pub group: Option<String>,
}

impl DeployOpts {
    /// Ids of the options, for warnings when another backend ignores them.
    pub const IDS: &'static [&'static str] = &["state_dir", "user", "group"];

    /// Before setup: the state directory, and (with --user) the user and group resolved and
    /// checked against it, so that a mistake fails before the device is touched.
    pub fn before_setup(&self) -> Result<Option<(u32, u32)>> {
        if let Some(d) = &self.state_dir {
            stack::xsk::set_state_dir(d);
        }
        let Some(user) = &self.user else { return Ok(None) };
        let (uid, primary) = resolve_user(user)?;
        let gid = match &self.group {
            Some(g) => resolve_group(g)?,
            None => primary,
        };
        let dir = stack::xsk::state_dir();
        if !writable_by(&dir, uid, gid) {
            bail!(
                "--user {user}: the state directory {} must be writable by uid {uid} (the records are removed at \
                 exit): `install -d -o {uid} {}`, or --state-dir a directory of that user's",
                dir.display(),
                dir.display()
            );
        }
        Ok(Some((uid, gid)))
    }

    /// After setup, before any thread is spawned: switches user if asked, and drops every
    /// capability but those still needed. Logged at info level.
    pub fn after_setup(&self, user: Option<(u32, u32)>) -> Result<Dropped> {
        // Shared mode holds each port it serves with a kernel socket, bound when it listens.
        let keep = [Capability::CAP_NET_BIND_SERVICE];
        let d = privileges::drop_after_setup(user, &keep).context("dropping privileges after setup")?;
        let names = |v: &[Capability]| v.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(" ");
        tracing::info!(
            "privileges after setup: {}keeping {} (put the device back at exit{}); dropped {} capabilities",
            d.user.map(|(u, g)| format!("uid {u} gid {g}, ")).unwrap_or_default(),
            if d.kept.is_empty() { "none".to_string() } else { names(&d.kept) },
            if d.kept.contains(&Capability::CAP_BPF) { "; steering map updates on this kernel" } else { "" },
            d.dropped.len()
        );
        Ok(d)
    }
}

fn resolve_user(s: &str) -> Result<(u32, u32)> {
    if let Ok(uid) = s.parse::<u32>() {
        let u = nix::unistd::User::from_uid(uid.into()).ok().flatten();
        return Ok((uid, u.map_or(uid, |u| u.gid.as_raw())));
    }
    match nix::unistd::User::from_name(s).with_context(|| format!("looking up user {s}"))? {
        Some(u) => Ok((u.uid.as_raw(), u.gid.as_raw())),
        None => bail!("--user {s}: no such user (getent passwd {s})"),
    }
}

fn resolve_group(s: &str) -> Result<u32> {
    if let Ok(gid) = s.parse::<u32>() {
        return Ok(gid);
    }
    match nix::unistd::Group::from_name(s).with_context(|| format!("looking up group {s}"))? {
        Some(g) => Ok(g.gid.as_raw()),
        None => bail!("--group {s}: no such group (getent group {s})"),
    }
}

/// Whether `uid`/`gid` may create and remove files in `dir` (by its mode and owner; a missing
/// directory would be created by root, so it does not count).
pub(crate) fn writable_by(dir: &std::path::Path, uid: u32, gid: u32) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(m) = std::fs::metadata(dir) else { return false };
    let mode = m.mode();
    uid == 0 || (m.uid() == uid && mode & 0o300 == 0o300) || (m.gid() == gid && mode & 0o030 == 0o030) || mode & 0o003 == 0o003
}
