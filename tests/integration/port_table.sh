#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# One port table (docs/PORTS.md), written once, run unchanged by every app
# that opens a DPDK port: a [[port]] on one end of a net_memif pair, on
# VLAN 78, with an IPv4 and an IPv6 address. Each app runs with that file
# alone (everything else on its command line) against a peer on the other
# end, which has its own table, and must exchange datagrams:
#   rdgram-perf   server; a client pings it (latency test)
#   rdgram-fwd    reflects a rdgram-perf client's pings back
#   rdgram-coll   rank 0 of two processes (procs, TCP rendezvous)
#   rdgram-mcast  a subscriber; a publisher sends to a group
#   rdgram-verbs  ibv_devinfo shows the device, ibv_ud_pingpong runs on it
#   rdgram-ah     inspect: resolves the peer's IPv4 and IPv6 address by
#                 ARP/ND, sends each AH a datagram, which rdgram-fwd on the
#                 other end reflects back; storm: 1000 AHs to them, all ready
# Usage: port_table.sh PERF FWD COLL MCAST VERBS AH
set -u
. "$(dirname "$0")/lib.sh"
perf=$1 fwd=$2 coll=$3 mcast=$4 verbs=$5 ah=$6
tmp=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$tmp"' EXIT
fail=0
n=0

# A table per end; the socket is abstract (nothing on disk) and new for
# each case, so a case never meets the last one's server.
table() { # FILE NAME ROLE MAC ADDR4 ADDR6 SOCKET
  cat >"$1" <<EOF
[[port]]
name = "$2"
devargs = "net_memif0,role=$3,id=0,socket=$7"
mac = "$4"
addresses = ["$5", "$6"]
vlan = 78
EOF
}
new_case() {
  n=$((n + 1))
  sock="rdgpt-$$-$n"
  table "$tmp/port.toml" edge server 02:00:00:00:00:01 10.0.0.1 fd00::1 "$sock"
  table "$tmp/peer.toml" peer client 02:00:00:00:00:02 10.0.0.2 fd00::2 "$sock"
}
# The same table every time: the one under test is never edited.
same_table() {
  cmp -s <(sed 's/rdgpt-[0-9]*-[0-9]*/S/' "$tmp/port.toml") <(sed 's/rdgpt-[0-9]*-[0-9]*/S/' "$tmp/first.toml") ||
    { echo "FAIL: the port table changed"; fail=1; }
}
# Runs the app under test in the background (out: $tmp/app.out), waits
# until its memif socket is there, then the peer in the foreground. The
# two poll threads on CPUs of their own where there are two (each spins:
# on one CPU they take turns by the scheduler's slice).
cpu_app=(taskset -c 0) cpu_peer=(taskset -c 0)
[ "$(nproc)" -ge 2 ] && cpu_app=(taskset -c 1)
bg() { "$@" >"$tmp/app.out" 2>&1 & app=$!; pids+=("$app"); }
wait_memif() { # the server's abstract socket
  for _ in $(seq 1 600); do
    grep -q "@$sock" /proc/net/unix 2>/dev/null && return 0
    sleep 0.1
  done
  echo "FAIL: the memif server never listened"
  return 1
}
show() { echo "--- $1 (exit $2)"; sed 's/^/   /' "$3"; }
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }

new_case
cp "$tmp/port.toml" "$tmp/first.toml"
echo "--- the table"; cat "$tmp/port.toml"

# rdgram-perf: the table's port as the server's, a client on the peer's.
same_table
bg "${cpu_app[@]}" timeout 60 "$perf" -c "$tmp/port.toml" --mode server --test lat -n 2000 --timeout 30
wait_memif
"${cpu_peer[@]}" timeout 60 "$perf" -c "$tmp/peer.toml" --mode client --test lat -n 2000 --timeout 30 >"$tmp/peer.out" 2>&1
prc=$?
wait "$app"
arc=$?
if [ $prc -eq 0 ] && [ $arc -eq 0 ] && grep -q 't_typical\[usec\]' "$tmp/peer.out"; then
  ok "rdgram-perf server on the table: 2000 pings answered"
