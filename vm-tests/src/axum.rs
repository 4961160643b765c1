//! The tokio adapter in the guest (`smoke`, when the initramfs has `axum_server`): the axum
//! example on the stack (`axum_server xsk eth0 ADDR/LEN 8080`, dedicated address), driven
//! from the host namespace by curl as a user would: `GET /` over HTTP/1.1 and h2c, a 1 MiB
//! `POST /echo` checked byte for byte, then SIGTERM, which must stop it cleanly.

use std::net::Ipv4Addr;
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};

use crate::guest::Guest;
use crate::netns::HostNet;

pub const PORT: u16 = 8080;
const BODY: usize = 1 << 20;

/// Runs the check; `Ok` says what passed.
pub fn check(g: &mut Guest, net: &HostNet, addr: Ipv4Addr, prefix_len: u8, work: &std::path::Path) -> Result<String> {
    g.exec_ok(
        &format!("NO_COLOR=1 axum_server xsk eth0 {addr}/{prefix_len} {PORT} > /tmp/axum.log 2>&1 & AXUM=$!"),
        Duration::from_secs(10),
    )?;
    let up = g.exec(
        "i=0; until grep -q 'axum on http' /tmp/axum.log; do kill -0 $AXUM 2>/dev/null || break; \
         i=$((i+1)); [ $i -gt 600 ] && break; sleep 0.1; done; grep -q 'axum on http' /tmp/axum.log",
        Duration::from_secs(75),
    )?;
    if !up.ok() {
        let log = g.exec("kill -9 $AXUM 2>/dev/null; cat /tmp/axum.log", Duration::from_secs(10))?.output;
        bail!("axum_server did not start in the guest:\n{log}");
    }
    let requests = requests(net, addr, work);
    // Stopped whatever the requests did: SIGTERM, the graceful shutdown, its exit status.
    let stop = g.exec("kill -TERM $AXUM; wait $AXUM", Duration::from_secs(30))?;
    let log = g.exec("cat /tmp/axum.log", Duration::from_secs(10))?.output;
    let done = requests?;
    ensure!(
        stop.ok() && log.contains("stopped"),
        "axum_server did not stop cleanly on SIGTERM (status {}):\n{log}",
        stop.status
    );
    Ok(format!("{done}; SIGTERM: stopped, status 0"))
}

fn requests(net: &HostNet, addr: Ipv4Addr, work: &std::path::Path) -> Result<String> {
    let url = format!("http://{addr}:{PORT}");
    let hello = curl(net, &[&format!("{url}/")])?;
    ensure!(hello == b"Hello, World!\n", "GET / answered {:?}", String::from_utf8_lossy(&hello));
    let h2 = curl(net, &["--http2-prior-knowledge", &format!("{url}/")])?;
    ensure!(h2 == b"Hello, World!\n", "GET / over h2c answered {:?}", String::from_utf8_lossy(&h2));
    // A body no two runs share a byte pattern with at the same offsets.
    let body: Vec<u8> = (0..BODY).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
    let file = work.join("axum-body.bin");
    std::fs::write(&file, &body).with_context(|| format!("writing {}", file.display()))?;
    let data = format!("@{}", file.display());
    let echo = curl(net, &["--data-binary", &data, "-H", "Content-Type: application/octet-stream", &format!("{url}/echo")]);
    let _ = std::fs::remove_file(&file);
    let echo = echo?;
    ensure!(echo.len() == BODY, "POST /echo of {BODY} bytes came back with {}", echo.len());
    ensure!(echo == body, "POST /echo: the body came back changed");
    Ok("GET / (HTTP/1.1, h2c) ok, 1 MiB POST /echo byte for byte".to_string())
}

/// curl in the host namespace; the response body, or an error with curl's message.
fn curl(net: &HostNet, args: &[&str]) -> Result<Vec<u8>> {
    let mut all = vec!["-sS", "--fail", "--max-time", "60"];
    all.extend_from_slice(args);
    let out = net.command("curl", &all).output().context("running curl (apt-get install curl)")?;
    ensure!(out.status.success(), "curl {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    Ok(out.stdout)
}
