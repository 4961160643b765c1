#!/bin/bash
# User-space instructions per connection under churn (callgrind):
# scripts/study/profile-churn, which began here; the studies' commands call it by this name.
# Usage: [VG_ARGS=--cache-sim=yes] churn-profile.sh BIN_DIR OUT_FILE SECONDS [extra rr-server args...]   (root, valgrind)
exec "$(dirname "$0")/../../scripts/study/profile-churn" "$@"
