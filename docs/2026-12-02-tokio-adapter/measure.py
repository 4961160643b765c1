#!/usr/bin/env python3
"""Syscalls and server CPU per request of axum_server and grpc_server on their three listeners:
tokio's own (A), the adapter over the kernel backend (B), the adapter over the xsk
backend (C), loaded by h2load from the other end of a veth lab (peer with default offloads).

Two passes per case, alternating A, B, C in each round:
  * CPU: server threads' schedstat run time (ns) over the run, divided by requests;
  * syscalls: the same run under `strace -c -f` (counts exact, times not), per request.
With --own-rx, each CPU run also charges each side its own receive path (target/release/netrx-watch,
apps::netrx: on veth the sender's system call runs the receiver's NET_RX softirq, so plain server CPU
holds the client's receive and not the server's own) and counts the server's system calls without strace.

usage (root, release examples built):
  cargo build --release -p stack --features axum,tonic --examples
  cargo build --release -p apps --bin netrx-watch   # for --own-rx
  docs/2026-12-02-tokio-adapter/measure.py --rounds 3 --requests 20000 [--own-rx] > results.json
"""
import argparse, glob, json, os, re, signal, statistics, subprocess, sys, time

EXAMPLES = "target/release/examples/"
NETRX_WATCH = "target/release/netrx-watch"
NS_A, NS_B = "tam-a", "tam-b"
NET = "198.19.250"
SERVER = {"tokio": ["tokio", "8080"], "kernel": ["kernel", "8080"],
          "xsk": ["xsk", NS_A, f"{NET}.100/24", "8080"]}
ADDR = {"tokio": f"{NET}.1", "kernel": f"{NET}.1", "xsk": f"{NET}.100"}
# gRPC unary SayHello{name: "x"}: no compression, length 3, field 1 = "x".
GRPC_BODY = "/tmp/tam-grpc-request.bin"
GRPC = ["-d", GRPC_BODY, "-H", "content-type: application/grpc", "-H", "te: trailers"]
# case: (example, h2load arguments, path)
CASES = {"h1-1": ("axum_server", ["--h1", "-c", "1"], "/"),
         "h1-16": ("axum_server", ["--h1", "-c", "16"], "/"),
         "h1-256": ("axum_server", ["--h1", "-c", "256"], "/"),
         "h2-16": ("axum_server", ["-c", "16", "-m", "1"], "/"),
         "grpc-1": ("grpc_server", ["-c", "1", "-m", "1", *GRPC], "/helloworld.Greeter/SayHello"),
         "grpc-16": ("grpc_server", ["-c", "16", "-m", "1", *GRPC], "/helloworld.Greeter/SayHello")}


def sh(*a, check=True):
    return subprocess.run(a, check=check, capture_output=True, text=True)


def lab_up():
    lab_down()
    for ns in (NS_A, NS_B):
        sh("ip", "netns", "add", ns)
    sh("ip", "-n", NS_A, "link", "add", NS_A, "type", "veth", "peer", NS_B, "netns", NS_B)
    for ns, a in ((NS_A, 1), (NS_B, 2)):
        sh("ip", "-n", ns, "addr", "add", f"{NET}.{a}/24", "dev", ns)
        sh("ip", "-n", ns, "link", "set", ns, "up")
        sh("ip", "-n", ns, "link", "set", "lo", "up")


def lab_down():
    for ns in (NS_A, NS_B):
        sh("ip", "netns", "del", ns, check=False)


def cpu_ns(pid):
    total = 0
    for f in glob.glob(f"/proc/{pid}/task/*/schedstat"):
        try:
            total += int(open(f).read().split()[0])
        except (OSError, ValueError):
            pass
    return total


def start(server, case):
    p = subprocess.Popen(["ip", "netns", "exec", NS_A, EXAMPLES + CASES[case][0], *SERVER[server]],
                         stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if " on " not in line:
        raise SystemExit(f"{server}: {line!r}")
    return p


def stop(p):
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=15)


