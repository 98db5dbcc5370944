#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# rdgram's soft driver (host, on the lab's tap) against rxe (guest): per
# address family, good datagrams with one of each kind rxe must drop among
# them (wrong ICRC, Q_Key, P_Key, destination QPN); the guest's verbs_peer
# receives the good ones and answers each on an AH it derives from the
# completion (the reply path on rxe, to a sender rxe had to resolve by ARP
# and ND); the host checks every answer byte for byte. Then what rxe counted:
# rcvd_pkts (good only), the port's P_Key and Q_Key violation counters, and
# the kernel's "bad ICRC" lines.
# The guest's NIC is on the lab's tap, or with LAB_NET=vhost on vhost-user
# (DPDK's net_vhost on the host side: no kernel networking there).
# usage: soft_rxe.sh LAB_SOFT_PEER LAB_VERBS_PEER
set -u
. "$(dirname "$0")/lab.sh"
soft=$(realpath "${1:?usage: soft_rxe.sh LAB_SOFT_PEER LAB_VERBS_PEER}")
verbs=$(realpath "${2:?usage: soft_rxe.sh LAB_SOFT_PEER LAB_VERBS_PEER}")
n=12 # good datagrams per family
lab_init "soft_rxe_$LAB_NET"
lab_keep "$soft" "$verbs"
lab_guest_script <<EOF
rdma statistic show link rxe0/1 >\$LAB_RUN/stat.before
timeout 120 '$verbs' --dir \$LAB_RUN --expect $((2 * n)) --echo --timeout 90 >\$LAB_RUN/verbs_peer.out 2>&1
rc=\$?
rdma statistic show link rxe0/1 >\$LAB_RUN/stat.after
dmesg >\$LAB_RUN/dmesg.out
exit \$rc
EOF
# The host's side first: with vhost-user it is the socket's server.
lab_host_bg "$soft" --port "$(lab_host_port)" --mac 02:00:00:77:00:01 --ip4 "$LAB_SOFT_IP" --ip6 "$LAB_SOFT_IP6" \
	--peer-mac "$LAB_GUEST_MAC" --peer4 "$LAB_GUEST_IP" --peer6 "$LAB_GUEST_IP6" \
	--ready "$LAB_RUN/verbs_peer.ready" --count $n --bad --echo --timeout 120 >"$LAB_RUN/soft_peer.out" 2>&1
speer=$LAB_LAST_PID
lab_start
lab_wait
grc=$?
wait "$speer"
src=$?
echo "--- host: soft_peer (exit $src)"
cat "$LAB_RUN/soft_peer.out"
echo "--- guest: verbs_peer (guest.sh exit $grc)"
cat "$LAB_RUN/verbs_peer.out" 2>/dev/null
fail=0
[[ $src == 0 ]] || { echo "FAIL: soft_peer exit $src"; fail=1; }
[[ $grc == 0 ]] || { echo "FAIL: the guest side failed"; fail=1; }
out=$LAB_RUN/verbs_peer.out
[[ -f $out ]] || lab_fail "verbs_peer did not run in the guest"
good=$(grep -c '^rx .*tag=6' "$out")
bad=$(grep -c '^rx .*tag=b' "$out")
[[ $good == $((2 * n)) ]] || { echo "FAIL: rxe delivered $good good datagrams, expected $((2 * n))"; fail=1; }
[[ $bad == 0 ]] || { echo "FAIL: rxe delivered $bad datagrams it should have dropped"; fail=1; }
for fam in "$LAB_SOFT_IP" "$LAB_SOFT_IP6"; do
	k=$(grep '^rx .*tag=6' "$out" | grep -c "sgid=$fam ")
	[[ $k == "$n" ]] || { echo "FAIL: $k datagrams from $fam, expected $n"; fail=1; }
done
# What rxe counted: good datagrams received and the echoes sent.
stat() { grep -o " $2 [0-9]*" "$LAB_RUN/$1" | awk '{print $2}'; }
if [[ -f $LAB_RUN/stat.after ]]; then
	rcvd=$(($(stat stat.after rcvd_pkts) - $(stat stat.before rcvd_pkts)))
	sent=$(($(stat stat.after sent_pkts) - $(stat stat.before sent_pkts)))
	echo "rxe: rcvd_pkts +$rcvd, sent_pkts +$sent"
	[[ $rcvd == $((2 * n)) ]] || { echo "FAIL: rxe's rcvd_pkts grew by $rcvd, expected $((2 * n)) (the bad ones must not count)"; fail=1; }
	[[ $sent == $((2 * n)) ]] || { echo "FAIL: rxe's sent_pkts grew by $sent, expected $((2 * n)) echoes"; fail=1; }
fi
grep -q 'port bad_pkey_cntr+2 qkey_viol_cntr+2' "$out" ||
	{ echo "FAIL: rxe's port should count 2 P_Key and 2 Q_Key violations: $(grep '^port' "$out")"; fail=1; }
icrc=$(grep -ci 'icrc' "$LAB_RUN/dmesg.out" 2>/dev/null)
echo "rxe: kernel log lines about the ICRC: ${icrc:-0}"
grep -i 'icrc\|qkey\|pkey' "$LAB_RUN/dmesg.out" 2>/dev/null | head -10
grep -q 'echoed 24' "$out" || { echo "FAIL: the guest did not echo every datagram"; fail=1; }
[[ $fail == 0 ]] && echo "PASS: soft driver <-> rxe: $((2 * n)) good datagrams each way, 8 bad ones dropped by rxe"
exit $fail
