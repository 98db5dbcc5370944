#!/usr/bin/env bash
# Two rdgram-perf processes over net_memif: a server and a client, each with
# its own EAL and poll core. Passes when the client prints both perftest
# tables, every message of the bandwidth test arrived, and both exit 0.
set -u
. "$(dirname "$0")/lib.sh"
perf=$1
cfg=$2
tmp=$(mktemp -d)
trap 'kill $spid 2>/dev/null; rm -rf "$tmp"' EXIT
sock=$tmp/memif.sock
common=(-c "$cfg" --timeout 60 -s 128)
"$perf" "${common[@]}" --mode server \
  --port "net_memif0,role=server,id=0,socket=$sock,socket-abstract=no" >"$tmp/server.out" 2>&1 &
spid=$!
wait_socket "$sock" || exit 1
"$perf" "${common[@]}" --mode client -n 20000 \
  --port "net_memif0,role=client,id=0,socket=$sock,socket-abstract=no" >"$tmp/client.out" 2>&1
crc=$?
wait $spid
src=$?
check_pair "$tmp" $crc $src 20000
