#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# threads.c under rdgram-verbs: two devices in one process, joined by a
# net_memif pair.
set -u
. "$(dirname "$0")/lib.sh"
verbs_setup "$1"
cat >"$tmp/two.toml" <<EOT
[[port]]
name = "rdg0"
devargs = "net_memif0,role=server,socket=rdgv-$$-thr"
mac = "02:00:00:00:00:01"
addresses = ["10.0.0.1"]
[[port]]
name = "rdg1"
devargs = "net_memif1,role=client,socket=rdgv-$$-thr"
mac = "02:00:00:00:00:02"
addresses = ["10.0.0.2"]
EOT
RDGRAM_VERBS_STATS=1 timeout 100 "$RV" -c "$tmp/two.toml" "$2"
