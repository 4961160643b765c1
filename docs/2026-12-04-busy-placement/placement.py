#!/usr/bin/env python3
"""busy-same-1 under different CPU placements of rr-server and rr-bench.

Runs `rr-demo --only busy-same-1 --rounds 1 --duration 3s` repeatedly, cycling
through placement variants (U A B S U A B S ...). While each invocation runs it
watches /proc (every 5 ms while a process of the row is missing, then only
every 100 ms, so the watcher itself stays light) for the rr-server / rr-bench processes of *this* invocation (their
command line holds this invocation's --out folder), pins every thread of each as
soon as it appears (variant permitting), samples their CPU (field 39 of
/proc/PID/stat) every 100 ms, and snapshots /proc/softirqs (NET_RX, NET_TX),
/proc/stat per-CPU softirq/steal jiffies and ksoftirqd/0,1 CPU time at the start
and end of each row (row = the life of the row's rr-server).

Creates only OUTROOT/run-NN folders (rr-demo output) and OUTROOT/placement.json.
Bounded: each invocation is killed after 120 s; the whole script after --budget s.

usage: placement.py OUTROOT [--cycles N] [--variants U,A,B,S] [--budget SECONDS]
"""
import json, os, subprocess, sys, time, argparse, statistics

VARIANTS = {
    "U": None,                 # unpinned (scheduler's choice)
    "A": {"server": 0, "client": 1},
    "B": {"server": 1, "client": 0},
    "S": {"server": 0, "client": 0},   # both on CPU0: the bad case
    "T": {"server": 1, "client": 1},   # both on CPU1
}
RR_DEMO = "/work/main/target/release/rr-demo"


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def softirqs():
    out = {}
    for line in (read("/proc/softirqs") or "").splitlines()[1:]:
        parts = line.split()
        if parts and parts[0] in ("NET_RX:", "NET_TX:"):
            out[parts[0][:-1]] = [int(x) for x in parts[1:]]
    return out


def procstat():
    # per-CPU jiffies: user nice system idle iowait irq softirq steal
    out = {}
    for line in (read("/proc/stat") or "").splitlines():
        if line.startswith("cpu") and line[3:4].isdigit():
            p = line.split()
            v = [int(x) for x in p[1:9]]
            out[p[0]] = dict(zip(["user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"], v))
    return out


def ksoftirqd_pids():
    res = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            c = read(f"/proc/{pid}/comm")
            if c and c.startswith("ksoftirqd/"):
                res[c.strip()] = int(pid)
    return res


def stat_fields(pid, tid=None):
    s = read(f"/proc/{pid}/task/{tid}/stat" if tid else f"/proc/{pid}/stat")
    if not s:
        return None
    rest = s[s.rindex(")") + 2:].split()
    return rest  # rest[0] is field 3 (state)


def ksoft_times(kp):
    out = {}
    for name, pid in kp.items():
        f = stat_fields(pid)
        if f:
            out[name] = int(f[11]) + int(f[12])  # utime+stime, fields 14,15
    return out


def snapshot(kp):
    return {"t": time.time(), "softirqs": softirqs(), "stat": procstat(), "ksoftirqd": ksoft_times(kp)}


def delta(a, b):
    d = {"secs": round(b["t"] - a["t"], 3)}
    d["net_rx"] = [y - x for x, y in zip(a["softirqs"].get("NET_RX", []), b["softirqs"].get("NET_RX", []))]
    d["net_tx"] = [y - x for x, y in zip(a["softirqs"].get("NET_TX", []), b["softirqs"].get("NET_TX", []))]
    d["softirq_jiffies"] = [b["stat"][c]["softirq"] - a["stat"][c]["softirq"] for c in sorted(a["stat"])]
    d["steal_jiffies"] = [b["stat"][c]["steal"] - a["stat"][c]["steal"] for c in sorted(a["stat"])]
    d["idle_jiffies"] = [b["stat"][c]["idle"] - a["stat"][c]["idle"] for c in sorted(a["stat"])]
    d["ksoftirqd_ticks"] = {k: b["ksoftirqd"].get(k, 0) - v for k, v in a["ksoftirqd"].items()}
    return d


def status_switches(pid):
    s = read(f"/proc/{pid}/status") or ""
    out = {}
    for line in s.splitlines():
        if line.startswith("voluntary_ctxt_switches"):
            out["vol"] = int(line.split()[1])
        elif line.startswith("nonvoluntary_ctxt_switches"):
            out["nonvol"] = int(line.split()[1])
    return out


def find_ours(outdir):
    found = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        comm = (read(f"/proc/{pid}/comm") or "").strip()
        if comm not in ("rr-server", "rr-bench"):
            continue
        cmd = (read(f"/proc/{pid}/cmdline") or "").split("\0")
        if not any(outdir in a for a in cmd):
            continue  # not ours (another session's processes are left alone)
        backend = cmd[cmd.index("--backend") + 1] if "--backend" in cmd else "?"
        found[int(pid)] = ("server" if comm == "rr-server" else "client", backend)
    return found


def pin_all_threads(pid, cpu, pinned):
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return
    for t in tids:
        t = int(t)
        if t in pinned:
            continue
        try:
            os.sched_setaffinity(t, {cpu})
            pinned.add(t)
        except OSError:
            pass


