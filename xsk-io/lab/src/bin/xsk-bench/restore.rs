//! `xsk-bench restore IF`: only the crash restore of xsk-io's state record.

use anyhow::Result;
use clap::Parser;

#[derive(Parser, Debug)]
#[command(
    name = "xsk-bench restore",
    about = "Put an interface back as an xsk-io process that did not exit cleanly (SIGKILL, OOM kill, abort) left it",
    long_about = "Put an interface back as an xsk-io process that did not exit cleanly (SIGKILL, OOM kill, abort) left it.\n\n\
Every xsk-io port records the original offloads, channels, MTU and sysctls it changes in a state file under \
/run/xsk-io (or $XSK_IO_STATE_DIR) before changing them. The next port on the interface restores them by itself; \
this command does only that. Run it in the interface's network namespace (ip netns exec NS xsk-bench restore IF). \
It refuses while the recording process still runs."
)]
pub(crate) struct RestoreArgs {
    /// The interface to restore.
    pub(crate) ifname: String,
}

pub(crate) fn restore(args: RestoreArgs) -> Result<()> {
    let r = xsk_device::state::restore(&args.ifname)?;
    match r.pid {
        None if xsk_io::sys::if_nametoindex(&args.ifname).is_err() => {
            println!("{}: no state recorded, and no such interface in this network namespace", args.ifname)
        }
        None => println!("{}: no state recorded: nothing to restore", args.ifname),
        Some(pid) => {
            println!("{}: restored the state recorded by pid {pid} ({} change(s))", args.ifname, r.steps.len());
            for s in &r.steps {
                println!("  {s}");
            }
        }
    }
    Ok(())
}
