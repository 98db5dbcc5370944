#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# rdgram-verbs and its library on bad input (issue: "Bad input"):
# - a config with a wrong key or value: one line with file:line:column and
#   the key, exit 2, the program never starts;
# - a port that does not start: one line naming the port and the reason, an
#   empty device list, nothing left behind (runtime directory, sockets);
# - a program that asks for RC, UC or an SRQ (rdma-core's own
#   ibv_rc_pingpong, ibv_uc_pingpong, ibv_srq_pingpong): one line naming
#   the verb, then the program's own error path, no crash;
# - a memif server killed with SIGKILL: the next run on the same socket
#   name works.
set -u
. "$(dirname "$0")/lib.sh"
verbs_setup "$1"
command -v ibv_rc_pingpong >/dev/null || { echo "SKIP: ibverbs-utils missing"; exit 77; }
out=$tmp/out
# -- configs --
bad() { # NAME EXPECTED-REGEX, config on stdin
  cat >"$tmp/$1.toml"
  "$RV" -c "$tmp/$1.toml" sh -c 'echo PROGRAM RAN' >"$out" 2>&1
  local rc=$?
  if [ $rc -eq 2 ] && ! grep -q 'PROGRAM RAN' "$out" && [ "$(wc -l <"$out")" -eq 1 ] && grep -Eq "$2" "$out"; then
    echo "ok: config $1: $(cat "$out")"
  else
    echo "FAIL: config $1: exit $rc, want 2 and one line matching /$2/:"; sed 's/^/    /' "$out"
    fails=$((fails + 1))
  fi
}
bad mtu '\.toml:5:7: key .port\[0\]\.mtu.: expected one of 256, 512, 1024, 2048, 4096, got 1000' <<EOT
[[port]]
name = "rdg0"
devargs = "net_ring0"
addresses = ["10.0.0.1"]
mtu = 1000
EOT
bad unknown_key '\.toml:4:1: unknown key .port\[0\]\.qps.' <<EOT
[[port]]
devargs = "net_ring0"
addresses = ["10.0.0.1"]
qps = [{ qpn = 2 }]
EOT
bad no_addresses "key 'port\[0\]\.addresses'" <<EOT
[[port]]
devargs = "net_ring0"
EOT
bad syntax '\.toml:1:' <<EOT
[[port]
EOT
bad no_port 'no \[\[port\]\]' <<EOT
[eal]
args = []
EOT
"$RV" -c "$tmp/none.toml" true >"$out" 2>&1
[ $? -eq 2 ] && echo "ok: a missing config: exit 2: $(head -n 1 "$out")" || { echo "FAIL: a missing config"; fails=$((fails + 1)); }
# -- a port that does not start: a memif client with no server --
cat >"$tmp/client.toml" <<EOT
[[port]]
name = "rdg1"
devargs = "net_memif1,role=client,socket=rdgv-$$-nobody"
addresses = ["10.0.0.2"]
EOT
timeout 30 "$RV" -c "$tmp/client.toml" sh -c 'ibv_devices; echo "devices exit $?"; echo "pid $$"' >"$out" 2>&1
pid=$(sed -n 's/^pid //p' "$out")
if expect "$out" '^rdgram-verbs: port rdg1: .*memif client needs its server end running' "a port that does not start: one line" &&
  [ "$(grep -c '^rdgram-verbs:' "$out")" -eq 1 ] && ! grep -q 'rdg1 ' "$out" && expect "$out" 'devices exit 0' "ibv_devices exits 0"; then
  if [ -n "$pid" ] && [ -e "/var/run/dpdk/rdgram-verbs-$pid" ]; then
    echo "FAIL: the failed start left /var/run/dpdk/rdgram-verbs-$pid"; fails=$((fails + 1))
  else
    echo "ok: a port that does not start: one line, no device, nothing left"
  fi
fi
# -- RC, UC, SRQ: refused with one line, the program's own error path --
cat >"$tmp/ring.toml" <<EOT
[[port]]
name = "rdg0"
devargs = "net_ring0"
addresses = ["10.0.0.1"]
EOT
for p in "ibv_rc_pingpong:ibv_create_qp\(IBV_QPT_RC\):Couldn't create QP" \
         "ibv_uc_pingpong:ibv_create_qp\(IBV_QPT_UC\):Couldn't create QP" \
         "ibv_srq_pingpong:ibv_create_srq:Couldn't create SRQ"; do
  IFS=: read -r prog verb msg <<<"$p"
  timeout 30 "$RV" -c "$tmp/ring.toml" "$prog" -d rdg0 -g 1 >"$out" 2>&1
  rc=$?
  if [ $rc -ge 1 ] && [ $rc -lt 124 ] && grep -Eq "^rdgram-verbs: $verb is not offered" "$out" && grep -q "$msg" "$out"; then
    echo "ok: $prog: refused, exit $rc: $(grep '^rdgram-verbs:' "$out")"
  else
    echo "FAIL: $prog: exit $rc:"; sed 's/^/    /' "$out"; fails=$((fails + 1))
  fi
done
# -- SIGKILL: the next run on the same memif socket works --
memif_pair k
next_port
timeout 30 "$RV" -c "$tmp/k-a.toml" ibv_ud_pingpong -p $PORT -d rdg0 -g 1 -n 100000000 >"$tmp/killed.out" 2>&1 &
kpid=$!
wait_listen $PORT || echo "(the killed server never listened)"
pkill -9 -f "ibv_ud_pingpong -p $PORT -d rdg0 -g 1 -n 100000000"
wait "$kpid" 2>/dev/null
next_port
run_pair "$tmp/k-a.toml" "$tmp/k-b.toml" 30 -- ibv_ud_pingpong -p $PORT -d rdg0 -g 1 -n 500 -- ibv_ud_pingpong -p $PORT -d rdg1 -g 1 -n 500 127.0.0.1
pair_ok "after a server killed with SIGKILL, the next pair on the same memif socket name"
finish
