# SPDX-License-Identifier: BSD-3-Clause
# rdgram-perf on the host (soft driver on net_af_packet over the lab's tap)
# as the peer of a standard tool in the guest (rxe0): perftest's
# ib_send_lat / ib_send_bw -c UD, or ibv_ud_pingpong. Sourced by
# tests/lab/perftest.sh and tests/lab/ud_pingpong.sh after lab.sh:
#
#   peer_case NAME ROLE PROTO FAMILY TEST ITERS SIZE GUEST_TOOL...
#       one case: ROLE is rdgram-perf's (server: it listens on the host's
#       tap address, the guest's tool connects; client: the guest's tool
#       listens, rdgram-perf connects); FAMILY v4|v6 picks the GIDs (and
#       for ud_pingpong with rdgram-perf serving on v6, the TCP family);
#       GUEST_TOOL is the guest's command line without the server address
#       and GID index (added here)
#       ROLE verbs-server|verbs-client: both ends in the guest, rdgram-perf
#       on the verbs driver over rxe0 (IPv4 GID, TCP over the guest's
#       loopback); these need this tree's binary to run on the guest's CPU
#       (PEER_CPU_ISA, meson's cpu_instruction_set: skipped for a native
#       build on an AVX-512 host, as the guest has none)
#   peer_run                 boots the guest, runs every case in order
#                            (one boot), checks each, exits 0 when all passed
#   peer_host_cmd, peer_check  the host side's command and the checks of one
#                            case: a test whose host side is not rdgram-perf
#                            (verbs_rxe.sh: the tools under rdgram-verbs)
#                            redefines both after sourcing this file
#
# Each case checks, on both sides: exit status; message counts and payload
# bytes (rdgram-perf's "sent:" / "received: ... all as expected" lines and
# perftest's table rows); the QPNs and GIDs each side learned against what
# the other printed as its own; rdgram-perf's drop counters (only frames
# of other protocols on the shared link may be dropped: rx_not_udp,
# rx_not_ip, rx_not_roce); rxe's counters in the guest (rdma statistic,
# before and after: sent_pkts/rcvd_pkts moved by exactly the messages the
# tool sent/received, no error counter moved). Nothing timed here is a
# performance figure (TCG).

PEER_PERF=${PEER_PERF:?set PEER_PERF to rdgram-perf}
# The RoCE addresses (the TCP exchange always uses the lab's own, LAB_*):
# by default the lab's; a VLAN test (vlan_rxe.sh) sets PEER_VLAN and the
# VLAN's addresses, and boots the guest with rxe0 on eth0.PEER_VLAN.
PEER_VLAN=${PEER_VLAN:-}
PEER_SOFT_IP4=${PEER_SOFT_IP4:-$LAB_SOFT_IP}
PEER_SOFT_IP6=${PEER_SOFT_IP6:-$LAB_SOFT_IP6}
PEER_GUEST_IP4=${PEER_GUEST_IP4:-$LAB_GUEST_IP}
PEER_GUEST_IP6=${PEER_GUEST_IP6:-$LAB_GUEST_IP6}
PEER_UNTAGGED_IP4=${PEER_UNTAGGED_IP4:-$PEER_SOFT_IP4} # the client-untagged case's
PEER_UNTAGGED_IP6=${PEER_UNTAGGED_IP6:-$PEER_SOFT_IP6}
PEER_NAMES=()
PEER_ARGS=()
PEER_QPN=0x000100 # rdgram-perf's QPN (the config's)
PEER_MAC=02:00:00:77:00:01
PEER_CASE_TIMEOUT=${PEER_CASE_TIMEOUT:-45} # seconds per case, each side
PEER_NEG_TIMEOUT=${PEER_NEG_TIMEOUT:-20}   # a case that must not get through (client-untagged)
# ud_pingpong served on the host for a v6 case: the guest's tool connects
# to the host's IPv6 address (rdgram-perf listens on both families). 0: to
# its IPv4 one, for a host side that is ibv_ud_pingpong itself, which binds
# the first address getaddrinfo gives it, 0.0.0.0.
PEER_TCP6=${PEER_TCP6:-1}
# 1: the host side, calling, connects only once the guest's tool listens
# (the guest says so: listen.N in the run directory). rdgram-perf retries
# its connect; ibv_ud_pingpong and perftest give up at once.
PEER_WAIT_LISTEN=${PEER_WAIT_LISTEN:-0}

