#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Multicast between rdgram-mcast on the soft driver (host, on the lab's tap)
# and rdgram-mcast on the verbs driver over rxe (guest), both ways, one IPv4
# and one IPv6 group each (the guest's subscriber with --workers 2, a QP and
# a group per worker): every message arrives, in order, none
# duplicated, malformed or dropped on either side. Groups on rxe are joined
# through rdma_cm (IPv4) and without it (IPv6: rdma_cm refuses RoCEv2 IPv6
# groups; drivers/verbs/verbs_mcast.h). The Q_Key is rdma_cm's
# RDMA_UDP_QKEY (0x01234567), which the soft side is given. rxe's counters
# must show every message received and sent, and no send error.
# usage: mcast_rxe.sh RDGRAM_MCAST
set -u
. "$(dirname "$0")/lab.sh"
mc=$(realpath "${1:?usage: mcast_rxe.sh RDGRAM_MCAST}")
n=150   # messages per group and direction
rate=75 # per group per second: the guest is an emulator
groups=(--group 239.255.77.1 --group ff15::7701)
lab_init mcast_rxe
lab_keep "$mc"
eal_host=(-l 0 --no-huge --no-shconf -m 256 --no-pci --vdev="net_af_packet0,iface=$LAB_TAP"
	--log-level=lib.eal:error --log-level=pmd.net.af_packet:error)
soft=(--mode pub --port net_af_packet0 --address "$LAB_SOFT_IP" --address "$LAB_SOFT_IP6" --qkey 0x1234567
	--status-interval 0 "${groups[@]}")
# Waits (bounded) until FILE holds the line rdgram-mcast prints once it is
# set up (groups joined).
up() {
	for _ in $(seq 1 900); do
		grep -q '^rdgram-mcast: mode' "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}
lab_guest_script <<EOF
eal=(-l 0 --no-huge --no-shconf -m 256 --no-pci --log-level=lib.eal:error)
up() { for _ in \$(seq 1 900); do grep -q '^rdgram-mcast: mode' "\$1" 2>/dev/null && return 0; sleep 0.1; done; return 1; }
# 1. host -> guest: the guest subscribes with two workers (-l 0,1: the
# guest's two vCPUs), a QP each: worker 0 joins the IPv4 group, worker 1
# the IPv6 one.
stdbuf -oL '$mc' -l 0,1 "\${eal[@]:2}" -- --driver verbs --device rxe0 --mode sub ${groups[*]} --workers 2 \
	--idle-timeout 6 --duration 100 --status-interval 0 >\$LAB_RUN/guest_sub.out 2>&1 &
sub=\$!
up \$LAB_RUN/guest_sub.out && touch \$LAB_RUN/guest_sub.ready
wait \$sub
echo "exit \$?" >>\$LAB_RUN/guest_sub.out
# 2. guest -> host: the guest publishes once the host subscribes.
for _ in \$(seq 1 900); do [ -f \$LAB_RUN/host_sub.ready ] && break; sleep 0.1; done
'$mc' "\${eal[@]}" -- --driver verbs --device rxe0 --mode pub ${groups[*]} --count $n --rate $rate \
	--status-interval 0 >\$LAB_RUN/guest_pub.out 2>&1
echo "exit \$?" >>\$LAB_RUN/guest_pub.out
rdma statistic show link rxe0/1 >\$LAB_RUN/stat.out
EOF
lab_start
fail=0
# 1. host publishes.
for _ in $(seq 1 1200); do [[ -f $LAB_RUN/guest_sub.ready ]] && break; sleep 0.1; done
if [[ -f $LAB_RUN/guest_sub.ready ]]; then
	lab_host "$mc" "${eal_host[@]}" -- "${soft[@]}" --count $n --rate $rate >"$LAB_RUN/host_pub.out" 2>&1 ||
		{ echo "FAIL: the host's publisher failed"; fail=1; }
else
	echo "FAIL: the guest's subscriber never came up"
	fail=1
fi
# 2. host subscribes.
sub_args=("${soft[@]}")
sub_args[1]=sub
lab_host_bg stdbuf -oL "$mc" "${eal_host[@]}" -- "${sub_args[@]}" --idle-timeout 6 --duration 100 \
	>"$LAB_RUN/host_sub.out" 2>&1
hsub=$LAB_LAST_PID
up "$LAB_RUN/host_sub.out" && touch "$LAB_RUN/host_sub.ready"
wait "$hsub"
echo "exit $?" >>"$LAB_RUN/host_sub.out"
lab_wait || fail=1
for f in host_pub guest_sub guest_pub host_sub; do
	echo "--- $f"
	grep -v '^EAL\|TELEMETRY\|avx512' "$LAB_RUN/$f.out" 2>/dev/null
done
cat "$LAB_RUN/stat.out" 2>/dev/null
# Every message of both groups, nothing else, on both subscribers. The
# host's soft subscriber also sees the link's other traffic (the kernels'
# ICMPv6 and IGMP): drops for not being RoCE at all are not losses, any
# other reason is.
for f in guest_sub host_sub; do
	grep -q "^sub0: received=$((2 * n)) missing=0 dup=0 reordered=0 too_old=0 malformed=0 foreign=0 rx_drops=" \
		"$LAB_RUN/$f.out" || { echo "FAIL: $f did not get all $((2 * n)) messages intact"; fail=1; }
	if grep '^sub0: rx_drops by reason' "$LAB_RUN/$f.out" | tr ' ' '\n' | grep '=' |
		grep -v '^rx_not_ip=\|^rx_not_udp=\|^rx_not_roce='; then
		echo "FAIL: $f dropped RoCE datagrams (reasons above)"
		fail=1
	fi
	grep -q '^exit 0' "$LAB_RUN/$f.out" || { echo "FAIL: $f exited non-zero"; fail=1; }
done
# The guest's subscriber workers: each its own group, whole.
grep -q "^sub0/w0: lcore=[01] groups=239.255.77.1 received=$n missing=0 dup=0 " "$LAB_RUN/guest_sub.out" &&
	grep -q "^sub0/w1: lcore=[01] groups=ff15::7701 received=$n missing=0 dup=0 " "$LAB_RUN/guest_sub.out" ||
	{ echo "FAIL: the guest's two subscriber workers did not get $n messages of their own group each"; fail=1; }
for f in host_pub guest_pub; do
	grep -q "^pub: last_seq=$n groups=2 tx_pkts=$((2 * n)) tx_drops=0" "$LAB_RUN/$f.out" ||
		{ echo "FAIL: $f did not send all $((2 * n)) messages"; fail=1; }
done
# rxe's own count (rxe0 was made at boot: its counters start at 0): every
# message of the host's publisher received, every one of the guest's sent.
rstat() { grep -o " $1 [0-9]*" "$LAB_RUN/stat.out" 2>/dev/null | awk '{print $2}'; }
[[ $(rstat rcvd_pkts) == $((2 * n)) && $(rstat sent_pkts) == $((2 * n)) ]] ||
	{ echo "FAIL: rxe counted rcvd_pkts=$(rstat rcvd_pkts) sent_pkts=$(rstat sent_pkts), expected $((2 * n)) each"; fail=1; }
[[ $(rstat send_err) == 0 ]] || { echo "FAIL: rxe counted send errors"; fail=1; }
grep -q 'without rdma_cm' "$LAB_RUN/guest_sub.out" ||
	{ echo "FAIL: the guest's IPv6 group was not joined the rdma_cm-less way"; fail=1; }
[[ $fail == 0 ]] && echo "PASS: multicast soft <-> rxe, IPv4 and IPv6 groups, $((2 * n)) messages each way"
exit $fail