else
  bad "rdgram-perf"; show server $arc "$tmp/app.out"; show client $prc "$tmp/peer.out"
fi

# rdgram-fwd: reflects what a rdgram-perf client sends to its QP 0x100 (the
# default QP of a table without qps), until idle for 10 s.
new_case
same_table
bg "${cpu_app[@]}" timeout 100 "$fwd" -c "$tmp/port.toml" --idle-exit 10 --duration 90
wait_memif
"${cpu_peer[@]}" timeout 60 "$perf" -c "$tmp/peer.toml" --mode client --test lat -n 1000 --timeout 30 >"$tmp/peer.out" 2>&1
prc=$?
wait "$app"
arc=$?
if [ $prc -eq 0 ] && [ $arc -eq 0 ] && grep -q 't_typical\[usec\]' "$tmp/peer.out" &&
  grep -Eq 'reflected[ =:]+[1-9]' "$tmp/app.out"; then
  ok "rdgram-fwd on the table: reflected the client's pings"
else
  bad "rdgram-fwd"; show rdgram-fwd $arc "$tmp/app.out"; show client $prc "$tmp/peer.out"
fi

# rdgram-coll: two ranks, one process each, rank 0 on the table.
new_case
same_table
rv=$((20000 + $$ % 20000))
common=(--mode procs --ranks 2 --bootstrap tcp --rendezvous "127.0.0.1:$rv" --iters 20 --timeout 30)
bg timeout 60 "$coll" -c "$tmp/port.toml" "${common[@]}" --rank 0
wait_memif
timeout 60 "$coll" -c "$tmp/peer.toml" "${common[@]}" --rank 1 >"$tmp/peer.out" 2>&1
prc=$?
wait "$app"
arc=$?
if [ $prc -eq 0 ] && [ $arc -eq 0 ] && grep -q PASS "$tmp/app.out"; then
  ok "rdgram-coll rank 0 on the table: $(grep -m1 PASS "$tmp/app.out")"
else
  bad "rdgram-coll"; show "rank 0" $arc "$tmp/app.out"; show "rank 1" $prc "$tmp/peer.out"
fi

# rdgram-mcast: a subscriber on the table, a publisher on the peer's.
new_case
same_table
bg timeout 60 "$mcast" -c "$tmp/port.toml" --mode sub --group 239.1.1.1 --idle-timeout 3 --duration 50 \
  --status-interval 0
wait_memif
sleep 1 # the subscriber's IGMP report out, the link up both ways
timeout 60 "$mcast" -c "$tmp/peer.toml" --mode pub --group 239.1.1.1 -n 500 --rate 1000 --status-interval 0 \
  >"$tmp/peer.out" 2>&1
prc=$?
wait "$app"
arc=$?
got=$(sed -n 's/^sub0: received=\([0-9]*\).*/\1/p' "$tmp/app.out")
if [ $prc -eq 0 ] && [ $arc -eq 0 ] && [ "${got:-0}" -gt 0 ]; then
  ok "rdgram-mcast subscriber on the table: $(grep -m1 '^sub0: received' "$tmp/app.out")"
else
  bad "rdgram-mcast"; show subscriber $arc "$tmp/app.out"; show publisher $prc "$tmp/peer.out"
fi

# rdgram-ah: inspect on the table's port, to the peer's two addresses (two
# flow labels each: 4 AHs), one datagram per AH to rdgram-fwd's QP 0x100,
# which reflects it. A small AH table on the command line (the table is
# unchanged): the default 2^20 AVs take memory the case does not need.
new_case
same_table
bg "${cpu_app[@]}" timeout 60 "$ah" -c "$tmp/port.toml" inspect --to 10.0.0.2 --to fd00::2 --flows 2 --max-ah 4096 \
  --timeout 20
