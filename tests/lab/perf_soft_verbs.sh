#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# rdgram-perf against itself across the lab's wire: on the soft driver on
# the host (net_af_packet on the tap) and on the verbs driver over rxe0 in
# the guest, swapping addresses with rdgram's own --oob exchange (the verbs
# side does not know its MAC: the soft side resolves it by ARP/ND). Three
# cases, one guest boot: latency and bandwidth with the host serving, the
# guest serving, over IPv4 and IPv6, with and without immediate data.
# Checks: both exit 0, the client's tables, every bandwidth message
# arrived, the server answered every ping, no drop on either side (the
# soft side may count the link's other protocols), no rxe error counter.
# usage: perf_soft_verbs.sh RDGRAM_PERF
set -u
LAB_NET=tap # the exchange is TCP through the host's kernel on the tap
. "$(dirname "$0")/lab.sh"
perf=$(realpath "${1:?usage: perf_soft_verbs.sh RDGRAM_PERF}")
lab_init perf_soft_verbs
lab_keep "$perf"
n=200
# name | who serves | family | extra options
cases=("v4 host serves|host|v4|" "v4 guest serves, imm|guest|v4|--imm" "v6 host serves, imm|host|v6|--imm")
for fam in v4 v6; do
	addr=$LAB_SOFT_IP
	[[ $fam == v6 ]] && addr=$LAB_SOFT_IP6
	cat >"$LAB_RUN/host-$fam.toml" <<EOF
[port]
mtu = 2048
[server]
mac = "02:00:00:77:00:01"
address = "$addr"
qpn = 0x100
lcores = "1"
[client]
mac = "02:00:00:77:00:01"
address = "$addr"
qpn = 0x100
lcores = "1"
EOF
done
common=(--test both -n $n --warmup 10 -s 64 --timeout 60 --status-interval 0)
{
	cat <<EOF
gid_of() { # the RoCE v2 GID index of sysfs's text \$1
	local i
	for i in \$(seq 0 15); do
		[[ \$(cat /sys/class/infiniband/rxe0/ports/1/gids/\$i 2>/dev/null) == "\$1" &&
			\$(cat /sys/class/infiniband/rxe0/ports/1/gid_attrs/types/\$i 2>/dev/null) == "RoCE v2" ]] &&
			{ echo \$i; return; }
	done
	echo none
}
g[4]=\$(gid_of 0000:0000:0000:0000:0000:ffff:0a4d:0002)
g[6]=\$(gid_of fd77:0000:0000:0000:0000:0000:0000:0002)
for f in 4 6; do printf '[perf]\ndriver = "verbs"\n[rdma]\ndevice = "rxe0"\ngid_index = %s\n' "\${g[\$f]}" >\$LAB_RUN/guest-v\$f.toml; done
waitfor() { for _ in \$(seq 1 1800); do [[ -f \$LAB_RUN/\$1 ]] && return 0; sleep 0.05; done; return 1; }
EOF
	for i in "${!cases[@]}"; do
		IFS='|' read -r name who fam extra <<<"${cases[$i]}"
		eal="-l 0 --no-huge --no-shconf -m 256 --no-pci --log-level=lib.eal:error"
		if [[ $who == host ]]; then
			cat <<EOF
waitfor go.$i
rdma statistic show link rxe0/1 >\$LAB_RUN/case$i.before
timeout 90 '$perf' $eal -- -c \$LAB_RUN/guest-$fam.toml --mode client --oob $LAB_HOST_IP:18515 ${common[*]} $extra >\$LAB_RUN/guest$i.out 2>&1
echo \$? >\$LAB_RUN/guest$i.rc
rdma statistic show link rxe0/1 >\$LAB_RUN/case$i.after
touch \$LAB_RUN/done.$i
EOF
		else
			cat <<EOF
waitfor go.$i
rdma statistic show link rxe0/1 >\$LAB_RUN/case$i.before
timeout 90 '$perf' $eal -- -c \$LAB_RUN/guest-$fam.toml --mode server --oob $LAB_GUEST_IP:18515 ${common[*]} $extra >\$LAB_RUN/guest$i.out 2>&1 &
p=\$!
for _ in \$(seq 1 1200); do ss -Hltn "sport = :18515" | grep -q . && break; sleep 0.05; done
touch \$LAB_RUN/listening.$i
wait \$p
echo \$? >\$LAB_RUN/guest$i.rc
rdma statistic show link rxe0/1 >\$LAB_RUN/case$i.after
touch \$LAB_RUN/done.$i
EOF
		fi
	done
	echo "exit 0"
} | lab_guest_script
lab_start
lab_wait_ready
waitf() { for _ in $(seq 1 2400); do [[ -f $LAB_RUN/$1 ]] && return 0; sleep 0.05; done; return 1; }
for i in "${!cases[@]}"; do
	IFS='|' read -r name who fam extra <<<"${cases[$i]}"
	eal=(-l 1 --no-huge --no-shconf -m 256 --no-pci --log-level=lib.eal:error)
	if [[ $who == host ]]; then
		lab_host_bg timeout 90 "$perf" "${eal[@]}" -- -c "$LAB_RUN/host-$fam.toml" --mode server \
			--oob "$LAB_HOST_IP:18515" "${common[@]}" $extra --port "$(lab_host_port)" >"$LAB_RUN/host$i.out" 2>&1
		hp=$LAB_LAST_PID
		for _ in $(seq 1 400); do
			ip netns exec "$LAB_NS" ss -Hltn "sport = :18515" | grep -q . && break
			sleep 0.05
		done
		touch "$LAB_RUN/go.$i"
		wait "$hp"
		echo $? >"$LAB_RUN/host$i.rc"
	else
		touch "$LAB_RUN/go.$i"
		waitf "listening.$i"
		lab_host timeout 90 "$perf" "${eal[@]}" -- -c "$LAB_RUN/host-$fam.toml" --mode client \
			--oob "$LAB_GUEST_IP:18515" "${common[@]}" $extra --port "$(lab_host_port)" >"$LAB_RUN/host$i.out" 2>&1
		echo $? >"$LAB_RUN/host$i.rc"
	fi
	waitf "done.$i"
