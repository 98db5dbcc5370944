#!/usr/bin/env bash
# Fault: a net_memif peer killed (SIGKILL) in the middle of a run, then
# restarted. Two rdgram-perf processes, each with its own EAL (own
# --file-prefix, from rdgram's defaults). The server is the survivor: it must
# still be running after its peer died, take the restarted client's
# connection (the memif link comes up again: the client waits for it), serve
# its whole run, and exit 0; the restarted client must see every message of
# its bandwidth test arrive (check_pair, tests/integration/lib.sh). Bounded:
# every process has --timeout 60.
set -u
. "$(dirname "$0")/../integration/lib.sh"
perf=$1
cfg=$2
tmp=$(mktemp -d)
spid=
cpid=
trap 'kill -9 $spid $cpid 2>/dev/null; rm -rf "$tmp"' EXIT
sock=$tmp/memif.sock
port="net_memif0,role=server,id=0,socket=$sock,socket-abstract=no"
cport="net_memif0,role=client,id=0,socket=$sock,socket-abstract=no"
common=(-c "$cfg" --timeout 60 -s 128)
t0=$(date +%s.%N)
"$perf" "${common[@]}" --mode server --port "$port" >"$tmp/server.out" 2>&1 &
spid=$!
wait_socket "$sock" || exit 1
# The first client: a bandwidth run far longer than it will live.
"$perf" "${common[@]}" --mode client --test bw -n 200000000 --port "$cport" >"$tmp/client1.out" 2>&1 &
cpid=$!
# Kill it once traffic flows: the server's status line (once a second)
# shows data received. EAL start-up takes a few seconds on a loaded machine.
flowing=
for _ in $(seq 1 300); do
  if grep -Eq 'server: [1-9][0-9]* received' "$tmp/server.out"; then flowing=1; break; fi
  kill -0 "$cpid" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$flowing" ] || ! kill -0 "$cpid" 2>/dev/null; then
  echo "FAIL: the first client never got traffic flowing, or ended before it could be killed"
  cat "$tmp/server.out" "$tmp/client1.out"; exit 1
fi
kill -9 "$cpid"
wait "$cpid" 2>/dev/null
cpid=
echo "first client killed with SIGKILL mid-run, after: $(grep -E 'server: [0-9]+ received' "$tmp/server.out" | tail -1)"
sleep 0.5
if ! kill -0 "$spid" 2>/dev/null; then
  echo "FAIL: the server died with its peer"; cat "$tmp/server.out"; exit 1
fi
echo "server still running after its peer died"
# The restarted client: a full run against the same, still running, server.
"$perf" "${common[@]}" --mode client -n 20000 --port "$cport" >"$tmp/client.out" 2>&1
crc=$?
wait "$spid"
src=$?
spid=
t1=$(date +%s.%N)
fail=0
check_pair "$tmp" $crc $src 20000 || fail=1
grep -q "server: answered [1-9][0-9]* data messages" "$tmp/server.out" ||
  { echo "FAIL: the server's counters did not move after the restart"; fail=1; }
echo "--- first client (killed)"; cat "$tmp/client1.out"
printf 'memif_restart: total %.1f s, server exit %d, restarted client exit %d\n' \
  "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" "$src" "$crc"
exit $fail