def run_one(n, variant, outroot, kp):
    outdir = os.path.join(outroot, f"run-{n:02d}")
    cmd = [RR_DEMO, "--only", "busy-same-1", "--rounds", "1", "--duration", "3s", "--out", outdir]
    pins = VARIANTS[variant]
    t0 = time.time()
    proc = subprocess.Popen(cmd, cwd="/work/main", stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    procs = {}   # pid -> info
    pinned = set()
    rows = {}    # backend -> info
    last_sample = 0.0
    while proc.poll() is None:
        now = time.time()
        if now - t0 > 120:
            proc.kill()
            break
        alive_known = [p for p, i in procs.items() if "gone" not in i and os.path.exists(f"/proc/{p}")]
        if len(alive_known) >= 2:
            # both ends of the row known: do not scan /proc (that costs CPU); only check they live
            cur = {p: (procs[p]["role"], procs[p]["backend"]) for p in alive_known}
        else:
            cur = find_ours(outdir)  # fast scan (every 5 ms) only while an end is missing
        for pid, (role, backend) in cur.items():
            if pid not in procs:
                procs[pid] = {"role": role, "backend": backend, "seen": now, "psr": [], "pinned_at": None, "switches": {}}
                row = rows.setdefault(backend, {})
                if role == "server":
                    row["start"] = snapshot(kp)
                    row["server_pid"] = pid
                else:
                    row["client_pid"] = pid
            if pins is not None:
                before = len(pinned)
                pin_all_threads(pid, pins[role], pinned)
                if len(pinned) > before and procs[pid]["pinned_at"] is None:
                    procs[pid]["pinned_at"] = round(now - procs[pid]["seen"], 4)
        # processes that ended
        for pid, info in procs.items():
            if pid not in cur and "gone" not in info:
                info["gone"] = now
                if info["role"] == "server":
                    rows[info["backend"]]["end"] = snapshot(kp)
        if now - last_sample >= 0.1:
            last_sample = now
            alive = {p: i for p, i in procs.items() if "gone" not in i}
            both = len({i["role"] for i in alive.values()}) == 2
            if both:
                for line in (read("/proc/stat") or "").splitlines():
                    if line.startswith("procs_running"):
                        for i in alive.values():
                            if i["role"] == "server":
                                rows[i["backend"]].setdefault("running", []).append(int(line.split()[1]))
            for pid, info in alive.items():
                f = stat_fields(pid)
                if f and both:
                    info["psr"].append(int(f[36]))  # field 39
                sw = status_switches(pid)
                if sw:
                    info["switches"] = sw
        time.sleep(0.005 if len(cur) < 2 else 0.1)
    out = proc.stdout.read() if proc.stdout else ""
    rc = proc.wait()
    # summarise
    res = {"run": n, "variant": variant, "pins": pins, "outdir": outdir, "rc": rc, "wall_s": round(time.time() - t0, 1), "rows": {}}
    try:
        rj = json.load(open(os.path.join(outdir, "results.json")))
    except Exception as e:
        rj = {"runs": []}
        res["error"] = f"no results.json: {e}"
    for r in rj["runs"]:
        b = r["backend"]
        row = {k: r.get(k) for k in ("rps", "p50_us", "p99_us", "p999_us", "cpu_us_per_req", "cpu_us_per_req_client",
                                    "cpu_us_per_req_own_rx", "cpu_us_per_req_machine", "server_cores", "client_cores")}
        info = rows.get(b, {})
        for role in ("server", "client"):
            pid = info.get(f"{role}_pid")
            if pid and pid in procs:
                p = procs[pid]
                psr = p["psr"]
                row[f"{role}_psr_samples"] = len(psr)
                row[f"{role}_on_cpu0_frac"] = round(psr.count(0) / len(psr), 3) if psr else None
                row[f"{role}_cpu_changes"] = sum(1 for a, c in zip(psr, psr[1:]) if a != c)
                row[f"{role}_pinned_after_s"] = p["pinned_at"]
                row[f"{role}_switches"] = p["switches"]
        if info.get("running"):
            row["procs_running_mean"] = round(sum(info["running"]) / len(info["running"]), 2)
            row["procs_running_max"] = max(info["running"])
        if "start" in info and "end" in info:
            row["system"] = delta(info["start"], info["end"])
        # placement label from samples
        s, c = row.get("server_on_cpu0_frac"), row.get("client_on_cpu0_frac")
        if s is not None and c is not None:
            def lab(x):
                return "0" if x >= 0.9 else ("1" if x <= 0.1 else "mixed")
            row["placement"] = f"server@{lab(s)} client@{lab(c)}"
        res["rows"][b] = row
    res["stdout_tail"] = out.strip().splitlines()[-12:]
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outroot")
    ap.add_argument("--cycles", type=int, default=6)
    ap.add_argument("--variants", default="U,A,B,S")
    ap.add_argument("--budget", type=float, default=900)
    ap.add_argument("--start", type=int, default=1)
    a = ap.parse_args()
    os.makedirs(a.outroot, exist_ok=True)
    kp = ksoftirqd_pids()
    jpath = os.path.join(a.outroot, "placement.json")
    allres = json.load(open(jpath)) if os.path.exists(jpath) else []
    t0 = time.time()
    n = a.start
    for cyc in range(a.cycles):
        for v in a.variants.split(","):
            if time.time() - t0 > a.budget:
                print("budget reached", flush=True)
                break
            r = run_one(n, v, a.outroot, kp)
            allres.append(r)
            with open(jpath, "w") as f:
                json.dump(allres, f, indent=1)
            line = f"run {n:2d} {v}"
            for b in ("xsk", "kernel"):
                x = r["rows"].get(b, {})
                line += (f" | {b}: p50 {x.get('p50_us')} rps {x.get('rps', 0) or 0:.0f} {x.get('placement')}"
                         f" netrx {x.get('system', {}).get('net_rx')} steal {x.get('system', {}).get('steal_jiffies')}")
            print(line, flush=True)
            n += 1


if __name__ == "__main__":
    main()
