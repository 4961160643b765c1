//! What every binary's `main` shares: logging, argument parsing with usage errors, and a
//! few process-level helpers (open-file limit, atomic writes, the CPU count).

use std::path::Path;

use anyhow::{Context, Result};
use clap::parser::ValueSource;
use clap::ArgMatches;

use crate::options::UsageError;

/// Warns about options that were given on the command line but do not apply (e.g. AF_XDP
/// knobs with `--backend kernel`). `ids` must be argument ids of the command.
pub fn warn_ignored(matches: &ArgMatches, ids: &[&str], why: &str) {
    for id in ids {
        if matches.value_source(id) == Some(ValueSource::CommandLine) {
            tracing::warn!("--{} is ignored {why}", id.replace('_', "-"));
        }
    }
}

/// Logs to stderr; `RUST_LOG` overrides the default `level`.
pub fn init_tracing(level: &str) {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| level.into()))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}

/// The body of a binary's `main`: tracing, argument parsing (the matches are
/// passed on, so `run` can tell explicit options from defaults), and any error
/// printed with its context chain as `name: error: ...` (exit status 1), or as a usage error
/// (exit status 2) if it is a [`UsageError`].
pub fn main_with<A: clap::FromArgMatches + clap::CommandFactory>(
    name: &str,
    run: impl FnOnce(&A, &clap::ArgMatches) -> anyhow::Result<std::process::ExitCode>,
) -> std::process::ExitCode {
    main_with_level(name, "info", run)
}

/// [`main_with`] with another default log level (`RUST_LOG` still overrides it).
pub fn main_with_level<A: clap::FromArgMatches + clap::CommandFactory>(
    name: &str,
    level: &str,
    run: impl FnOnce(&A, &clap::ArgMatches) -> anyhow::Result<std::process::ExitCode>,
) -> std::process::ExitCode {
    init_tracing(level);
    let matches = A::command().get_matches();
    let args = match A::from_arg_matches(&matches) {
        Ok(a) => a,
        Err(e) => e.exit(),
    };
    run(&args, &matches).unwrap_or_else(|e| {
        if let Some(u) = e.chain().find_map(|c| c.downcast_ref::<UsageError>()) {
            // Same look and exit status (2) as clap's own errors.
            A::command().error(clap::error::ErrorKind::ValueValidation, &u.0).exit();
        }
        eprintln!("{name}: error: {e:#}");
        std::process::ExitCode::FAILURE
    })
}

/// Raises the soft RLIMIT_NOFILE to at least `want` (capped by the hard limit), so the kernel
/// backend is not stopped at 1024 descriptors. Returns the new soft limit.
pub fn raise_nofile_limit(want: u64) -> std::io::Result<u64> {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `lim` is a valid, writable rlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    if lim.rlim_cur >= want {
        return Ok(lim.rlim_cur);
    }
    lim.rlim_cur = want.min(lim.rlim_max);
    // SAFETY: `lim` is a valid rlimit with cur <= max.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(lim.rlim_cur)
}

/// Writes `contents` to `path` atomically (temporary file + rename), so a script polling for
/// the file never reads it half-written.
pub fn write_atomically(path: &Path, contents: &[u8]) -> Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp{}", std::process::id()));
    std::fs::write(&tmp, contents).with_context(|| format!("writing {}", Path::new(&tmp).display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))
}

/// Online CPUs (the machine-wide CPU figures are summed over all of them).
pub fn online_cpus() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n).ok().filter(|&n| n > 0).unwrap_or(1)
}
