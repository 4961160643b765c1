//! One QEMU guest: started under `ip netns exec` (so it can open the tap of its namespace),
//! its serial console on a unix socket the harness talks to (and QEMU logs to a file), driven
//! through the command loop of the guest's /init (see `initramfs`).
//!
//! Over 600 lines: the launch, the console protocol and the command loop share the guest's
//! private state (the console reader's buffer and its condition variable), which a split
//! would have to expose; the acceleration choice is the only separable part and small.
//!
//! Acceleration: `auto` tries KVM first with a short boot timeout, because on some hosts
//! `/dev/kvm` exists but KVM guests hang (no output after "Probing EDD"); it then falls back
//! to TCG (`-accel tcg,thread=multi -cpu max`) and says so in one line. The decision is made
//! once per process.
//!
//! A [`Guest`] is killed when dropped (SIGKILL to QEMU), and QEMU gets PR_SET_PDEATHSIG, so it
//! dies with the harness even if the harness is killed with SIGKILL.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::netns::HostNet;
use crate::util::{check_interrupted, describe, interrupted};

/// How the guest is accelerated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Accel {
    /// KVM if a short probe boot shows it works, else TCG.
    Auto,
    Kvm,
    Tcg,
}

impl Accel {
    pub fn name(self) -> &'static str {
        match self {
            Accel::Auto => "auto",
            Accel::Kvm => "kvm",
            Accel::Tcg => "tcg",
        }
    }
}

/// QEMU virtio-net-pci properties that turn the guest offloads off: without them the host
/// hands the guest GSO frames and CHECKSUM_PARTIAL packets (VIRTIO_NET_HDR_F_NEEDS_CSUM).
pub const OFFLOADS_OFF: &str =
    "guest_csum=off,guest_tso4=off,guest_tso6=off,guest_ecn=off,guest_ufo=off";

/// What to boot.
#[derive(Debug, Clone)]
pub struct GuestSpec {
    /// Short name for logs and the socket (e.g. "smoke", "off").
    pub name: String,
    pub kernel: PathBuf,
    pub initrd: PathBuf,
    /// QEMU `-netdev` value with `id=n0` (a tap of the host namespace, or a socket to another
    /// guest).
    pub netdev: String,
    /// Guest eth0 address with prefix, e.g. 198.18.10.2/24.
    pub addr: String,
    pub mac: String,
    /// Extra virtio-net-pci properties (e.g. [`OFFLOADS_OFF`]), without leading comma.
    pub nic_options: String,
    pub mem_mb: u32,
    /// vCPUs (`-smp`); 1 except for the multiqueue guest of the matrix.
    pub smp: u32,
    /// Folder for the serial log and QEMU's output.
    pub log_dir: PathBuf,
    /// Boot timeout under TCG (to `VMTEST-UP`).
    pub boot_timeout: Duration,
    /// Boot timeout of the KVM probe (`auto`).
    pub kvm_probe_timeout: Duration,
    /// `-cpu` model under KVM (TCG uses `max`, see `erms`).
    pub kvm_cpu: String,
    /// `-icount` value (e.g. `shift=3`): an instruction-counted virtual clock, so the guest's
    /// own time accounting measures instructions executed rather than host speed. TCG only,
    /// and single-threaded TCG (QEMU refuses icount with MTTCG).
    pub icount: Option<String>,
    /// Under TCG: whether the guest CPU has ERMS (QEMU's `max` does). Without it (`-cpu
    /// max,-erms,-fsrm`) the guest kernel clears and copies memory with `rep stosq`/`rep
    /// movsq` rather than `rep stosb`/`rep movsb`. -icount counts a rep instruction once per
    /// iteration: a 4 KB page cleared with `rep stosb` is 4,096 instructions (~65 us of guest
    /// time at shift=4, ~40 ns on hardware), with `rep stosq` 512.
    pub erms: bool,
}

/// The `-cpu` of a TCG guest (see [`GuestSpec::erms`]).
pub fn tcg_cpu(erms: bool) -> &'static str {
    if erms {
        "max"
    } else {
        "max,-erms,-fsrm"
    }
}

/// The process-wide acceleration decision of `auto`.
static DECISION: Mutex<Option<(Accel, String)>> = Mutex::new(None);

