#!/bin/bash
# Guest CPU per request (`vm-tests cost --short`), two builds alternating (A B, then B A):
# scripts/study/guest-ab, which began here; the studies' commands call it by this name.
# Usage: [LOADS="closed rate300"] guest.sh OUT CYCLES BIN_A BIN_B VM_TESTS [FIRST_CYCLE]   (root)
exec "$(dirname "$0")/../../scripts/study/guest-ab" "$@"
