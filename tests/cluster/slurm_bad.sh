#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright(c) 2026 The rdgram authors
#
# The cluster harness (slurm.sh) when a daemon does not start: one line
# on stderr naming the daemon and its log, slurm_up returns 1, and nothing
# it started is left running (pgrep on the cluster's directory, which
# every daemon's command line or open files name). Three faults, each in
# its own namespace and directory:
#   munged     the munge key is missing (SLURM_MUNGE_KEY names no file);
#   slurmctld  its select plugin does not exist (SLURM_CONF_EXTRA);
#   slurmd     its port is taken (SLURM_PORT, a listener of the test's).
# Then a good cluster starts and stops, nothing left. About 4 s.
# Needs root; skips (77) without Slurm or munge.
set -u
here=$(cd "$(dirname "$0")" && pwd)
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (network namespace, munged and Slurm's daemons as root)"; exit 77; }
for t in munged mungekey slurmctld slurmd srun sinfo scontrol nsenter; do
  command -v $t >/dev/null || { echo "SKIP: $t missing (Debian: munge slurmctld slurmd slurm-client; scripts/install-deps.sh cluster)"; exit 77; }
done
# shellcheck source=slurm.sh
. "$here/slurm.sh"
tmp=$(mktemp -d)
ns=rdsb$$
cleanup() {
  slurm_down
  ip netns del "$ns" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
ip netns add "$ns" && ip -n "$ns" link set lo up || { echo "SKIP: cannot create a network namespace"; exit 77; }
fail=0
SECONDS=0

# left DIR: the processes still naming DIR (command line or open files).
left() {
  local p f
  for p in $(pgrep -f -- "$1"; pgrep -x slurmstepd; pgrep -x slurmscriptd); do
    for f in /proc/"$p"/cmdline /proc/"$p"/fd/*; do
      if [ "${f##*/}" = cmdline ]; then tr '\0' ' ' <"$f" 2>/dev/null | grep -q -- "$1" && { echo "$p"; break; }
      else case $(readlink "$f" 2>/dev/null) in "$1"/*) echo "$p"; break ;; esac; fi
    done
  done | sort -u
}

# expect NAME DAEMON: slurm_up in $tmp/NAME fails with one line naming
# DAEMON and a file of NAME's directory, nothing left.
expect() {
  local name=$1 daemon=$2 rc lines pids
  ( slurm_up "$tmp/$name" "$ns" ) 2>"$tmp/$name.err"
  rc=$?
  lines=$(wc -l <"$tmp/$name.err")
  pids=$(left "$tmp/$name")
  if [ $rc -eq 0 ] || [ "$lines" -ne 1 ] ||
    ! grep -Eq "^slurm: $daemon did not start \(.*\); see $tmp/$name/$daemon\.(log|out)\$" "$tmp/$name.err"; then
    echo "FAIL: $name: slurm_up returned $rc, $lines lines:"; cat "$tmp/$name.err"; fail=1
  else
    echo "$name: $(cat "$tmp/$name.err")"
  fi
  [ -z "$pids" ] || { echo "FAIL: $name: left running: $(ps -o pid=,comm= -p "$(echo $pids | tr ' ' ,)")"; fail=1; }
}

SLURM_MUNGE_KEY=$tmp/no-such.key expect nokey munged
grep -q 'Failed to find keyfile' "$tmp/nokey.err" || { echo "FAIL: nokey: munged's own reason missing"; fail=1; }
SLURM_CONF_EXTRA='SchedulerType=sched/nonexistent' expect noplugin slurmctld

# slurmd's port taken (a listener of this test's in the namespace).
port=$((30000 + $$ % 1000 * 2))
nsenter --net="/run/netns/$ns" python3 -c '
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen(); print("up", flush=True); time.sleep(60)' $((port + 1)) >"$tmp/listener.out" &
listener=$!
for _ in $(seq 50); do grep -qs up "$tmp/listener.out" && break; sleep 0.1; done
SLURM_PORT=$port expect portbusy slurmd
kill "$listener"; wait "$listener" 2>/dev/null

# A good cluster: up and down.
slurm_up "$tmp/good" "$ns" 2>"$tmp/good.err" || { echo "FAIL: a good cluster did not start"; cat "$tmp/good.err"; fail=1; }
slurm_down
[ -z "$(left "$tmp/good")" ] || { echo "FAIL: the good cluster left processes"; fail=1; }
[ $fail -eq 0 ] && echo "a good cluster: up and down, nothing left"
echo "slurm_bad: $SECONDS s"
exit $fail
