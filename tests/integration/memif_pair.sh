#!/usr/bin/env bash
# Two rdgram-perf processes over net_memif: a server and a client, each with
# its own EAL and poll core. Passes when the client prints both perftest
# tables, every message of the bandwidth test arrived, and both exit 0.
set -u
perf=$1
cfg=$2
tmp=$(mktemp -d)
trap 'kill $spid 2>/dev/null; rm -rf "$tmp"' EXIT
sock=$tmp/memif.sock
common=(-c "$cfg" --timeout 60 -s 128)
"$perf" "${common[@]}" --mode server \
  --port "net_memif0,role=server,id=0,socket=$sock,socket-abstract=no" >"$tmp/server.out" 2>&1 &
spid=$!
sleep 0.5
"$perf" "${common[@]}" --mode client -n 20000 \
  --port "net_memif0,role=client,id=0,socket=$sock,socket-abstract=no" >"$tmp/client.out" 2>&1
crc=$?
wait $spid
src=$?
echo "--- client (exit $crc)"; cat "$tmp/client.out"
echo "--- server (exit $src)"; cat "$tmp/server.out"
fail=0
[ $crc -eq 0 ] || { echo "FAIL: client exit $crc"; fail=1; }
[ $src -eq 0 ] || { echo "FAIL: server exit $src"; fail=1; }
grep -q 't_typical\[usec\]' "$tmp/client.out" || { echo "FAIL: no latency table"; fail=1; }
grep -q 'MsgRate\[Mpps\]' "$tmp/client.out" || { echo "FAIL: no bandwidth table"; fail=1; }
grep -q 'receiver: 20000 of 20000 messages' "$tmp/client.out" || { echo "FAIL: bandwidth messages lost"; fail=1; }
exit $fail
