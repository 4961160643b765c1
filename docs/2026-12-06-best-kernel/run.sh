#!/usr/bin/env bash
# The best kernel TCP as the baseline (issue #46): the stack against kernel TCP through epoll
# and through io_uring, plain and with the kernel's busy polling / IRQ suspension, on veth
# (rr-demo) and in the -icount guest (vm-tests cost). Run from the repository root as root,
# after `cargo build --release --workspace`. Writes this folder's results; raw logs go to
# target/best-kernel/ (regenerated, not committed).
#
#   docs/2026-12-06-best-kernel/run.sh demo     # rr-demo, every default case + rr-1, 5 rounds (~15 min)
#   docs/2026-12-06-best-kernel/run.sh full     # the --full cases against io_uring, one round (a check, ~2 min)
#   docs/2026-12-06-best-kernel/run.sh guest    # vm-tests cost, closed loop, 6.1 and a current kernel (~30 min)
#   docs/2026-12-06-best-kernel/run.sh light    # vm-tests cost --rate 300 (light load)
#   docs/2026-12-06-best-kernel/run.sh tables   # tables.txt from the results
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../.."
raw=target/best-kernel
mkdir -p "$raw"
servers=kernel,uring,kernel-napi,uring-napi,xsk
case "${1:-}" in
  demo)
    ./target/release/rr-demo --kernels epoll,uring --rounds 5 --duration 4s \
      --only rr-1,rr-16,rr-256,same-16,busy-same-1,open-5k,loss1-16 --out "$raw/demo"
    cp "$raw/demo/results.json" "$here/demo-results.json"
    ;;
  full)
    ./target/release/rr-demo --kernels uring --only churn-16,storm-1000,rr-1000,rr-10000,idle-100,lossburst-16 \
      --rounds 1 --duration 3s --out "$raw/full"
    cp "$raw/full/results.json" "$here/full-uring-results.json"
    ;;
  guest)
    ./target/release/vm-tests cost --kernels 6.1,new --servers "$servers" --conns 1,16 --runs 3 \
      --requests 2000 --json "$here/guest-results.json"
    ;;
  light)
    ./target/release/vm-tests cost --kernels 6.1,new --servers "$servers" --conns 1,16 --runs 3 \
      --requests 1000 --rate 300 --json "$here/light-results.json"
    ;;
  tables)
    {
      echo "# rr-demo (veth lab): ./target/release/rr-demo --from-json docs/2026-12-06-best-kernel/demo-results.json --markdown"
      ./target/release/rr-demo --from-json "$here/demo-results.json" --markdown --out "$raw/redraw"
    } > "$here/tables.txt"
    python3 "$here/guest.py" "$here"/guest-results.json "$here"/light-results.json >> "$here/tables.txt"
    ;;
  *) sed -n 2,12p "$0"; exit 2 ;;
esac
