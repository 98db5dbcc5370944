#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright(c) 2026 The rdgram authors
#
# Live telemetry: rdgram-perf (a bandwidth run, stopped with SIGINT) and
# rdgram-ah (a storm held open with --hold, ended by SIGINT) each run with their own
# --file-prefix; telemetry_check.py reads /rdgram/* over the v2 socket,
# checks the figures and that they move, and that the socket is 0600 in an
# owner-only directory. dpdk-telemetry.py (the dpdk package's client) is run
# once non-interactively when installed.
# Usage: telemetry.sh RDGRAM_PERF RDGRAM_AH
set -u
perf=$1
ahtool=$2
here=$(cd "$(dirname "$0")" && pwd)
eal="-l 0,1 --no-huge --no-shconf -m 512 --no-pci --log-level=lib.eal:error"
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT

# DPDK's runtime directory for a file prefix (eal_get_runtime_dir).
socket_of() {
  local d
  if [ "$(id -u)" -eq 0 ]; then d=/var/run/dpdk; else d=${XDG_RUNTIME_DIR:-/tmp}/dpdk; fi
  echo "$d/$1/dpdk_telemetry.v2"
}
wait_socket() {
  for _ in $(seq 1 100); do
    [ -S "$1" ] && return 0
    sleep 0.1
  done
  return 1
}

fail=0
# 1. rdgram-perf: a bandwidth run long enough to be read twice, then
# stopped with SIGINT (exit 130, and it says so).
prefix=rdgram-tele-perf$$
sock=$(socket_of "$prefix")
"$perf" $eal --file-prefix "$prefix" -- --test bw -n 2000000000 --timeout 60 --status-interval 1 \
  >"$tmp/perf.out" 2>&1 &
pids+=($!)
perf_pid=$!
if ! wait_socket "$sock"; then
  echo "FAIL: no telemetry socket at $sock"; cat "$tmp/perf.out"; exit 1
fi
# rdgram-perf makes the socket owner-only, attaches /rdgram/ and then starts
# its status line: wait (10 s at most) for the first status line, so that a
# loaded machine does not catch it between rte_eal_init and those steps.
for _ in $(seq 1 100); do grep -q '\] bw: [0-9]* done' "$tmp/perf.out" && break; sleep 0.1; done
sleep 0.5 # the poll threads publish once they run
/usr/bin/python3 "$here/telemetry_check.py" "$sock" perf || fail=1
if command -v dpdk-telemetry.py >/dev/null; then
  # Non-interactive: commands from stdin, one reply each.
  out=$(printf '/rdgram/lcores\n/rdgram/qps,client_qp0\n' | dpdk-telemetry.py -f "$prefix" 2>&1)
  echo "$out"
  echo "$out" | grep -q '"client_qp0"' || { echo "FAIL: dpdk-telemetry.py read no /rdgram/qps"; fail=1; }
  echo "$out" | grep -q '"role": "server"' || { echo "FAIL: dpdk-telemetry.py read no /rdgram/lcores"; fail=1; }
else
  echo "dpdk-telemetry.py not installed: skipped that part"
fi
# One status line (every second), then Ctrl-C.
for _ in $(seq 1 100); do grep -q '\] bw: [0-9]* done' "$tmp/perf.out" && break; sleep 0.1; done
kill -INT "$perf_pid"
wait "$perf_pid"
st=$?
echo "--- rdgram-perf (stopped by SIGINT: exit 130 expected)"
cat "$tmp/perf.out"
[ "$st" -eq 130 ] || { echo "FAIL: rdgram-perf exit $st after SIGINT, not 130"; fail=1; }
grep -q '\] bw: [0-9]* done' "$tmp/perf.out" || { echo "FAIL: no status line"; fail=1; }
grep -q 'rdgram-perf: interrupted' "$tmp/perf.out" || { echo "FAIL: no 'interrupted' line"; fail=1; }
[ -e "$sock" ] && { echo "FAIL: $sock left behind"; fail=1; }

# 2. rdgram-ah: the registry summary after a storm; SIGINT ends the hold.
prefix=rdgram-tele-ah$$
sock=$(socket_of "$prefix")
"$ahtool" $eal --file-prefix "$prefix" -- storm 3000 --hold 60 >"$tmp/ah.out" 2>&1 &
pids+=($!)
ah_pid=$!
if ! wait_socket "$sock"; then
  echo "FAIL: no telemetry socket at $sock"; cat "$tmp/ah.out"; exit 1
fi
# The report is printed before the hold: read after it.
for _ in $(seq 1 100); do grep -q 'registry:' "$tmp/ah.out" && break; sleep 0.1; done
sleep 0.3 # one summary publication (every 100 ms)
/usr/bin/python3 "$here/telemetry_check.py" "$sock" ah 3000 || fail=1
kill -INT "$ah_pid" # ends the hold
wait "$ah_pid" || { echo "FAIL: rdgram-ah exit $?"; fail=1; }
cat "$tmp/ah.out"
[ -e "$sock" ] && { echo "FAIL: $sock left behind"; fail=1; }
exit $fail