def load(server, case, n, watch=None):
    """h2load's completed requests and rate; with `watch` (the server's pid), h2load runs under
    netrx-watch and the NET_RX totals of the run come third (else None)."""
    _, load_args, path = CASES[case]
    url = f"http://{ADDR[server]}:8080{path}"
    cmd = ["ip", "netns", "exec", NS_B, "h2load", "-n", str(n), *load_args, url]
    netrx = None
    if watch is None:
        out = sh(*cmd).stdout
    else:
        res = "/tmp/tam-netrx.json"
        out = sh(NETRX_WATCH, "--server", str(watch), "--out", res, "--", *cmd).stdout
        netrx = json.load(open(res))
        os.remove(res)
    m = re.search(r"requests: (\d+) total, \d+ started, \d+ done, (\d+) succeeded, (\d+) failed, (\d+) errored", out)
    if not m or m.group(3) != "0" or m.group(4) != "0" or m.group(1) != m.group(2):
        raise SystemExit(f"{server} {case}: {out}")
    rps = float(re.search(r"finished in [^,]+, ([\d.]+) req/s", out).group(1))
    if watch is None:
        return int(m.group(2)), rps
    return int(m.group(2)), rps, netrx


def run_cpu(server, case, n, own_rx=False):
    p = start(server, case)
    load(server, case, 1000)  # warm: connections, ARP, caches
    before = cpu_ns(p.pid)
    done, rps, *netrx = load(server, case, n, watch=p.pid if own_rx else None)
    used = cpu_ns(p.pid) - before
    stop(p)
    res = {"requests": done, "req_per_s": rps, "server_cpu_us_per_req": used / done / 1000}
    if own_rx:
        # Each side charged its own receive path (apps::netrx): on veth the sender's system
        # call runs the receiver's NET_RX softirq, so the server's CPU held its client's
        # receive and not its own.
        x = netrx[0]
        res["server_cpu_us_per_req_own_rx"] = (used - x["in_server_ns"] + x["in_client_ns"]) / done / 1000
        res["netrx_us_per_req"] = {k[:-3]: x[k] / done / 1000 for k in ("in_server_ns", "in_client_ns", "elsewhere_ns")}
        res["server_syscalls_per_req"] = x["server_syscalls"] / done
    return res


def run_strace(server, case, n):
    p = start(server, case)
    load(server, case, 1000)
    out = f"/tmp/tam-strace-{server}-{case}.txt"
    st = subprocess.Popen(["strace", "-c", "-f", "-o", out, "-p", str(p.pid)], stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    done, _ = load(server, case, n)
    st.send_signal(signal.SIGINT)
    st.wait(timeout=15)
    stop(p)
    calls = {}
    for line in open(out):
        f = line.split()
        if len(f) >= 5 and f[-1] not in ("total", "syscall") and f[3].isdigit():
            calls[f[-1]] = int(f[3])
    os.remove(out)
    total = sum(calls.values())
    return {"requests": done, "syscalls_per_req": total / done,
            "by_call_per_req": {k: round(v / done, 3) for k, v in sorted(calls.items(), key=lambda kv: -kv[1]) if v / done >= 0.01}}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=20000)
    ap.add_argument("--strace-requests", type=int, default=5000)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--own-rx", action="store_true",
                    help="run h2load under netrx-watch (target/release, next to the examples): each run also "
                         "gets the server's CPU with each side charged its own receive path, and its system calls")
    args = ap.parse_args()
    with open(GRPC_BODY, "wb") as f:
        f.write(bytes([0, 0, 0, 0, 3, 0x0A, 0x01, ord("x")]))
    lab_up()
    try:
        runs = []
        for r in range(args.rounds):
            for case in args.cases.split(","):
                for server in ("tokio", "kernel", "xsk"):
                    res = run_cpu(server, case, args.requests, args.own_rx)
                    runs.append({"round": r, "case": case, "server": server, **res})
                    print(json.dumps(runs[-1]), file=sys.stderr)
        syscalls = {}
        for case in args.cases.split(","):
            for server in ("tokio", "kernel", "xsk"):
                syscalls[f"{case}/{server}"] = run_strace(server, case, args.strace_requests)
                print(case, server, json.dumps(syscalls[f"{case}/{server}"]), file=sys.stderr)
    finally:
        lab_down()
        os.remove(GRPC_BODY)
    med = {}
    for case in args.cases.split(","):
        for server in ("tokio", "kernel", "xsk"):
            rs = [x for x in runs if x["case"] == case and x["server"] == server]
            keys = ["req_per_s", "server_cpu_us_per_req"] + (["server_cpu_us_per_req_own_rx", "server_syscalls_per_req"] if args.own_rx else [])
            med[f"{case}/{server}"] = {k: statistics.median(x[k] for x in rs) for k in keys}
    meta = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "kernel": os.uname().release,
            "commit": sh("git", "rev-parse", "--short", "HEAD", check=False).stdout.strip(), "args": vars(args),
            "command": " ".join(sys.argv)}
    json.dump({"meta": meta, "medians": med, "syscalls": syscalls, "runs": runs}, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
