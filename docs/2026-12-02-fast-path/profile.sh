#!/bin/bash
# Where the stack server's user-space instructions per request go (callgrind, open loop,
# kernel client): scripts/study/profile-server, which began here; the studies' commands
# call it by this name.
# Usage: profile.sh BIN_DIR OUT_FILE [RATE] [CONNS] [SECONDS] [extra rr-server args...]
exec "$(dirname "$0")/../../scripts/study/profile-server" "$@"
