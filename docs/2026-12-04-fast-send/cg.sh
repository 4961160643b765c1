#!/bin/bash
# User-space instructions per request of the stack's rr-server, two builds alternating
# (A B B A per cycle, callgrind): scripts/study/abba-callgrind, which began here; the
# studies' commands call it by this name.
# Usage: cg.sh OUT CYCLES BIN_A BIN_B [CONNS]   (root, valgrind)
exec "$(dirname "$0")/../../scripts/study/abba-callgrind" "$@"