/// The decision of `auto` so far, if made: (kvm|tcg, why).
pub fn accel_decision() -> Option<(Accel, String)> {
    DECISION.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

fn decide(a: Accel, why: String) {
    *DECISION.lock().unwrap_or_else(|p| p.into_inner()) = Some((a, why));
}

/// Whether /dev/kvm can be opened read-write.
pub fn kvm_openable() -> bool {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .is_ok()
}

/// A command the guest has not started after this long gets a newline on its console.
/// CI once saw a TCG guest not start `sleep 1` for 20 s after a load run, with QEMU's
/// side unexplained. Should an emulated 16550 have lost the receive interrupt for a
/// command's last bytes, they wait for more input: the empty line is that input (the
/// init shell ignores it), and the harness says when it needed one.
pub const NUDGE_AFTER: Duration = Duration::from_secs(5);

#[derive(Default)]
struct State {
    lines: Vec<String>,
    partial: Vec<u8>,
    eof: bool,
    /// When the last byte came from the guest.
    last_output: Option<Instant>,
}

struct Shared {
    state: Mutex<State>,
    cv: Condvar,
}

/// Output of one guest command.
#[derive(Debug, Clone)]
pub struct CmdOut {
    pub status: i32,
    pub output: String,
}

impl CmdOut {
    pub fn ok(&self) -> bool {
        self.status == 0
    }
}

/// A running guest.
pub struct Guest {
    child: Child,
    writer: UnixStream,
    shared: Arc<Shared>,
    next_id: u64,
    /// Newlines sent to a guest that had not started a command (see [`NUDGE_AFTER`]).
    pub nudges: u32,
    pub name: String,
    /// kvm or tcg.
    pub accel: Accel,
    /// Why this acceleration (the `auto` probe's verdict).
    pub accel_note: String,
    /// The guest's `VMTEST-UP ...` line.
    pub up_line: String,
    /// QEMU start to `VMTEST-UP`.
    pub boot_secs: f64,
    pub serial_log: PathBuf,
    sock: PathBuf,
}

impl Guest {
    /// Boots `spec` in `net` with the requested acceleration (see the module docs for `auto`).
    pub fn boot(spec: &GuestSpec, net: &HostNet, accel: Accel) -> Result<Guest> {
        match accel {
            Accel::Kvm => Self::launch(
                spec,
                net,
                Accel::Kvm,
                spec.boot_timeout,
                "requested (--accel kvm)".into(),
            ),
            Accel::Tcg => Self::launch(
                spec,
                net,
                Accel::Tcg,
                spec.boot_timeout,
                "requested (--accel tcg)".into(),
            ),
            Accel::Auto => {
                if let Some((a, why)) = accel_decision() {
                    return Self::launch(spec, net, a, spec.boot_timeout, why);
                }
                if !kvm_openable() {
                    let why = "/dev/kvm missing or not openable: TCG".to_string();
                    eprintln!("vm-tests: accel: {why}");
                    decide(Accel::Tcg, why.clone());
                    return Self::launch(spec, net, Accel::Tcg, spec.boot_timeout, why);
                }
                let t = spec.kvm_probe_timeout;
                eprintln!(
                    "vm-tests: accel: probing KVM (a guest must be up within {} s)",
                    t.as_secs_f64()
                );
                let mut probe = spec.clone();
                probe.name = format!("{}-kvm-probe", spec.name);
                match Self::launch(&probe, net, Accel::Kvm, t, String::new()) {
                    Ok(mut g) => {
                        let why = format!("KVM probe: guest up in {:.1} s", g.boot_secs);
                        eprintln!("vm-tests: accel: kvm ({why})");
                        decide(Accel::Kvm, why.clone());
                        g.accel_note = why;
                        Ok(g)
                    }
                    Err(e) => {
                        check_interrupted()?;
                        let why = format!(
                            "KVM probe failed: {}; falling back to TCG (-accel tcg,thread=multi -cpu max, 1 vCPU, {} MB)",
                            first_line(&format!("{e:#}")),
                            spec.mem_mb
                        );
                        eprintln!("vm-tests: accel: {why}");
                        decide(Accel::Tcg, why.clone());
                        Self::launch(spec, net, Accel::Tcg, spec.boot_timeout, why)
                    }
                }
            }
        }
    }

    fn launch(
        spec: &GuestSpec,
        net: &HostNet,
        accel: Accel,
        timeout: Duration,
        note: String,
    ) -> Result<Guest> {
        std::fs::create_dir_all(&spec.log_dir)
            .with_context(|| format!("creating {}", spec.log_dir.display()))?;
        let serial_log = spec.log_dir.join(format!("serial-{}.log", spec.name));
        let qemu_out = spec.log_dir.join(format!("qemu-{}.out", spec.name));
        let mut sock = spec.log_dir.join(format!("{}.sock", spec.name));
        if sock.as_os_str().len() > 100 {
            sock =
                std::env::temp_dir().join(format!("vmt-{}-{}.sock", std::process::id(), spec.name));
        }
        let _ = std::fs::remove_file(&sock);

        let append = format!("console=ttyS0 panic=-1 quiet vmtest.addr={}", spec.addr);
        let (accel_arg, cpu) = match accel {
            Accel::Kvm => ("kvm", spec.kvm_cpu.as_str()),
            _ if spec.icount.is_some() => ("tcg,thread=single", tcg_cpu(spec.erms)),
            _ => ("tcg,thread=multi", tcg_cpu(spec.erms)),
        };
        let mut nic = format!("virtio-net-pci,netdev=n0,mac={}", spec.mac);
        if !spec.nic_options.is_empty() {
            nic.push(',');
            nic.push_str(&spec.nic_options);
        }
        let chardev = format!(
            "socket,id=con0,path={},server=on,wait=on,logfile={},logappend=off",
            sock.display(),
            serial_log.display()
        );
        let mem = spec.mem_mb.to_string();
        let smp = spec.smp.max(1).to_string();
        let args: Vec<&str> = vec![
            "-name",
            &spec.name,
            "-nodefaults",
            "-no-user-config",
            "-display",
            "none",
            "-monitor",
            "none",
            "-no-reboot",
            "-accel",
            accel_arg,
            "-cpu",
            cpu,
            "-smp",
            &smp,
            "-m",
            &mem,
            "-kernel",
            spec.kernel.to_str().context("kernel path is not UTF-8")?,
            "-initrd",
            spec.initrd.to_str().context("initrd path is not UTF-8")?,
            "-append",
            &append,
            "-chardev",
            &chardev,
            "-serial",
            "chardev:con0",
            "-netdev",
            &spec.netdev,
            "-device",
            &nic,
        ];
        let mut args = args;
        // A packet capture of the guest's NIC (QEMU's filter-dump), for looking at a run's
        // TCP by hand: VMT_PCAP_DIR=DIR writes DIR/<guest name>.pcap.
        let dump = std::env::var_os("VMT_PCAP_DIR").map(|d| {
            let file = std::path::Path::new(&d).join(format!("{}.pcap", spec.name));
            format!("filter-dump,id=dump0,netdev=n0,file={}", file.display())
        });
        if let Some(d) = &dump {
            args.extend(["-object", d.as_str()]);
        }
        if let Some(ic) = &spec.icount {
            if accel == Accel::Kvm {
                bail!("-icount needs TCG (the guest was to boot under KVM)");
            }
            args.extend(["-icount", ic.as_str()]);
        }
        let mut c: Command = net.command("qemu-system-x86_64", &args);
        let out = std::fs::File::create(&qemu_out)
            .with_context(|| format!("creating {}", qemu_out.display()))?;
        c.stdin(Stdio::null()).stdout(out.try_clone()?).stderr(out);
        // SAFETY: prctl in the child between fork and exec only; `ip netns exec` execs QEMU in
        // the same process, so the death signal stays armed for QEMU.
        unsafe {
            c.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let cmdline = describe(&c);
        std::fs::write(
            spec.log_dir.join(format!("qemu-{}.cmdline", spec.name)),
            format!("{cmdline}\n"),
        )?;
        let start = Instant::now();
        let mut child = c.spawn().with_context(|| format!("starting `{cmdline}`"))?;

        // QEMU waits for us (server=on,wait=on) before it starts the guest.
        let stream = loop {
            match UnixStream::connect(&sock) {
                Ok(s) => break s,
                Err(_) if start.elapsed() < Duration::from_secs(15) && !interrupted() => {
                    if let Some(st) = child.try_wait()? {
                        let text = std::fs::read_to_string(&qemu_out).unwrap_or_default();
                        bail!("QEMU exited at start ({st}): {}", text.trim());
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(e).with_context(|| {
                        format!("connecting to the serial socket {}", sock.display())
                    });
                }
            }
        };
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            cv: Condvar::new(),
        });
        let mut reader = stream.try_clone()?;
        let sh = shared.clone();
        std::thread::Builder::new()
            .name(format!("serial {}", spec.name))
            .spawn(move || {
                let mut buf = [0u8; 4096];
                loop {
                    let n = match reader.read(&mut buf) {
                        Ok(0) | Err(_) => 0,
                        Ok(n) => n,
                    };
                    let mut st = sh.state.lock().unwrap_or_else(|p| p.into_inner());
                    if n == 0 {
                        if !st.partial.is_empty() {
                            let l = String::from_utf8_lossy(&st.partial)
                                .trim_end_matches('\r')
                                .to_string();
                            st.lines.push(l);
                            st.partial.clear();
                        }
                        st.eof = true;
                        sh.cv.notify_all();
                        return;
                    }
                    for &b in &buf[..n] {
                        if b == b'\n' {
                            let l = String::from_utf8_lossy(&st.partial)
                                .trim_end_matches('\r')
                                .to_string();
                            st.lines.push(l);
                            st.partial.clear();
                        } else {
                            st.partial.push(b);
                        }
                    }
                    st.last_output = Some(Instant::now());
                    sh.cv.notify_all();
                }
            })?;

        let mut g = Guest {
            child,
            writer: stream,
            shared,
            next_id: 1,
            nudges: 0,
            name: spec.name.clone(),
            accel,
            accel_note: note,
            up_line: String::new(),
            boot_secs: 0.0,
            serial_log,
            sock,
        };
        let deadline = start + timeout;
        let found = g.wait_line(0, deadline, |l| {
            l.contains("VMTEST-UP") || l.contains("VMTEST-FAIL") || l.contains("Kernel panic")
        });
        match found {
            Some((_, l)) if l.contains("VMTEST-UP") => {
                g.up_line = l[l.find("VMTEST-UP").unwrap()..].to_string();
                g.boot_secs = start.elapsed().as_secs_f64();
                Ok(g)
            }
            Some((_, l)) => bail!(
                "guest {} failed to boot: {} (serial log {})",
                spec.name,
                l.trim(),
                g.serial_log.display()
            ),
            None => {
                check_interrupted()?;
                let why = if g.eof() {
                    // Give QEMU a moment to finish writing why it stopped.
                    std::thread::sleep(Duration::from_millis(100));
                    let text = std::fs::read_to_string(&qemu_out).unwrap_or_default();
                    let lines: Vec<&str> = text
                        .lines()
                        .filter(|l| !l.contains("waiting for connection"))
                        .collect();
                    let main = lines
                        .iter()
                        .find(|l| l.contains("error"))
                        .or(lines.last())
                        .copied()
                        .unwrap_or("");
                    format!(
                        "QEMU exited: {}",
                        main.trim_start_matches("qemu-system-x86_64: ").trim()
                    )
                } else {
                    "no VMTEST-UP: timed out".to_string()
                };
                bail!(
                    "guest {} not up after {:.1} s with {} ({why})\nlast serial lines:\n{}",
                    spec.name,
                    start.elapsed().as_secs_f64(),
                    accel.name(),
                    g.tail(8)
                )
            }
        }
    }

    fn eof(&self) -> bool {
        self.shared
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .eof
    }

    /// Waits for a serial line at index >= `from` matching `pred`; (index, line).
    fn wait_line(
        &self,
        from: usize,
        deadline: Instant,
        pred: impl Fn(&str) -> bool,
    ) -> Option<(usize, String)> {
        let mut st = self.shared.state.lock().unwrap_or_else(|p| p.into_inner());
        let mut i = from;
        loop {
            while i < st.lines.len() {
                if pred(&st.lines[i]) {
                    return Some((i, st.lines[i].clone()));
                }
                i += 1;
            }
            let now = Instant::now();
            if st.eof || now >= deadline || interrupted() {
                return None;
            }
            let wait = (deadline - now).min(Duration::from_millis(100));
            st = self
                .shared
                .cv
                .wait_timeout(st, wait)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    fn serial_eof(&self) -> bool {
        self.shared.state.lock().unwrap_or_else(|p| p.into_inner()).eof
    }

    /// Whether QEMU still runs and when the guest last wrote, for error messages.
    fn liveness(&mut self) -> String {
        let qemu = match self.child.try_wait() {
            Ok(None) => "QEMU running".to_string(),
            Ok(Some(st)) => format!("QEMU exited: {st}"),
            Err(e) => format!("QEMU state unknown: {e}"),
        };
        let quiet = self
            .shared
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .last_output
            .map(|t| format!("guest output {:.1} s ago", t.elapsed().as_secs_f64()))
            .unwrap_or_else(|| "no guest output".into());
        format!("{qemu}, {quiet}, {} newline(s) sent", self.nudges)
    }

    /// The last `n` serial lines, for error messages.
    pub fn tail(&self, n: usize) -> String {
        let st = self.shared.state.lock().unwrap_or_else(|p| p.into_inner());
        let start = st.lines.len().saturating_sub(n);
        if start == st.lines.len() {
            return "  | (no serial output)".into();
        }
        st.lines[start..]
            .iter()
            .map(|l| format!("  | {l}"))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Runs a shell command in the guest's init shell (see the module docs of `initramfs`),
    /// waiting at most `timeout`. Background jobs must redirect their output.
    pub fn exec(&mut self, command: &str, timeout: Duration) -> Result<CmdOut> {
        if command.contains('\n') || command.len() > 3000 {
            bail!("guest command must be one line under 3000 bytes: {command:?}");
        }
        check_interrupted()?;
        let id = self.next_id;
        self.next_id += 1;
        let from = self
            .shared
            .state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .lines
            .len();
        self.writer
            .write_all(format!("VMTEST-CMD {id} {command}\n").as_bytes())
            .with_context(|| format!("writing to the serial console of guest {}", self.name))?;
        let begin = format!("VMTEST-BEGIN {id}");
        let end = format!("VMTEST-END {id} ");
        let sent = Instant::now();
        let deadline = sent + timeout;
        let mut nudged = 0;
        let begun = loop {
            let step = (Instant::now() + NUDGE_AFTER).min(deadline);
            let found = self.wait_line(from, step, |l| {
                l.contains(&begin) && !l.contains("VMTEST-CMD")
            });
            if found.is_some() || Instant::now() >= deadline || self.serial_eof() || interrupted() {
                break found;
            }
            // The init shell ignores an empty line; the bytes make the UART raise its
            // receive interrupt again should the one for the command's tail have been lost.
            let _ = self.writer.write_all(b"\n");
            nudged += 1;
        };
        if nudged > 0 {
            self.nudges += nudged;
            eprintln!(
                "vm-tests: guest {}: command {id} {} after {:.1} s and {nudged} newline(s) sent to its console",
                self.name,
                if begun.is_some() { "started" } else { "had not started" },
                sent.elapsed().as_secs_f64()
            );
        }
        let Some((bi, _)) = begun else {
            check_interrupted()?;
            let live = self.liveness();
            bail!(
                "guest {} did not start command {id} `{command}` within {:.0} s ({live}; last lines:\n{})",
                self.name,
                timeout.as_secs_f64(),
                self.tail(8)
            );
        };
        let Some((ei, eline)) = self.wait_line(bi + 1, deadline, |l| l.contains(&end)) else {
            check_interrupted()?;
            bail!(
                "guest command timed out after {:.0} s or the guest died: `{command}`; last serial lines:\n{}",
                timeout.as_secs_f64(),
                self.tail(10)
            );
        };
        let status = eline[eline.find(&end).unwrap() + end.len()..]
            .trim()
            .parse::<i32>()
            .unwrap_or(-1);
        let st = self.shared.state.lock().unwrap_or_else(|p| p.into_inner());
        let output = st.lines[bi + 1..ei]
            .iter()
            .filter(|l| !l.contains("VMTEST-CMD"))
            .cloned()
            .collect::<Vec<_>>()
            .join("\n");
        Ok(CmdOut { status, output })
    }

    /// The QEMU process's pid (`ip netns exec` execs QEMU in the process it was started as).
    pub fn qemu_pid(&self) -> u32 {
        self.child.id()
    }

    /// [`Guest::exec`] that fails unless the status is 0.
    pub fn exec_ok(&mut self, command: &str, timeout: Duration) -> Result<String> {
        let o = self.exec(command, timeout)?;
        if !o.ok() {
            bail!(
                "guest command failed (status {}): `{command}`\n{}",
                o.status,
                o.output
            );
        }
        Ok(o.output)
    }

    /// Powers the guest off and waits for QEMU to exit (killing it after 10 s).
    pub fn poweroff(mut self) -> Result<()> {
        let _ = self.writer.write_all(b"VMTEST-POWEROFF\n");
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.child.try_wait()?.is_some() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        bail!("guest {} did not power off within 10 s: killed", self.name)
    }

    /// QEMU's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn serial_log(&self) -> &Path {
        &self.serial_log
    }
}

impl Drop for Guest {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.sock);
    }
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or(s)
}

/// Parses `key=value` fields of a `VMTEST-UP` line.
pub fn up_field<'a>(up: &'a str, key: &str) -> Option<&'a str> {
    up.split_whitespace()
        .find_map(|f| f.strip_prefix(key)?.strip_prefix('='))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn up_fields() {
        let l = "VMTEST-UP kernel=6.1.0-57-cloud-amd64 uptime=1.93 addr=198.18.10.2/24 mac=52:54:00:12:00:02 mtu=1500 driver=virtio_net";
        assert_eq!(up_field(l, "kernel"), Some("6.1.0-57-cloud-amd64"));
        assert_eq!(up_field(l, "mtu"), Some("1500"));
        assert_eq!(up_field(l, "nope"), None);
    }
}
