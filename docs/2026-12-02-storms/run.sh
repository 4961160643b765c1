#!/bin/sh
# The runs of this study, as they were made (root; from the worktree's top directory).
# BASE is a release build of the commit before this branch's changes (b791413), built
# from `git archive b791413` with its own target directory.
set -eu
BASE=${BASE:-/tmp/sh-base/target/release}
NEW=./target/release
D=docs/2026-12-02-storms
mkdir -p $D/flood $D/rr10000

# SYN flood at the flooder's full rate, 2,000 idle connections, 20 s per case, a fresh kernel
# connection every 250 ms; variants alternating per round: base (old sizing, no shedding),
# off (new sizing, --syn-shed off), shed (new sizing, --syn-shed auto, the default).
flood() { # variant round args...
    v=$1 r=$2; shift 2
    nice -n 5 $NEW/flood-bench --case xsk-baseline,xsk-flood --duration 20s --idle-conns 2000 \
        --fresh-every 250ms --quiet --json $D/flood/$v-r$r.json "$@" > $D/flood/$v-r$r.txt 2>&1 || true
}
for r in 1 2; do
    flood base $r --server $BASE/rr-server
    flood off $r --xsk-arg=--syn-shed=off
    flood shed $r --xsk-arg=--syn-shed=auto
done
nice -n 5 $NEW/flood-bench --case kernel-baseline,kernel-flood --duration 20s --idle-conns 2000 \
    --fresh-every 250ms --quiet --json $D/flood/kernel-r1.json > $D/flood/kernel-r1.txt 2>&1 || true

# rr-10000: base and new alternating, two rounds each invocation.
for i in 1 2; do
    $BASE/rr-demo --only rr-10000 --rounds 2 --out $D/rr10000/base-$i > $D/rr10000/base-$i.log 2>&1 || true
    $NEW/rr-demo --only rr-10000 --rounds 2 --out $D/rr10000/new-$i > $D/rr10000/new-$i.log 2>&1 || true
done
python3 $D/summarize.py > $D/tables.txt

# rr-10000 with the new build, shedding off against on (the default at the time), alternating.
./target/release/rr-demo --only rr-10000 --rounds 2 --xsk-args "--syn-shed off" --out $D/rr10000/shedoff-1 > $D/rr10000/shedoff-1.log 2>&1 || true
./target/release/rr-demo --only rr-10000 --rounds 2 --out $D/rr10000/new-3 > $D/rr10000/new-3.log 2>&1 || true

# Set 2 of the floods, after flood-bench started each fresh connection on its own thread:
# xsk-flood only (the unloaded figures are set 1's xsk-baseline), alternating base/off/shed.
# flood-bench and rr-server were copied to /tmp/sh-new first (a build was running).
mkdir -p $D/flood2 /tmp/sh-new
cp $NEW/flood-bench $NEW/rr-server /tmp/sh-new/
for r in 1 2; do
    for v in base off shed; do
        case $v in
            base) extra="--server $BASE/rr-server" ;;
            off) extra="--server /tmp/sh-new/rr-server --xsk-arg=--syn-shed=off" ;;
            shed) extra="--server /tmp/sh-new/rr-server --xsk-arg=--syn-shed=auto" ;;
        esac
        nice -n 5 /tmp/sh-new/flood-bench --case xsk-flood --duration 20s --idle-conns 2000 --fresh-every 250ms \
            --quiet --json $D/flood2/$v-r$r.json $extra > $D/flood2/$v-r$r.txt 2>&1 || true
    done
done
python3 $D/summarize.py > $D/tables.txt
