#!/usr/bin/env bash
# examples/ as built against the installed rdgram: ud_echo serves four
# addresses on one side of a net_memif pair, ah_stream creates an AH to each
# of them ahead of time and streams to them from the other side. Passes
# when every datagram came back (each side's counts below) and both exit 0.
# Bounded: the whole run takes a few seconds, each process at most 60 s.
set -u
ud_echo=$1
ah_stream=$2
tmp=$(mktemp -d)
spid=
trap '[ -n "$spid" ] && kill $spid 2>/dev/null; rm -rf "$tmp"' EXIT
sock=$tmp/memif.sock
# Two CPUs this process may use (one, twice, on a one-CPU machine): the
# server polls on the first, the sender's poll worker on the last.
read -r c0 c1 < <(python3 -c 'import os; c = sorted(os.sched_getaffinity(0)); print(c[0], c[-1])')
eal=(--no-huge -m 256 --no-shconf --no-pci --log-level=pmd.net.memif:warning)
peers=(10.0.0.1 10.0.0.2 10.0.0.3 10.0.0.4)
count=2000
timeout 60 "$ud_echo" --lcores "0@$c0" "${eal[@]}" --file-prefix "ud_echo$$" \
	--vdev="net_memif0,role=server,id=0,socket=$sock,socket-abstract=no" \
	-- "${peers[@]/#/--ip=}" --idle 2 --seconds 50 >"$tmp/server.out" 2>&1 &
spid=$!
for _ in $(seq 1 600); do
	[ -S "$sock" ] && break
	sleep 0.1
done
[ -S "$sock" ] || { echo "FAIL: the memif socket never appeared"; cat "$tmp/server.out"; exit 1; }
timeout 60 "$ah_stream" --lcores "0@$c0,1@$c1" "${eal[@]}" --file-prefix "ah_stream$$" \
	--vdev="net_memif0,role=client,id=0,socket=$sock,socket-abstract=no" \
	-- --ip 10.0.0.100 "${peers[@]/#/--peer=}" --count $count --seconds 30 >"$tmp/client.out" 2>&1
crc=$?
wait $spid
src=$?
spid=
echo "--- ah_stream (exit $crc)"; cat "$tmp/client.out"
echo "--- ud_echo (exit $src)"; cat "$tmp/server.out"
n=$((count * ${#peers[@]}))
fail=0
[ $crc -eq 0 ] || { echo "FAIL: ah_stream exit $crc"; fail=1; }
[ $src -eq 0 ] || { echo "FAIL: ud_echo exit $src"; fail=1; }
grep -q "^ah_stream: ${#peers[@]} of ${#peers[@]} AHs created" "$tmp/client.out" || { echo "FAIL: not every AH was created"; fail=1; }
grep -q "^ah_stream: sent $n, echoed $n of $n," "$tmp/client.out" || { echo "FAIL: not every datagram came back"; fail=1; }
grep -q "^ud_echo: received $n, echoed $n," "$tmp/server.out" || { echo "FAIL: ud_echo did not echo each of $n"; fail=1; }
[ $fail -eq 0 ] && echo "PASS: $n datagrams to ${#peers[@]} peers, every one echoed"
exit $fail
