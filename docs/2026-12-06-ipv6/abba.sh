#!/bin/bash
# IPv4 before/after: the base build (5887ef3) and issue-47, alternating A B B A; then
# rr-16 against rr-16-v6 on issue-47 in one run.
B=/work/wt47-base/target/release/rr-demo
N=/work/wt47/target/release/rr-demo
ARGS="--only rr-1,rr-16,rr-256 --rounds 3 --duration 3s --kernels epoll"
i=0
for who in base new new base; do
  i=$((i+1))
  exe=$B; [ $who = new ] && exe=$N
  timeout 600 $exe $ARGS --out /tmp/w47/ab/$i-$who > /tmp/w47/ab/$i-$who.log 2>&1
  echo "$i $who rc=$?"
done
timeout 900 $N --only rr-16,rr-16-v6 --rounds 5 --duration 3s --kernels epoll --out /tmp/w47/ab/v6 > /tmp/w47/ab/v6.log 2>&1
echo "v6 rc=$?"