# Cases with rdgram-perf in the guest can run: this tree's binaries are
# built for a CPU the guest's TCG "max" CPU emulates (no AVX-512).
peer_guest_binaries_ok() {
	! { [[ ${PEER_CPU_ISA:-native} == native ]] && grep -qw avx512f /proc/cpuinfo; }
}

peer_case() {
	if [[ $2 == verbs-* ]] && ! peer_guest_binaries_ok; then
		echo "SKIP case [$1]: rdgram-perf would run in the guest, and this tree is built for this host's CPU (AVX-512); a -Dcpu_instruction_set=generic tree runs it"
		return
	fi
	PEER_NAMES+=("$1")
	local q
	printf -v q '%q ' "$@"
	PEER_ARGS+=("$q")
}

# The host side's config for one family (rdgram-perf's address, MAC, QPN).
# MTU 2048: net_af_packet needs mbufs with room for its 2048-byte frames;
# the exchange then agrees on rxe's smaller one (1024 on a 1500 link).
# With PEER_VLAN, the port is on that VLAN unless UNTAGGED is given (the
# case that checks an untagged port and a tagged rxe do not talk).
peer_config() {
	local fam=$1 untagged=${2:-} f=$LAB_RUN/rdgram-$1${2:+-untagged}.toml addr=$PEER_SOFT_IP4 vlan=
	[[ $fam == v6 ]] && addr=$PEER_SOFT_IP6
	[[ -n $PEER_VLAN && -z $untagged ]] && vlan="vlan = $PEER_VLAN"
	# An address of its own: the guest's kernel knows the tagged one's MAC
	# from the cases before, and would not ask (its ARP/ND is what the
	# untagged port must see and count).
	[[ -n $untagged ]] && addr=$PEER_UNTAGGED_IP4 && [[ $fam == v6 ]] && addr=$PEER_UNTAGGED_IP6
	cat >"$f" <<EOF
[port]
mtu = 2048
$vlan
[server]
mac = "$PEER_MAC"
address = "$addr"
qpn = $PEER_QPN
lcores = "1"
[client]
mac = "$PEER_MAC"
address = "$addr"
qpn = $PEER_QPN
lcores = "1"
EOF
	echo "$f"
}

# An address as sysfs prints a GID (IPv4-mapped for IPv4).
sysfs_gid() {
	python3 -c 'import ipaddress, sys
a = ipaddress.ip_address(sys.argv[1])
g = ipaddress.IPv6Address("::ffff:" + sys.argv[1]) if a.version == 4 else a
print(g.exploded)' "$1"
}

