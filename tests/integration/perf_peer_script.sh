#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# rdgram-perf --oob-proto perftest|ud_pingpong against a scripted TCP peer
# (perf_peer_script.py) that departs from the tools' exchange: an old
# version, another tool's exchange, a GID family or MTU mismatch, a peer
# that stops or closes mid-exchange. Each must end rdgram-perf with a
# non-zero exit, within its timeout, and exactly one "rdgram-perf:" error
# line that names the problem. (The soft driver on net_null: no datagram
# goes anywhere; bw-lost runs the whole exchange around a data phase that
# gets nothing, which must end when the peer moves on, not at the timeout.)
# usage: perf_peer_script.sh RDGRAM_PERF CONFIG
set -u
perf=$1
cfg=$2
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
ppid_=
trap '[ -n "$ppid_" ] && kill $ppid_ 2>/dev/null; rm -rf "$tmp"' EXIT
port=$((25000 + $$ % 4000))
fail=0
# scenario, rdgram-perf's role, its proto, -s, what the error line must say
check() {
	local scenario=$1 role=$2 proto=$3 size=$4 want=$5 prole=server
	[ "$role" = server ] && prole=client
	port=$((port + 1))
	python3 "$here/perf_peer_script.py" "$scenario" $prole $port &
	ppid_=$!
	[ $prole = server ] && sleep 0.3
	local t0=$SECONDS
	local test=lat
	[ "$scenario" = bw-lost ] && test=bw
	"$perf" -c "$cfg" --mode "$role" --oob "127.0.0.1:$port" --oob-proto "$proto" --test $test -n 10 -s "$size" \
		--timeout 3 --status-interval 0 --port net_null0 >"$tmp/out" 2>"$tmp/err"
	local rc=$? dt=$((SECONDS - t0)) prc
	if [ "$scenario" = bw-lost ]; then
		wait $ppid_
		prc=$?
		[ $prc = 0 ] || { echo "FAIL: $scenario: the peer's exchange did not end well ($prc)"; fail=1; }
	fi
	kill $ppid_ 2>/dev/null
	wait $ppid_ 2>/dev/null
	ppid_=
	local lines
	# The start-up line about live capture (app_start.cc: how to capture,
	# on a machine with free hugepages) is not an error line.
	grep -v '^rdgram-perf: capture' "$tmp/err" >"$tmp/err.lines"
	lines=$(grep -c '^rdgram-perf:' "$tmp/err.lines")
	echo "=== $scenario (rdgram-perf $role, $proto): exit $rc after ${dt}s"
	grep '^rdgram-perf:' "$tmp/err.lines"
	[ $rc -ne 0 ] || { echo "FAIL: $scenario: exit 0"; fail=1; }
	[ "$lines" = 1 ] || { echo "FAIL: $scenario: $lines error lines, not one"; cat "$tmp/err"; fail=1; }
	grep '^rdgram-perf:' "$tmp/err.lines" | grep -qF -- "$want" || { echo "FAIL: $scenario: the line does not say '$want'"; fail=1; }
	[ $dt -le 6 ] || { echo "FAIL: $scenario: took ${dt}s with --timeout 3"; fail=1; }
}
check old-version client perftest 64 "older than 5.70"
check old-version server perftest 64 "older than 5.70"
check stop-mid-version client perftest 64 "stopped in the middle of the version exchange (8 of 16 bytes)"
check stop-mid-keys server perftest 64 "stopped in the middle of the key exchange (50 of 108 bytes)"
check close-mid-exchange client perftest 64 "closed the connection during the MTU exchange (1 of 2 bytes)"
check gid-family client perftest 64 "GID types differ"
check gid-family server perftest 64 "GID types differ"
check small-mtu client perftest 512 "size 512 is above the MTU both sides support, 256"
check speaks-ud-pingpong server perftest 64 "it speaks ibv_ud_pingpong's exchange"
check speaks-perftest server ud_pingpong 64 "it speaks perftest's exchange"
check pp-no-gid server ud_pingpong 64 "the peer sent no GID"
check pp-no-gid client ud_pingpong 64 "the peer sent no GID"
# The data never arrives: rdgram-perf stops when the sender's closing
# hand-shake shows, says what was lost, and closes the exchange.
check bw-lost server perftest 64 "10 of its 10 messages never arrived"
# Bad settings: refused before anything starts.
"$perf" -c "$cfg" --mode client --oob 127.0.0.1:1 --oob-proto perftest --port net_null0 >/dev/null 2>"$tmp/err"
rc=$?
[ $rc = 2 ] && grep -q "one test per connection" "$tmp/err" || { echo "FAIL: --test both with perftest: exit $rc"; cat "$tmp/err"; fail=1; }
"$perf" -c "$cfg" --mode client --oob-proto ud_pingpong --port net_null0 >/dev/null 2>"$tmp/err"
rc=$?
[ $rc = 2 ] && grep -q "needs --oob" "$tmp/err" || { echo "FAIL: --oob-proto without --oob: exit $rc"; cat "$tmp/err"; fail=1; }
exit $fail
