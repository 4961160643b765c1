#!/bin/bash
# Guest instructions per request of several builds (`vm-tests cost --short --rate 300`),
# the order rotated: scripts/study/guest-rotation, which began here; the studies' commands
# call it by this name.
# Usage: [VM_TESTS=...] [VM_ARGS=...] [FIRST=N] guest.sh OUT CYCLES BIN_DIR...   (root)
exec "$(dirname "$0")/../../scripts/study/guest-rotation" "$@"