# The guest's script: the GID indexes of the guest's RoCE addresses
# (10.77.0.2 and fd77::2, or PEER_GUEST_IP4/6), then each case when the host
# says go (a file in the run directory).
peer_guest_script() {
	local i n=${#PEER_NAMES[@]}
	{
		sed -e "s/PEER_SYSFS_GID4/$(sysfs_gid "$PEER_GUEST_IP4")/" \
			-e "s/PEER_SYSFS_GID6/$(sysfs_gid "$PEER_GUEST_IP6")/" <<'EOF'
gid_of() { # the RoCE v2 GID index of address $1 (as sysfs prints it)
	local i
	for i in $(seq 0 15); do
		[[ $(cat /sys/class/infiniband/rxe0/ports/1/gids/$i 2>/dev/null) == "$1" &&
			$(cat /sys/class/infiniband/rxe0/ports/1/gid_attrs/types/$i 2>/dev/null) == "RoCE v2" ]] &&
			{ echo $i; return; }
	done
	echo none
}
G4=$(gid_of PEER_SYSFS_GID4)
G6=$(gid_of PEER_SYSFS_GID6)
echo "$G4 $G6" >$LAB_RUN/gids
waitfor() { for _ in $(seq 1 1200); do [[ -f $LAB_RUN/$1 ]] && return 0; sleep 0.05; done; return 1; }
listening() { # PORT PID: until something listens on PORT (while PID lives)
	for _ in $(seq 1 1200); do
		ss -Hltn "sport = :$1" | grep -q . && return 0
		kill -0 "$2" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}
cat >$LAB_RUN/verbs-guest.toml <<EOT
[perf]
driver = "verbs"
[rdma]
device = "rxe0"
gid_index = $G4
EOT
guest_pair() { # N TIMEOUT ROLE PROTO TEST ITERS SIZE RDGRAM_PERF TOOL...: both ends here
	local n=$1 t=$2 role=${3#verbs-} proto=$4 test=$5 iters=$6 size=$7 perf=$8 p
	shift 8
	waitfor go.$n || { echo "the host never said go" >$LAB_RUN/case$n.out; touch $LAB_RUN/case$n.done; return; }
	rdma statistic show link rxe0/1 >$LAB_RUN/case$n.before
	local cmd=(timeout -k 2 $t "$perf" -c $LAB_RUN/verbs-guest.toml --mode $role --oob 127.0.0.1:18515
		--oob-proto $proto --test $test -n $iters -s $size --timeout $((t - 5)) --status-interval 0)
	if [[ $role == server ]]; then
		"${cmd[@]}" >$LAB_RUN/host$n.out 2>&1 &
		p=$!
		listening 18515 $p
		timeout -k 2 $t "$@" 127.0.0.1 >$LAB_RUN/case$n.out 2>&1
		echo $? >$LAB_RUN/case$n.rc
		wait $p
		echo $? >$LAB_RUN/host$n.rc
	else
		timeout -k 2 $t "$@" >$LAB_RUN/case$n.out 2>&1 &
		p=$!
		listening 18515 $p
		"${cmd[@]}" >$LAB_RUN/host$n.out 2>&1
		echo $? >$LAB_RUN/host$n.rc
		wait $p
		echo $? >$LAB_RUN/case$n.rc
	fi
	rdma statistic show link rxe0/1 >$LAB_RUN/case$n.after
	touch $LAB_RUN/case$n.done
}
guest_case() { # N TIMEOUT CMD...
	local n=$1 t=$2
	shift 2
	waitfor go.$n || { echo "the host never said go" >$LAB_RUN/case$n.out; touch $LAB_RUN/case$n.done; return; }
	rdma statistic show link rxe0/1 >$LAB_RUN/case$n.before
	timeout -k 2 $t "$@" >$LAB_RUN/case$n.out 2>&1
	echo $? >$LAB_RUN/case$n.rc
	rdma statistic show link rxe0/1 >$LAB_RUN/case$n.after
	touch $LAB_RUN/case$n.done
}
guest_serve() { # N TIMEOUT CMD...: guest_case for a tool that listens; listen.N once it does
	local n=$1 t=$2 p
	shift 2
	waitfor go.$n || { echo "the host never said go" >$LAB_RUN/case$n.out; touch $LAB_RUN/case$n.done; return; }
	rdma statistic show link rxe0/1 >$LAB_RUN/case$n.before
	timeout -k 2 $t "$@" >$LAB_RUN/case$n.out 2>&1 &
	p=$!
	listening 18515 $p && touch $LAB_RUN/listen.$n
	wait $p
	echo $? >$LAB_RUN/case$n.rc
	rdma statistic show link rxe0/1 >$LAB_RUN/case$n.after
	touch $LAB_RUN/case$n.done
}
EOF
		for ((i = 0; i < n; i++)); do
			eval "set -- ${PEER_ARGS[$i]}"
			local role=$2 proto=$3 fam=$4 test=$5 iters=$6 size=$7
			shift 7
			local tool=("$@") gvar='$G4' addr=
			[[ $fam == v6 ]] && gvar='$G6'
			case $proto in
			perftest) tool+=(-x "$gvar") ;;
			ud_pingpong) tool+=(-g "$gvar") ;;
			esac
			if [[ $role == verbs-* ]]; then
				echo "guest_pair $i $((PEER_CASE_TIMEOUT + 15)) $role $proto $test $iters $size $PEER_PERF ${tool[*]}"
				continue
			fi
			if [[ $role == client-untagged ]]; then
				# Nothing will reach it: bounded well below the others.
				echo "guest_serve $i $PEER_NEG_TIMEOUT ${tool[*]}"
			elif [[ $role == server ]]; then # the guest's tool is the client
				addr=$LAB_HOST_IP
				[[ $proto == ud_pingpong && $fam == v6 && $PEER_TCP6 == 1 ]] && addr=$LAB_HOST_IP6
				tool+=("$addr")
				echo "guest_case $i $PEER_CASE_TIMEOUT ${tool[*]}"
			else
				echo "guest_serve $i $PEER_CASE_TIMEOUT ${tool[*]}"
			fi
		done
		echo "exit 0"
	} | lab_guest_script
}

