#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Interop of rdgram's libibverbs.so.1 with Linux's rxe: the unmodified
# ibv_ud_pingpong and ib_send_lat -c UD on the host, under rdgram-verbs
# (one port, the soft driver on net_af_packet over the lab's tap), against
# the same tools on rxe0 in the guest: the host serving and calling, IPv4
# and IPv6 GIDs. One guest boot for all cases.
#
# Each case checks: both tools exit 0 and report every iteration (the
# pingpong's "N iters in" and byte count, perftest's result row); each side
# learned the other's QPN and GID as the other printed them; rdgram-verbs'
# counters (RDGRAM_VERBS_STATS=1) show the tool's messages and no drop but
# other protocols' frames on the shared link; rxe's counters moved by
# exactly those messages, no error counter. Nothing timed here is a
# performance figure (TCG).
# usage: verbs_rxe.sh RDGRAM_VERBS LIBIBVERBS_SO
set -u
# The tap: the tools' TCP exchanges go through the host's kernel.
LAB_NET=tap
. "$(dirname "$0")/lab.sh"
RV=$(realpath "${1:?usage: verbs_rxe.sh RDGRAM_VERBS LIBIBVERBS_SO}")
[[ -r ${2:?usage: verbs_rxe.sh RDGRAM_VERBS LIBIBVERBS_SO} ]] || lab_fail "rdgram's libibverbs ($2) is not built"
# peer_cases.sh's guest side and its run loop; its rdgram-perf (PEER_PERF)
# only serves the verbs-* roles, which this test has none of.
PEER_PERF=$RV
# The host's ibv_ud_pingpong listens on 0.0.0.0 only (the first address
# getaddrinfo gives): the guest's tool connects over IPv4 in every case.
PEER_TCP6=0
# The host's tools do not retry their connect: each calls once the guest's
# tool listens.
PEER_WAIT_LISTEN=1
. "$LAB_DIR/peer_cases.sh"
for t in ibv_ud_pingpong ib_send_lat; do
	command -v $t >/dev/null || lab_skip "$t missing (tests/lab/install-deps.sh installs ibverbs-utils and perftest)"
done
lab_init verbs_rxe

n=500 s=64
pp=(ibv_ud_pingpong -d rxe0 -n $n -s $s)
lat=(ib_send_lat -c UD -d rxe0 -n $n -s $s)
# Roles are the host's: server (the guest's tool connects to the host's
# kernel address on the tap) or client.
#         name                            role   proto       fam test iters size guest tool
peer_case "ibv_ud_pingpong v4, host serves" server ud_pingpong v4 lat $n $s "${pp[@]}"
peer_case "ibv_ud_pingpong v4, host calls"  client ud_pingpong v4 lat $n $s "${pp[@]}"
peer_case "ibv_ud_pingpong v6, host serves" server ud_pingpong v6 lat $n $s "${pp[@]}"
peer_case "ibv_ud_pingpong v6, host calls"  client ud_pingpong v6 lat $n $s "${pp[@]}"
peer_case "ib_send_lat v4, host serves"     server perftest    v4 lat $n $s "${lat[@]}"
peer_case "ib_send_lat v4, host calls"      client perftest    v4 lat $n $s "${lat[@]}"
peer_case "ib_send_lat v6, host serves"     server perftest    v6 lat $n $s "${lat[@]}"
peer_case "ib_send_lat v6, host calls"      client perftest    v6 lat $n $s "${lat[@]}"

# The host's verbs device: rdg0 on the tap, GID 0 the link-local one, then
# 10.77.0.1 (index 1) and fd77::1 (index 2). MTU 2048: net_af_packet's
# frames are 2048 bytes (lab_host_port); the tools send 64.
RV_CFG=$LAB_RUN/rdgram-verbs.toml
cat >"$RV_CFG" <<EOF
[[port]]
name = "rdg0"
devargs = "$(lab_host_port)"
mac = "$PEER_MAC"
addresses = ["$LAB_SOFT_IP", "$LAB_SOFT_IP6"]
mtu = 2048
EOF

peer_host_cmd() {
	local role=$1 proto=$2 fam=$3 iters=$5 size=$6 gid=1
	[[ $fam == v6 ]] && gid=2
	PEER_CMD=(timeout -k 2 $((PEER_CASE_TIMEOUT + 5)) env RDGRAM_VERBS_STATS=1 "$RV" -c "$RV_CFG" --)
	case $proto in
	ud_pingpong) PEER_CMD+=(ibv_ud_pingpong -d rdg0 -g $gid -n "$iters" -s "$size") ;;
	perftest) PEER_CMD+=(ib_send_lat -c UD -d rdg0 -x $gid -n "$iters" -s "$size") ;;
	esac
	[[ $role == client ]] && PEER_CMD+=("$LAB_GUEST_IP")
}

# Both sides' view of one tool's exchange: "QPN GID" of its local and
# remote addresses (GIDs as the tool prints them).
pp_addr() { # FILE local|remote
	sed -n "s/.*$2 address: *LID 0x[0-9a-f]*, QPN \\(0x[0-9a-f]*\\),.*GID \\(.*\\)\$/\\1 \\2/p" "$1"
}
pt_addr() { # FILE local|remote
	local q g
	q=$(sed -n "s/^ *$2 address: LID [0-9a-f]* QPN \\(0x[0-9a-f]*\\) .*/\\1/p" "$1")
	g=$(grep -A1 "$2 address:" "$1" | sed -n 's/^ *GID: //p')
	echo "$q $g"
}

