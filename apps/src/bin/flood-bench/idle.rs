//! The idle connections: holder processes in ns_b, each opening its share and checking on
//! request that every one still answers.

use std::io::Write;
use std::net::{SocketAddr, SocketAddrV4, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use xsk_lab::lab::Netns;

use crate::threads::join;
use crate::echo::check_held;

/// Opens `n` connections to `to` with `threads` threads, within `limit`.
fn connect_many(to: SocketAddrV4, n: usize, threads: usize, limit: Duration) -> Result<Vec<TcpStream>> {
    let deadline = Instant::now() + limit;
    let mut hs = Vec::new();
    for t in 0..threads {
        let share = n / threads + usize::from(t < n % threads);
        hs.push(std::thread::Builder::new().name("idle-open".into()).spawn(move || -> Result<Vec<TcpStream>> {
            let mut v = Vec::with_capacity(share);
            let mut failures = 0;
            while v.len() < share && Instant::now() < deadline {
                match TcpStream::connect_timeout(&SocketAddr::V4(to), Duration::from_secs(3)) {
                    Ok(s) => {
                        s.set_nodelay(true)?;
                        v.push(s);
                    }
                    Err(e) => {
                        failures += 1;
                        if failures > 20 {
                            eprintln!("holder: giving up after 20 failed connects, last: {e}");
                            break;
                        }
                    }
                }
            }
            Ok(v)
        })?);
    }
    let mut all = Vec::with_capacity(n);
    for h in hs {
        all.extend(join(h)?);
    }
    Ok(all)
}

/// Holder mode: opens `n` connections, says `opened K`; on `check` sends an echo request on
/// each and says `held H`; exits at end of input. One process holds at most what its open-file
/// limit allows, so flood-bench starts several.
pub(crate) fn hold(to: SocketAddrV4, n: usize, ping: Duration) -> Result<()> {
    use std::io::BufRead;
    let want = n as u64 + 64;
    let got = apps::raise_nofile_limit(want).context("raising the open-file limit")?;
    ensure!(got >= want, "open-file limit {got} is below the {want} a holder of {n} needs");
    let conns = Arc::new(Mutex::new(connect_many(to, n, 4, Duration::from_secs(120))?));
    let mut out = std::io::stdout().lock();
    writeln!(out, "opened {}", conns.lock().expect("conns").len())?;
    out.flush()?;
    if !ping.is_zero() {
        let conns = conns.clone();
        std::thread::Builder::new().name("idle-ping".into()).spawn(move || loop {
            std::thread::sleep(ping);
            let _ = check_held(&mut conns.lock().expect("conns"), Duration::from_secs(10));
        })?;
    }
    for line in std::io::stdin().lock().lines() {
        if line?.trim() == "check" {
            let held = check_held(&mut conns.lock().expect("conns"), Duration::from_secs(30))?;
            writeln!(out, "held {held}")?;
            out.flush()?;
        }
    }
    Ok(())
}

/// Connections per holder process: below the hard open-file limit of unprivileged setups.
const PER_HOLDER: usize = 10_000;

/// Holder processes in ns_b; killed on drop.
pub(crate) struct Holders(Vec<(Child, std::io::BufReader<std::process::ChildStdout>)>);

impl Holders {
    pub(crate) fn start(ns: &Netns, to: SocketAddrV4, n: usize, ping: Duration) -> Result<Holders> {
        let exe = std::env::current_exe()?;
        let mut hs = Holders(Vec::new());
        let mut left = n;
        while left > 0 {
            let k = left.min(PER_HOLDER);
            left -= k;
            let mut child = Command::new("ip")
                .args(["netns", "exec", &ns.name])
                .arg(&exe)
                .args(["--hold-connect", &to.to_string(), "--hold-count", &k.to_string()])
                .arg(format!("--idle-ping={}ms", ping.as_millis()))
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .context("starting a connection holder")?;
            let out = std::io::BufReader::new(child.stdout.take().expect("piped"));
            hs.0.push((child, out));
        }
        Ok(hs)
    }

    /// Sum of the numbers the holders answer with `word N`.
    pub(crate) fn collect(&mut self, word: &str) -> Result<usize> {
        use std::io::BufRead;
        let mut total = 0;
        for (_, out) in &mut self.0 {
            let mut line = String::new();
            out.read_line(&mut line)?;
            let n = line
                .trim()
                .strip_prefix(word)
                .and_then(|r| r.trim().parse::<usize>().ok())
                .with_context(|| format!("a connection holder answered {line:?}, expected `{word} N`"))?;
            total += n;
        }
        Ok(total)
    }

    pub(crate) fn check(&mut self) -> Result<usize> {
        for (c, _) in &mut self.0 {
            let stdin = c.stdin.as_mut().context("holder stdin")?;
            stdin.write_all(b"check\n")?;
            stdin.flush()?;
        }
        self.collect("held")
    }
}

impl Drop for Holders {
    fn drop(&mut self) {
        for (c, _) in &mut self.0 {
            drop(c.stdin.take()); // end of input: the holder closes its connections and exits
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        for (c, _) in &mut self.0 {
            while matches!(c.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            if matches!(c.try_wait(), Ok(None)) {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}
