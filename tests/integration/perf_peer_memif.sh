#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Two rdgram-perf processes over net_memif speaking the standard tools'
# protocols to each other (--oob-proto perftest, lat and bw; ud_pingpong):
# each side is the peer of the other exactly as of ib_send_lat/ib_send_bw
# or ibv_ud_pingpong (the soft driver resolves the peer's MAC by ARP, as
# against a real RoCE host). Passes when both exit 0, each counted every
# message of the other (from the QPN and GID the exchange gave, of the
# size expected), and nothing was dropped.
# usage: perf_peer_memif.sh RDGRAM_PERF CONFIG
set -u
perf=$1
cfg=$2
tmp=$(mktemp -d)
spid=
trap '[ -n "$spid" ] && kill $spid 2>/dev/null; rm -rf "$tmp"' EXIT
port=$((21000 + $$ % 4000))
fail=0
n=2000
s=256
run() { # proto test
	local proto=$1 test=$2 sock=$tmp/memif-$1-$2.sock
	local common=(-c "$cfg" --timeout 30 --status-interval 0 --oob "127.0.0.1:$port" --oob-proto "$proto"
		--test "$test" -n $n -s $s)
	"$perf" "${common[@]}" --mode server \
		--port "net_memif0,role=server,id=0,socket=$sock,socket-abstract=no" >"$tmp/server.out" 2>&1 &
	spid=$!
	for _ in $(seq 1 600); do [ -S "$sock" ] && break; sleep 0.1; done
	"$perf" "${common[@]}" --mode client \
		--port "net_memif0,role=client,id=0,socket=$sock,socket-abstract=no" >"$tmp/client.out" 2>&1
	local crc=$?
	wait $spid
	local src=$?
	spid=
	echo "=== $proto $test: client exit $crc, server exit $src"
	echo "--- client"; grep -v '^EAL\|^TELEMETRY' "$tmp/client.out"
	echo "--- server"; grep -v '^EAL\|^TELEMETRY' "$tmp/server.out"
	[ $crc -eq 0 ] && [ $src -eq 0 ] || { echo "FAIL: $proto $test: exit status"; fail=1; }
	local bytes=$((n * s)) who
	for who in client server; do
		local out=$tmp/$who.out peer=0x000101 gid=10.0.0.2
		[ $who = client ] && peer=0x000100 gid=10.0.0.1
		if [ "$test" = lat ] || [ $who = server ]; then
			grep -q "^ received: $n of $n messages, $bytes payload bytes, from QPN $peer GID $gid: all as expected$" "$out" ||
				{ echo "FAIL: $proto $test: the $who did not receive $n messages from $peer $gid"; fail=1; }
		fi
		if [ "$test" = lat ] || [ $who = client ]; then
			grep -q "^ sent: $n messages, $bytes payload bytes, to QPN $peer$" "$out" ||
				{ echo "FAIL: $proto $test: the $who did not send $n messages to $peer"; fail=1; }
		fi
		if grep -Eo ' (rx_|tx_)(not_|truncated|bad_|ip_fragment|dgid_|unknown_|chained_|control_full|stale_|too_long)[a-z_]*=[1-9][0-9]*' "$out"; then
			echo "FAIL: $proto $test: the $who dropped messages (counters above)"; fail=1
		fi
		grep -q "outside the data phase" "$out" && { echo "FAIL: $proto $test: datagrams outside the data phase"; fail=1; }
	done
	if [ "$proto" = perftest ]; then
		local row
		row=$(printf ' %-7s %-10s' $s $n)
		[ "$test" = bw ] && row=$(printf ' %-10s %-10s' $s $n)
		grep -q "^$row" "$tmp/client.out" && grep -q "^$row" "$tmp/server.out" ||
			{ echo "FAIL: $proto $test: the two tables disagree on $s bytes x $n"; fail=1; }
	fi
}
run perftest lat
run perftest bw
run ud_pingpong lat
exit $fail