# The value of key in rxe's "rdma statistic" line of file f.
rxe_stat() {
	awk -v k="$2" '{ for (i = 1; i < NF; i++) if ($i == k) { print $(i + 1); exit } }' "$1"
}

# An address as perftest prints its GID: the 16 bytes in %02d (PERF_GID_FMT).
perftest_gid() {
	python3 -c 'import ipaddress, sys
a = ipaddress.ip_address(sys.argv[1])
g = ipaddress.IPv6Address("::ffff:" + sys.argv[1]) if a.version == 4 else a
print(":".join("%02d" % x for x in g.packed))' "$1"
}

PEER_FAILS=0
peer_fail() {
	echo "  FAIL [$PEER_CUR]: $*"
	PEER_FAILS=$((PEER_FAILS + 1))
}

# Checks case i after both sides ended.
peer_check() {
	local i=$1 role=$2 proto=$3 fam=$4 test=$5 iters=$6 size=$7
	local h=$LAB_RUN/host$i.out g=$LAB_RUN/case$i.out
	if [[ $role == client-untagged ]]; then
		peer_check_untagged "$@"
		return
	fi
	local grc hrc
	grc=$(cat "$LAB_RUN/case$i.rc" 2>/dev/null || echo none)
	hrc=$(cat "$LAB_RUN/host$i.rc" 2>/dev/null || echo none)
	echo "--- case $i: $PEER_CUR: rdgram-perf (exit $hrc):"
	grep -v -e '^EAL' -e '^TELEMETRY' -e '^$' "$h" | sed 's/^/    /'
	echo "--- guest's tool (exit $grc):"
	sed 's/^/    /' "$g"
	# perftest in the guest times itself with a CPU frequency it estimates
	# by regression (get_cpu_mhz); under TCG the fit sometimes fails
	# ("Correlation coefficient r^2 ... < 0.9", "Can't produce a report"):
	# the tool then ends without its table and without the closing
	# hand-shake. Only that is forgiven: the datagrams are still checked by
	# rdgram-perf's own count and by rxe's counters below.
	local clock=
	if grep -q "Can't produce a report" "$g" && grep -q 'Correlation coefficient r^2' "$g"; then
		clock=1
		echo "    (the guest's perftest could not estimate its CPU clock under TCG; its table and closing hand-shake are not checked, the counters are)"
	fi
	[[ $grc == 0 || -n $clock ]] || peer_fail "the guest's tool exited $grc"
	[[ $hrc == 0 ]] || { [[ -n $clock ]] && grep -q 'closing hand-shake' "$h"; } || peer_fail "rdgram-perf exited $hrc"
	local bytes=$((iters * size)) gip=$PEER_GUEST_IP4 sip=$PEER_SOFT_IP4 ourq=$PEER_QPN in_guest=
	[[ $fam == v6 ]] && gip=$PEER_GUEST_IP6 sip=$PEER_SOFT_IP6
	if [[ $role == verbs-* ]]; then # rdgram-perf on rxe0 too: its GID, the device's QPN
		in_guest=1
		role=${role#verbs-}
		sip=$gip
		ourq=$(sed -n 's/.*, QPN \(0x[0-9a-f]*\), GID .*: \(waiting for\|connecting to\).*/\1/p' "$h")
	fi
	# The guest's QPN as it printed it, and what it learned of ours.
	local gqpn rqpn
	if [[ $proto == ud_pingpong ]]; then
		gqpn=$(sed -n 's/.*local address: *LID 0x[0-9a-f]*, QPN \(0x[0-9a-f]*\),.*/\1/p' "$g")
		rqpn=$(sed -n 's/.*remote address: *LID 0x[0-9a-f]*, QPN \(0x[0-9a-f]*\),.*/\1/p' "$g")
		# inet_ntop's text of the GIDs: ::ffff:a.b.c.d for IPv4.
		local gt=$gip st=$sip
		[[ $fam == v4 ]] && gt=::ffff:$gip st=::ffff:$sip
		grep -q "remote address: .*GID $st\$" "$g" || peer_fail "the guest did not learn our GID $st"
		grep -q "local address: .*GID $gt\$" "$g" || peer_fail "the guest's own GID is not $gt"
		grep -q "^$((iters * size * 2)) bytes in " "$g" || peer_fail "the guest did not move $((iters * size * 2)) bytes"
		grep -q "^$((iters * size * 2)) bytes in " "$h" || peer_fail "rdgram-perf did not move $((iters * size * 2)) bytes"
	else
		gqpn=$(sed -n 's/^ *local address: LID [0-9a-f]* QPN \(0x[0-9a-f]*\) .*/\1/p' "$g")
		rqpn=$(sed -n 's/^ *remote address: LID [0-9a-f]* QPN \(0x[0-9a-f]*\) .*/\1/p' "$g")
		# perftest prints a GID as its 16 bytes in %02d (PERF_GID_FMT).
		[[ $(grep -A1 'remote address:' "$g" | sed -n 's/^ *GID: //p') == "$(perftest_gid "$sip")" ]] ||
			peer_fail "the guest did not learn our GID $sip ($(perftest_gid "$sip"))"
		[[ $(grep -A1 'local address:' "$g" | sed -n 's/^ *GID: //p') == "$(perftest_gid "$gip")" ]] ||
			peer_fail "the guest's own GID is not $gip ($(perftest_gid "$gip"))"
		local row
		row=$(printf ' %-7s %-10s' "$size" "$iters")
		[[ $test == bw ]] && row=$(printf ' %-10s %-10s' "$size" "$iters")
		grep -q "^$row" "$g" || [[ -n $clock ]] || peer_fail "the guest's table has no row for $size bytes x $iters"
		grep -q "^$row" "$h" || peer_fail "rdgram-perf's table has no row for $size bytes x $iters"
	fi
	[[ -n $gqpn && -n $ourq && $((rqpn)) == $((ourq)) ]] || peer_fail "the guest's tool learned QPN '$rqpn', ours is '$ourq'"
	local gq
	gq=$(printf '0x%06x' "$((gqpn))")
	# What went each way, as rdgram-perf counted it.
	local sends=$iters recvs=$iters
	if [[ $test == bw ]]; then
		[[ $role == client ]] && recvs=0 || sends=0
	fi
	if ((sends > 0)); then
		grep -q "^ sent: $iters messages, $bytes payload bytes, to QPN $gq\$" "$h" ||
			peer_fail "rdgram-perf did not send $iters messages ($bytes bytes) to QPN $gq"
	fi
	if ((recvs > 0)); then
		grep -q "^ received: $iters of $iters messages, $bytes payload bytes, from QPN $gq GID $gip: all as expected\$" "$h" ||
			peer_fail "rdgram-perf did not receive $iters messages ($bytes bytes) from QPN $gq GID $gip, all as expected"
	fi
	# rdgram-perf's drop counters: only other protocols' frames (the soft
	# driver prints them all; verbs prints a line only for drops).
	local ctr= bad=
	if [[ -n $in_guest ]]; then
		! grep 'drops:' "$h" || peer_fail "rdgram-perf's verbs queue dropped (above)"
		sends=$((sends + recvs)) recvs=$sends # both ends count on rxe0
	fi
	[[ -z $in_guest ]] && ctr=$(grep -m1 ' counters: ' "$h")
	for kv in ${ctr#* counters: }; do
		case ${kv%%=*} in
		rx_pkts | tx_pkts | rx_to_control | tx_control | rx_not_udp | rx_not_ip | rx_not_roce) ;;
		rx_vlan_untagged) [[ -n $PEER_VLAN ]] || bad+=" $kv" ;; # the lab's untagged link, shared
		*) bad+=" $kv" ;;
		esac
	done
	if [[ -z $in_guest ]]; then
		[[ -n $ctr ]] || peer_fail "rdgram-perf printed no counters"
		[[ -z $bad ]] || peer_fail "rdgram-perf dropped or missed:$bad"
		local rx tx
		rx=$(sed -n 's/.* rx_pkts=\([0-9]*\).*/\1/p' <<<"$ctr")
		tx=$(sed -n 's/.* tx_pkts=\([0-9]*\).*/\1/p' <<<"$ctr")
		[[ $rx == "$recvs" && $tx == "$sends" ]] ||
			peer_fail "rdgram-perf's queue counted rx_pkts=$rx tx_pkts=$tx, expected $recvs and $sends"
	fi
	# rxe: the guest sent what we received and received what we sent.
	local b=$LAB_RUN/case$i.before a=$LAB_RUN/case$i.after k d
	if [[ -s $b && -s $a ]]; then
		for k in sent_pkts rdma_sends; do
			d=$(($(rxe_stat "$a" $k) - $(rxe_stat "$b" $k)))
			[[ $d == "$recvs" ]] || peer_fail "rxe $k moved by $d, rdgram-perf received $recvs"
		done
		for k in rcvd_pkts rdma_recvs; do
			d=$(($(rxe_stat "$a" $k) - $(rxe_stat "$b" $k)))
			[[ $d == "$sends" ]] || peer_fail "rxe $k moved by $d, rdgram-perf sent $sends"
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

