#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# rdgram-coll on the verbs driver over Linux's rxe (rxe0 in the lab's
# guest, the kernel's RoCEv2): 4 ranks as 4 processes, each its own QP on
# rxe0, finding each other through the TCP rendezvous on the guest's
# loopback; then the same 4 ranks as threads of one process on 2 poll
# threads (--workers 2), with 5% of received datagrams thrown away so that
# the app's loss recovery runs over rxe. rxe loops the datagrams between
# QPs of its one port (every rank has the same GID: the QPN tells them
# apart).
# Checks, for each process: exit 0, "result: PASS", every barrier,
# allgather and alltoall verified byte for byte by the app at every rank
# (verified = ranks here x iterations x 3, none failed), the AH storm
# complete, the accounting closed (app's messages = the QP's sends and
# receives plus named drops; every mbuf back), the JSON names the verbs
# driver; rxe's counters: datagrams moved, no send error. Nothing timed
# here is a performance figure (TCG).
# usage: coll_rxe.sh RDGRAM_COLL
set -u
. "$(dirname "$0")/lab.sh"
coll=$(realpath "${1:?usage: coll_rxe.sh RDGRAM_COLL}")
lab_init coll_rxe
lab_keep "$coll"
iters=20
ranks=4
eal="--no-huge --no-shconf -m 128 --no-pci --log-level=lib.eal:error"
# rto 2 ms: under TCG a peer's answer often takes longer than the default
# 200 us, and every such wait would be a spurious retransmission.
common=(--driver verbs --device rxe0 --iters $iters --size 64 --rto-us 2000 --timeout 90 --idle sleep
	--idle-sleep-us 200)
lab_guest_script <<EOF
rdma statistic show link rxe0/1 >\$LAB_RUN/procs.before
for r in \$(seq 0 $((ranks - 1))); do
	timeout 150 '$coll' -l \$((r % 2)) $eal --file-prefix coll\$r -- ${common[*]} --mode procs --bootstrap tcp \\
		--ranks $ranks --rank \$r --rendezvous 127.0.0.1:18600 --json \$LAB_RUN/procs\$r.json \\
		>\$LAB_RUN/procs\$r.out 2>&1 &
	eval "p\$r=\\\$!"
done
for r in \$(seq 0 $((ranks - 1))); do
	eval "wait \\\$p\$r"
	echo \$? >\$LAB_RUN/procs\$r.rc
done
rdma statistic show link rxe0/1 >\$LAB_RUN/procs.after
timeout 150 '$coll' -l 0,1 $eal --file-prefix collt -- ${common[*]} --mode threads --ranks $ranks --workers 2 \\
	--drop-rate 0.05 --seed 3 --json \$LAB_RUN/threads.json >\$LAB_RUN/threads.out 2>&1
echo \$? >\$LAB_RUN/threads.rc
rdma statistic show link rxe0/1 >\$LAB_RUN/threads.after
exit 0
EOF
lab_start
lab_wait
lrc=$?
fails=0
fail() { echo "  FAIL [$name]: $*"; fails=$((fails + 1)); }
stat() { awk -v k="$2" '{ for (i = 1; i < NF; i++) if ($i == k) { print $(i + 1); exit } }' "$1"; }
# check NAME OUT JSON RC_FILE RANKS_HERE
check() {
	local out=$2 js=$3 rcf=$4 here=$5
	name=$1
	echo "--- [$name] (exit $(cat "$rcf" 2>/dev/null)):"
	grep -v '^EAL\|^TELEMETRY\|^avx512\|^$' "$out" 2>/dev/null | sed 's/^/    /'
	[[ $(cat "$rcf" 2>/dev/null) == 0 ]] || fail "rdgram-coll did not exit 0"
	grep -q '^result: PASS$' "$out" 2>/dev/null || fail "no PASS"
	grep -q "verified: $((here * iters * 3))  failed: 0" "$out" 2>/dev/null ||
		fail "not $((here * iters * 3)) collectives verified with none failed"
	grep -q '^  accounting: .*: closed$' "$out" 2>/dev/null || fail "the accounting does not close"
	grep -q "$((ranks - 1))/$((ranks - 1)) created" "$out" 2>/dev/null &&
		! grep -Eq "^  rank .* [0-9]+/$((ranks - 1)) created, error" "$out" || fail "AH storm incomplete"
	python3 - "$js" "$here" <<'PY' || fail "--json"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["driver"] == "verbs" and d["result"] == "PASS" and d["accounting"] == "closed", d
assert d["local_ranks"] == int(sys.argv[2]) and d["verify_failed"] == 0, d
assert all(w["accounting"] == "closed" for w in d["workers"]), d["workers"]
PY
}
for r in $(seq 0 $((ranks - 1))); do
	check "procs, rank $r" "$LAB_RUN/procs$r.out" "$LAB_RUN/procs$r.json" "$LAB_RUN/procs$r.rc" 1
done
check "threads, 2 workers, 5% dropped" "$LAB_RUN/threads.out" "$LAB_RUN/threads.json" "$LAB_RUN/threads.rc" $ranks
[[ $(grep -c '^  worker [01] (lcore .*: closed$' "$LAB_RUN/threads.out" 2>/dev/null) == 2 ]] ||
	fail "not two workers whose accounting closed"
rt=$(grep -Eo 'retransmits: [0-9]+' "$LAB_RUN/threads.out" 2>/dev/null | grep -Eo '[0-9]+$')
[[ ${rt:-0} -gt 0 ]] || fail "no retransmission: loss recovery not exercised"
name=rxe
if [[ -s $LAB_RUN/procs.before && -s $LAB_RUN/procs.after && -s $LAB_RUN/threads.after ]]; then
	for k in send_err link_downed; do
		d=$(($(stat "$LAB_RUN/threads.after" $k) - $(stat "$LAB_RUN/procs.before" $k)))
		[[ $d == 0 ]] || fail "rxe $k moved by $d"
	done
	s=$(($(stat "$LAB_RUN/procs.after" sent_pkts) - $(stat "$LAB_RUN/procs.before" sent_pkts)))
	echo "    rxe, the 4 processes: sent_pkts +$s, rcvd_pkts +$(($(stat "$LAB_RUN/procs.after" rcvd_pkts) - $(stat "$LAB_RUN/procs.before" rcvd_pkts)))"
	[[ $s -gt 0 ]] || fail "rxe sent nothing"
else
	fail "no rxe counters"
fi
[[ $lrc == 0 && $fails == 0 ]] || { echo "FAIL: $fails check(s) failed"; exit 1; }
echo "PASS: rdgram-coll on the verbs driver over rxe0: $ranks ranks as processes, and as threads on 2 workers"
