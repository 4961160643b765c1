# The studies' profiling lab, sourced by scripts/study/profile-*: two network namespaces,
# TAGs (the server's) and TAGc (the client's), joined by the veth pair TAGa/TAGb, with
# NET.1/24 on TAGa and NET.2/24 on TAGb (NET inside 198.18.0.0/15). The caller removes it
# with lab_down on every exit (its trap), after stopping what runs inside.
# shellcheck shell=bash

lab_up() {
  local tag=$1 net=$2
  LAB_S=${tag}s LAB_C=${tag}c LAB_SIF=${tag}a LAB_CIF=${tag}b LAB_NET=$net
  ip netns add "$LAB_S"; ip netns add "$LAB_C"
  ip link add "$LAB_SIF" type veth peer name "$LAB_CIF"
  ip link set "$LAB_SIF" netns "$LAB_S"; ip link set "$LAB_CIF" netns "$LAB_C"
  ip -n "$LAB_S" addr add "$net.1/24" dev "$LAB_SIF"; ip -n "$LAB_C" addr add "$net.2/24" dev "$LAB_CIF"
  ip -n "$LAB_S" link set "$LAB_SIF" up; ip -n "$LAB_C" link set "$LAB_CIF" up
}

lab_down() {
  [ -n "${LAB_S:-}" ] || return 0
  ip netns del "$LAB_S" 2>/dev/null || true
  ip netns del "$LAB_C" 2>/dev/null || true
}

# Starts BIN/rr-server --backend xsk under callgrind in the server's namespace (its address
# NET.10, port 7000, echo), callgrind's output in OUTDIR/xsk.cg[.N] and its log in
# OUTDIR/xsk.log; sets LAB_VG to valgrind's pid and waits until the server listens.
lab_callgrind_server() {
  local bin=$1 outdir=$2; shift 2
  # shellcheck disable=SC2086 # VG_ARGS: callgrind options, split at spaces
  ip netns exec "$LAB_S" valgrind --tool=callgrind ${VG_ARGS:-} --callgrind-out-file="$outdir/xsk.cg" "$bin/rr-server" --backend xsk \
    --service echo --port 7000 --max-conns 1024 --iface "$LAB_SIF" --attach auto --addr "$LAB_NET.10/24" "$@" > "$outdir/xsk.log" 2>&1 &
  LAB_VG=$!
  for _ in $(seq 120); do sleep 1; grep -q "listening on" "$outdir/xsk.log" && break; done
  grep -q "listening on" "$outdir/xsk.log" || { echo "rr-server did not start:" >&2; tail -5 "$outdir/xsk.log" >&2; return 1; }
}