# A port without the VLAN against rxe on it (ROLE client-untagged): the
# tool's exchange goes through (TCP, untagged), the datagrams do not. Both
# sides must say so: rdgram-perf fails and counts rxe's tagged frames (its
# ARP/ND for our address at least) as rx_vlan_tagged, and rxe receives
# nothing.
peer_check_untagged() {
	local i=$1 h=$LAB_RUN/host$1.out g=$LAB_RUN/case$1.out hrc ctr d
	hrc=$(cat "$LAB_RUN/host$i.rc" 2>/dev/null || echo none)
	echo "--- case $i: $PEER_CUR: rdgram-perf (exit $hrc):"
	grep -v -e '^EAL' -e '^TELEMETRY' -e '^$' "$h" | sed 's/^/    /'
	echo "--- guest's tool (exit $(cat "$LAB_RUN/case$i.rc" 2>/dev/null)):"
	sed 's/^/    /' "$g"
	[[ $hrc != 0 && $hrc != none ]] || peer_fail "rdgram-perf should have failed: an untagged port cannot reach rxe on a VLAN"
	ctr=$(grep -m1 ' counters: ' "$h")
	[[ $ctr =~ rx_vlan_tagged=([0-9]+) ]] && ((BASH_REMATCH[1] > 0)) ||
		peer_fail "rdgram-perf did not count rxe's tagged frames as rx_vlan_tagged: '$ctr'"
	[[ $ctr =~ " rx_pkts="[1-9] ]] && peer_fail "rdgram-perf delivered datagrams: '$ctr'"
	local b=$LAB_RUN/case$i.before a=$LAB_RUN/case$i.after
	if [[ -s $b && -s $a ]]; then
		d=$(($(rxe_stat "$a" rcvd_pkts) - $(rxe_stat "$b" rcvd_pkts)))
		[[ $d == 0 ]] || peer_fail "rxe rcvd_pkts moved by $d: untagged datagrams reached rxe on the VLAN"
		echo "    rxe: rcvd_pkts +$d"
	else
		peer_fail "no rxe counters from the guest"
	fi
}

