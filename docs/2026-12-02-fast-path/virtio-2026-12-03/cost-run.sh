#!/bin/bash
cd /work/main
for r in 1 2; do
  ./target/release/vm-tests cost --kernels new --conns 16 --runs 2 --json /tmp/vc/off-$r.json --xsk-arg=--no-csum-offload > /tmp/vc/off-$r.log 2>&1
  ./target/release/vm-tests cost --kernels new --conns 16 --runs 2 --json /tmp/vc/on-$r.json > /tmp/vc/on-$r.log 2>&1
done
echo done > /tmp/vc/done