done
lab_wait
lrc=$?
fails=0
fail() { echo "  FAIL [$name]: $*"; fails=$((fails + 1)); }
stat() { awk -v k="$2" '{ for (i = 1; i < NF; i++) if ($i == k) { print $(i + 1); exit } }' "$1"; }
for i in "${!cases[@]}"; do
	IFS='|' read -r name who fam extra <<<"${cases[$i]}"
	h=$LAB_RUN/host$i.out g=$LAB_RUN/guest$i.out
	echo "--- [$name] host, soft driver (exit $(cat "$LAB_RUN/host$i.rc" 2>/dev/null)):"
	grep -v '^EAL\|^TELEMETRY\|^avx512\|^$' "$h" | sed 's/^/    /'
	echo "--- [$name] guest, verbs driver on rxe0 (exit $(cat "$LAB_RUN/guest$i.rc" 2>/dev/null)):"
	grep -v '^EAL\|^TELEMETRY\|^avx512\|^$' "$g" 2>/dev/null | sed 's/^/    /'
	[[ $(cat "$LAB_RUN/host$i.rc" 2>/dev/null) == 0 ]] || fail "the host's rdgram-perf failed"
	[[ $(cat "$LAB_RUN/guest$i.rc" 2>/dev/null) == 0 ]] || fail "the guest's rdgram-perf failed"
	if [[ $who == host ]]; then cl=$g sv=$h; else cl=$h sv=$g; fi
	grep -q "^ 64 *$n " "$cl" || fail "the client's latency table has no row for 64 bytes x $n"
	grep -q "receiver: $n of $n messages of 64 bytes arrived (0.000% lost)" "$cl" ||
		fail "not every bandwidth message arrived"
	grep -q "answered $n data messages in the last test\$" "$sv" || fail "the server did not answer every ping"
	# Drops: the soft side may only count the link's other protocols;
	# the verbs side prints a drops line only when there are any.
	bad=$(grep -h -o ' counters: .*' "$h" | tr ' ' '\n' | grep '=' |
		grep -v '^rx_pkts=\|^tx_pkts=\|^rx_bytes=\|^tx_bytes=\|^rx_to_control=\|^tx_control=\|^rx_not_udp=\|^rx_not_ip=\|^rx_not_roce=')
	[[ -z $bad ]] || fail "the soft driver dropped: $bad"
	! grep -q 'drops:' "$g" || fail "the verbs driver dropped (above)"
	if [[ -s $LAB_RUN/case$i.before && -s $LAB_RUN/case$i.after ]]; then
		for k in send_err link_downed; do
			d=$(($(stat "$LAB_RUN/case$i.after" $k) - $(stat "$LAB_RUN/case$i.before" $k)))
			[[ $d == 0 ]] || fail "rxe $k moved by $d"
		done
		echo "    rxe: sent_pkts +$(($(stat "$LAB_RUN/case$i.after" sent_pkts) - $(stat "$LAB_RUN/case$i.before" sent_pkts))), rcvd_pkts +$(($(stat "$LAB_RUN/case$i.after" rcvd_pkts) - $(stat "$LAB_RUN/case$i.before" rcvd_pkts)))"
	else
		fail "no rxe counters"
	fi
	[[ $fails == 0 ]] && echo "PASS [$name]"
done
[[ $lrc == 0 && $fails == 0 ]] || { echo "FAIL: $fails check(s) failed"; exit 1; }
echo "PASS: rdgram-perf soft (host) <-> verbs on rxe (guest), ${#cases[@]} cases"
