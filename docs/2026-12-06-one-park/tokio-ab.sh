#!/bin/bash
# A/B of the tokio adapter: A = kick before tokio's sleep (sendto), B = the kick left to tokio's epoll_wait (level-triggered watch).
OUT=${1:-/tmp/tokab}; mkdir -p $OUT
k=0
for i in 1 2 3; do for v in A B B A; do k=$((k+1)); cd /tmp/tok${v}2 && python3 /work/main/docs/2026-12-02-tokio-adapter/measure.py --rounds 1 --requests 20000 --strace-requests 3000 --cases h1-1,grpc-1,h1-16,grpc-16 > $OUT/$v-$k.json 2> $OUT/$v-$k.err; echo "$k $v $?"; done; done