# The host side's command for one case (ROLE PROTO FAMILY TEST ITERS SIZE
# PMD) in PEER_CMD: rdgram-perf; a test with another host side redefines
# this (and peer_check) after sourcing this file.
peer_host_cmd() {
	local role=$1 proto=$2 fam=$3 test=$4 iters=$5 size=$6 pmd=$7
	local oob=$LAB_HOST_IP:18515
	[[ $role == server && $proto == ud_pingpong && $fam == v6 ]] && oob="[$LAB_HOST_IP6]:18515"
	local cfg=$LAB_RUN/rdgram-$fam.toml t=$PEER_CASE_TIMEOUT
	[[ $role == client-untagged ]] && role=client cfg=$LAB_RUN/rdgram-$fam-untagged.toml t=$((PEER_NEG_TIMEOUT / 2))
	[[ $role == client ]] && oob=$LAB_GUEST_IP:18515
	PEER_CMD=(timeout -k 2 $((t + 5)) "$PEER_PERF" -c "$cfg"
		--mode "$role" --oob "$oob" --oob-proto "$proto" --test "$test" -n "$iters" -s "$size"
		--timeout "$t" --status-interval 0 --port "$pmd")
}

peer_run() {
	peer_config v4 >/dev/null
	peer_config v6 >/dev/null
	if [[ -n $PEER_VLAN ]]; then
		peer_config v4 untagged >/dev/null
		peer_config v6 untagged >/dev/null
	fi
	peer_guest_script
	lab_start
	lab_wait_ready
	local pmd
	pmd=$(lab_host_port)
	local i n=${#PEER_NAMES[@]}
	for ((i = 0; i < n; i++)); do
		eval "set -- ${PEER_ARGS[$i]}"
		local name=$1 role=$2 proto=$3 fam=$4 test=$5 iters=$6 size=$7
		PEER_CUR="$name"
		if [[ $role == verbs-* ]]; then # both ends in the guest
			touch "$LAB_RUN/go.$i"
			for _ in $(seq 1 $(((PEER_CASE_TIMEOUT + 30) * 20))); do
				[[ -f $LAB_RUN/case$i.done ]] && break
				sleep 0.05
			done
			continue
		fi
		peer_host_cmd "$role" "$proto" "$fam" "$test" "$iters" "$size" "$pmd"
		local cmd=("${PEER_CMD[@]}")
		if [[ $role == server ]]; then
			( lab_host "${cmd[@]}" >"$LAB_RUN/host$i.out" 2>&1; echo $? >"$LAB_RUN/host$i.rc" ) &
			local bg=$! up=
			LAB_PIDS+=("$bg")
			for _ in $(seq 1 200); do
				ip netns exec "$LAB_NS" ss -Hltn "sport = :18515" | grep -q . && { up=1; break; }
				kill -0 "$bg" 2>/dev/null || break
				sleep 0.05
			done
			[[ -n $up ]] || echo "the host side never listened (case $i)"
			touch "$LAB_RUN/go.$i"
			wait "$bg"
		else
			touch "$LAB_RUN/go.$i"
			if [[ $PEER_WAIT_LISTEN == 1 ]]; then
				for _ in $(seq 1 $((PEER_CASE_TIMEOUT * 20))); do
					[[ -f $LAB_RUN/listen.$i || -f $LAB_RUN/case$i.done ]] && break
					sleep 0.05
				done
			fi
			lab_host "${cmd[@]}" >"$LAB_RUN/host$i.out" 2>&1
			echo $? >"$LAB_RUN/host$i.rc"
		fi
		for _ in $(seq 1 $(((PEER_CASE_TIMEOUT + 10) * 20))); do
			[[ -f $LAB_RUN/case$i.done ]] && break
			sleep 0.05
		done
	done
	lab_wait
	local lrc=$? passed=0
	echo "guest GID indexes (v4 v6): $(cat "$LAB_RUN/gids" 2>/dev/null)"
	for ((i = 0; i < n; i++)); do
		eval "set -- ${PEER_ARGS[$i]}"
		PEER_CUR="$1"
		local before=$PEER_FAILS
		peer_check "$i" "${@:2:6}"
		if ((PEER_FAILS == before)); then
			echo "PASS [$1]"
			passed=$((passed + 1))
		fi
	done
	echo "$passed of $n cases passed"
	[[ $lrc == 0 && $PEER_FAILS == 0 ]]
}
