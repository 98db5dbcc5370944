#!/usr/bin/env bash
# EFA-style receive attribution across two processes over net_memif
# (tests/integration/ahn_peer.cc): the sender has several source addresses
# and QPs (peers); the receiver's soft device reports ahns, its control
# thread creates an AH for each unknown sender and binds its ahn. Passes
# when every datagram arrived, every peer's first datagram was unknown and
# every peer was attributed afterwards, each address's first datagram
# carried 0xFFFF, one AH per address was created, and nothing was
# attributed to the wrong peer.
set -u
. "$(dirname "$0")/lib.sh"
peer=$1
addrs=${2:-4}
qps=${3:-2}
rounds=${4:-10}
tmp=$(mktemp -d)
rpid=
trap '[ -n "$rpid" ] && kill $rpid 2>/dev/null; rm -rf "$tmp"' EXIT
sock=$tmp/memif.sock
common=(--socket "$sock" --addrs "$addrs" --qps "$qps" --timeout 60)
timeout 90 "$peer" --role receiver "${common[@]}" >"$tmp/receiver.out" 2>&1 &
rpid=$!
# The receiver is the memif server: wait for its socket (a client that
# starts first does not retry).
wait_socket "$sock" || exit 1
timeout 90 "$peer" --role sender "${common[@]}" --rounds "$rounds" --gap-ms 30 >"$tmp/sender.out" 2>&1
s_rc=$?
wait $rpid
r_rc=$?
rpid=
echo "--- sender (exit $s_rc)"; cat "$tmp/sender.out"
echo "--- receiver (exit $r_rc)"; cat "$tmp/receiver.out"
fail=0
[ $s_rc -eq 0 ] || { echo "FAIL: sender exit $s_rc"; fail=1; }
[ $r_rc -eq 0 ] || { echo "FAIL: receiver exit $r_rc"; fail=1; }
line=$(grep '^ahn_peer: received' "$tmp/receiver.out")
[ -n "$line" ] || { echo "FAIL: no counts from the receiver"; exit 1; }
val() { echo "$line" | sed -n "s/.* $1 \([0-9/]*\).*/\1/p"; }
n=$((addrs * qps))
expect() { # name value
  local got; got=$(val "$1")
  [ "$got" = "$2" ] || { echo "FAIL: $1 is '$got', expected $2"; fail=1; }
}
expect received $((n * rounds))
expect expected $((n * rounds))
expect misattributed 0
expect peers "$n/$n"
expect attributed_peers "$n"
expect first_unknown "$n"
expect first_ffff "$addrs"
expect ahs_created "$addrs"
u=$(val unknown); a=$(val attributed)
[ -n "$u" ] && [ "$u" -ge "$n" ] || { echo "FAIL: fewer unknown datagrams ($u) than peers"; fail=1; }
[ -n "$a" ] && [ "$a" -gt 0 ] && [ $((u + a)) -eq $((n * rounds)) ] ||
  { echo "FAIL: unknown $u + attributed $a != $((n * rounds))"; fail=1; }
[ $fail -eq 0 ] && echo "PASS: $a of $((n * rounds)) datagrams attributed, $u unknown (first contact), none to the wrong peer"
exit $fail
