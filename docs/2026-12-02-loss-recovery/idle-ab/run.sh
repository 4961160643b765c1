#!/bin/bash
cd /work/main
for i in 1 2 3 4 5; do
  ./target/release/rr-bench --lab xsk --rate 100 --conns 16 --req-size 64 --duration 20s --json /tmp/cpu/ab-new$i.json > /tmp/cpu/ab-new$i.log 2>&1
  ./target/release/rr-bench --lab xsk --rate 100 --conns 16 --req-size 64 --duration 20s --server-arg=--recovery --server-arg=smoltcp --json /tmp/cpu/ab-old$i.json > /tmp/cpu/ab-old$i.log 2>&1
done
echo done > /tmp/cpu/ABDONE