wait_memif
"${cpu_peer[@]}" timeout 60 "$fwd" -c "$tmp/peer.toml" --idle-exit 2 --duration 40 >"$tmp/peer.out" 2>&1
prc=$?
wait "$app"
arc=$?
dg=$(grep -m1 '^ datagrams:' "$tmp/app.out")
if [ $prc -eq 0 ] && [ $arc -eq 0 ] &&
  echo "$dg" | grep -q '4 to the peer.s QP 0x100 (one per AH), 4 handed to the AH client, 4 replies received' &&
  [ "$(grep -c 'reachable' "$tmp/app.out")" -eq 4 ] && grep -q 'the port gave .*: closed$' "$tmp/app.out" &&
  grep -Eq 'reflected 4,' "$tmp/peer.out"; then
  ok "rdgram-ah inspect on the table: 4 AHs resolved by ARP/ND,$(echo "$dg" | sed 's/^ datagrams://')"
else
  bad "rdgram-ah"; show rdgram-ah $arc "$tmp/app.out"; show rdgram-fwd $prc "$tmp/peer.out"
fi
new_case
same_table
bg "${cpu_app[@]}" timeout 60 "$ah" -c "$tmp/port.toml" storm 1000 --to 10.0.0.2 --to fd00::2 --max-ah 4096 \
  --timeout 20
wait_memif
"${cpu_peer[@]}" timeout 60 "$fwd" -c "$tmp/peer.toml" --idle-exit 2 --duration 40 >"$tmp/peer.out" 2>&1
prc=$?
wait "$app"
arc=$?
if [ $prc -eq 0 ] && [ $arc -eq 0 ] && grep -q 'ready in the destination cache: 1000 of 1000' "$tmp/app.out" &&
  grep -q 'the port gave .*: closed$' "$tmp/app.out" && grep -q 'ARP/ND replies sent 2' "$tmp/peer.out"; then
  ok "rdgram-ah storm on the table: 1000 AHs to 2 destinations resolved by ARP/ND, all ready"
else
  bad "rdgram-ah storm"; show rdgram-ah $arc "$tmp/app.out"; show rdgram-fwd $prc "$tmp/peer.out"
fi

# rdgram-verbs: the table's port is the verbs device "edge".
new_case
same_table
if command -v ibv_devinfo >/dev/null && command -v ibv_ud_pingpong >/dev/null; then
  timeout 60 "$verbs" -c "$tmp/port.toml" ibv_devinfo -d edge -v >"$tmp/app.out" 2>&1
  arc=$?
  if [ $arc -eq 0 ] && grep -q 'hca_id:.*edge' "$tmp/app.out" && grep -q 'GID\[  1\]:.*10\.0\.0\.1' "$tmp/app.out"; then
    ok "rdgram-verbs ibv_devinfo: device edge, GID 1 = 10.0.0.1"
  else
    bad "rdgram-verbs ibv_devinfo"; show ibv_devinfo $arc "$tmp/app.out"
  fi
  tp=$((30000 + $$ % 20000))
  bg timeout 60 "$verbs" -c "$tmp/port.toml" ibv_ud_pingpong -p $tp -d edge -g 1 -n 500
  for _ in $(seq 1 200); do ss -ltn 2>/dev/null | grep -q ":$tp " && break; sleep 0.05; done
  timeout 60 "$verbs" -c "$tmp/peer.toml" ibv_ud_pingpong -p $tp -d peer -g 1 -n 500 127.0.0.1 >"$tmp/peer.out" 2>&1
  prc=$?
  wait "$app"
  arc=$?
  if [ $prc -eq 0 ] && [ $arc -eq 0 ] && grep -q '^500 iters in' "$tmp/app.out"; then
    ok "rdgram-verbs ibv_ud_pingpong on the table: 500 iterations"
  else
    bad "rdgram-verbs ibv_ud_pingpong"; show server $arc "$tmp/app.out"; show client $prc "$tmp/peer.out"
  fi
else
  echo "SKIP (rdgram-verbs): ibv_devinfo or ibv_ud_pingpong missing (ibverbs-utils)"
fi

[ $fail -eq 0 ] && echo "PASS: one port table in every app" || echo "FAIL"
exit $fail