peer_check() {
	local i=$1 role=$2 proto=$3 fam=$4 test=$5 iters=$6 size=$7
	local h=$LAB_RUN/host$i.out g=$LAB_RUN/case$i.out grc hrc
	grc=$(cat "$LAB_RUN/case$i.rc" 2>/dev/null || echo none)
	hrc=$(cat "$LAB_RUN/host$i.rc" 2>/dev/null || echo none)
	echo "--- case $i: $PEER_CUR: the host's tool under rdgram-verbs (exit $hrc):"
	sed 's/^/    /' "$h"
	echo "--- the guest's tool (exit $grc):"
	sed 's/^/    /' "$g"
	[[ $grc == 0 ]] || peer_fail "the guest's tool exited $grc"
	[[ $hrc == 0 ]] || peer_fail "the host's tool exited $hrc"
	local gip=$LAB_GUEST_IP sip=$LAB_SOFT_IP
	[[ $fam == v6 ]] && gip=$LAB_GUEST_IP6 sip=$LAB_SOFT_IP6
	local f gl gr hl hr
	if [[ $proto == ud_pingpong ]]; then
		for f in "$h" "$g"; do
			grep -q "^$iters iters in " "$f" || peer_fail "$(basename "$f" .out): no '$iters iters in'"
			grep -q "^$((iters * size * 2)) bytes in " "$f" ||
				peer_fail "$(basename "$f" .out): did not move $((iters * size * 2)) bytes"
		done
		# inet_ntop's text of the GIDs: ::ffff:a.b.c.d for IPv4.
		[[ $fam == v4 ]] && gip=::ffff:$gip sip=::ffff:$sip
		gl=$(pp_addr "$g" local) gr=$(pp_addr "$g" remote) hl=$(pp_addr "$h" local) hr=$(pp_addr "$h" remote)
	else
		local row
		row=$(printf ' %-7s %-10s' "$size" "$iters")
		grep -q "^$row" "$g" || peer_fail "the guest's table has no row for $size bytes x $iters"
		grep -q "^$row" "$h" || peer_fail "the host's table has no row for $size bytes x $iters"
		gip=$(perftest_gid "$gip") sip=$(perftest_gid "$sip")
		gl=$(pt_addr "$g" local) gr=$(pt_addr "$g" remote) hl=$(pt_addr "$h" local) hr=$(pt_addr "$h" remote)
	fi
	[[ ${gl#* } == "$gip" ]] || peer_fail "the guest's own GID is '${gl#* }', not $gip"
	[[ ${hl#* } == "$sip" ]] || peer_fail "the host's own GID is '${hl#* }', not $sip"
	[[ $gr == "$hl" ]] || peer_fail "the guest learned '$gr', the host is '$hl'"
	[[ $hr == "$gl" ]] || peer_fail "the host learned '$hr', the guest is '$gl'"
	# rdgram-verbs' counters: the tool's messages each way, and only
	# other protocols' frames dropped (the tap carries the TCP exchange,
	# ARP, ND).
	local ctr bad= rx= tx=
	ctr=$(awk '/^rdgram-verbs: rdg0 counters:/ { on = 1; next } on && /^  [a-z0-9_]+ +[0-9]+  / { print $1 "=" $2; next } { on = 0 }' "$h")
	[[ -n $ctr ]] || peer_fail "rdgram-verbs printed no counters"
	for kv in $ctr; do
		case ${kv%%=*} in
		rx_pkts) rx=${kv#*=} ;;
		tx_pkts) tx=${kv#*=} ;;
		rx_bytes | tx_bytes | rx_to_control | tx_control | rx_not_udp | rx_not_ip | rx_not_roce) ;;
		*) bad+=" $kv" ;;
		esac
	done
	[[ -z $bad ]] || peer_fail "rdgram-verbs dropped or missed:$bad"
	[[ $rx == "$iters" && $tx == "$iters" ]] ||
		peer_fail "rdgram-verbs' queue counted rx_pkts=$rx tx_pkts=$tx, expected $iters each"
	# rxe: the guest sent what the host received and received what it sent.
	local b=$LAB_RUN/case$i.before a=$LAB_RUN/case$i.after k d
	if [[ -s $b && -s $a ]]; then
		for k in sent_pkts rdma_sends rcvd_pkts rdma_recvs; do
			d=$(($(rxe_stat "$a" $k) - $(rxe_stat "$b" $k)))
			[[ $d == "$iters" ]] || peer_fail "rxe $k moved by $d, not $iters"
		done
		for k in send_err link_downed duplicate_request out_of_seq_request rcvd_seq_err; do
			d=$(($(rxe_stat "$a" $k) - $(rxe_stat "$b" $k)))
			[[ $d == 0 ]] || peer_fail "rxe $k moved by $d"
		done
		echo "    rxe: $(tr -s ' ' <"$a" | cut -d' ' -f1-6)"
	else
		peer_fail "no rxe counters from the guest"
	fi
}

peer_run
