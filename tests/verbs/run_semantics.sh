#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# semantics.py under rdgram-verbs, on one port whose neighbours never answer
# (net_null, nothing received).
set -u
. "$(dirname "$0")/lib.sh"
verbs_setup "$1"
/usr/bin/python3 -c 'import pyverbs' 2>/dev/null || { echo "SKIP: python3-pyverbs missing"; exit 77; }
cat >"$tmp/null.toml" <<EOT
[[port]]
name = "rdg0"
devargs = "net_null0,no-rx=1"
mac = "02:00:00:00:00:01"
addresses = ["10.0.0.1", "fd00::1"]
EOT
timeout 100 "$RV" -c "$tmp/null.toml" /usr/bin/python3 "$2"
