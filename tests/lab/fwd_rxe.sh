#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# rdgram-fwd on the verbs driver on rxe0 in the lab guest (Linux's RoCEv2,
# a real provider through libibverbs), reflecting another process's
# datagrams: lab_soft_peer on the host (rdgram's soft driver on the lab's
# tap, net_af_packet) sends, per address family, N good datagrams to the
# QP rdgram-fwd printed, with one of each kind rxe must drop among them
# (wrong ICRC, Q_Key, P_Key, destination QPN), and checks that every good
# one comes back byte for byte from that QP and the guest's GID. The reply
# AHs are rdgram-fwd's own: derived from each completion's GRH area and
# created on rxe by the control thread (the kernel resolves the host's MAC
# by ARP and ND). Then the counts: rdgram-fwd's --stats-json (delivered =
# reflected = sent = 2N, nothing dropped, the accounting closing for each
# worker and summed) and rxe's counters (rcvd_pkts and sent_pkts +2N).
# Two workers in the guest (-l 0,1 -- --workers 2: the main lcore one of
# them), each with its own QP on rxe0; the peer sends to worker 0's, and
# worker 1's accounting closes at zero (FWD_RXE_WORKERS=1: one worker).
# Nothing timed here is a performance figure (TCG).
# usage: fwd_rxe.sh RDGRAM_FWD LAB_SOFT_PEER
set -u
LAB_NET=${LAB_NET:-tap}
. "$(dirname "$0")/lab.sh"
fwd=$(realpath "${1:?usage: fwd_rxe.sh RDGRAM_FWD LAB_SOFT_PEER}")
soft=$(realpath "${2:?usage: fwd_rxe.sh RDGRAM_FWD LAB_SOFT_PEER}")
n=${FWD_RXE_COUNT:-40} # good datagrams per family
workers=${FWD_RXE_WORKERS:-2}
lab_init fwd_rxe
lab_keep "$fwd" "$soft"
printf '[fwd]\ndriver = "verbs"\nworkers = %s\n[rdma]\ndevice = "rxe0"\n' "$workers" >"$LAB_RUN/fwd.toml"
lab_guest_script <<GUEST
rdma statistic show link rxe0/1 >\$LAB_RUN/stat.before
timeout 170 '$fwd' -l 0,1 --no-huge --no-shconf -m 256 --no-pci --log-level=lib.eal:error -- \\
	-c \$LAB_RUN/fwd.toml --max-packets $((2 * n)) --duration 150 --stats-json \$LAB_RUN/fwd.json \\
	>\$LAB_RUN/fwd.out 2>&1 &
p=\$!
# The QP soft_peer sends to: worker 0's, as rdgram-fwd printed it.
l=
for _ in \$(seq 1 1200); do
	l=\$(grep -m1 'queue 0 (worker 0): qpn' \$LAB_RUN/fwd.out) && break
	kill -0 \$p 2>/dev/null || break
	sleep 0.1
done
if [[ -n \$l ]]; then
	# soft_peer's ready file (verbs_peer's format): "qpn 0x... qkey 0x...".
	echo "\$l" | sed 's/.*\(qpn 0x[0-9a-f]* qkey 0x[0-9a-f]*\).*/\1/' >\$LAB_RUN/fwd.ready.tmp
	mv \$LAB_RUN/fwd.ready.tmp \$LAB_RUN/fwd.ready
fi
wait \$p
rc=\$?
rdma statistic show link rxe0/1 >\$LAB_RUN/stat.after
exit \$rc
GUEST
lab_host_bg "$soft" --port "$(lab_host_port)" --mac 02:00:00:77:00:01 --ip4 "$LAB_SOFT_IP" --ip6 "$LAB_SOFT_IP6" \
	--peer-mac "$LAB_GUEST_MAC" --peer4 "$LAB_GUEST_IP" --peer6 "$LAB_GUEST_IP6" \
	--ready "$LAB_RUN/fwd.ready" --count "$n" --bad --echo --timeout 170 >"$LAB_RUN/soft_peer.out" 2>&1
speer=$LAB_LAST_PID
lab_start
lab_wait
grc=$?
wait "$speer"
src=$?
echo "--- host: lab_soft_peer (exit $src)"
cat "$LAB_RUN/soft_peer.out"
echo "--- guest: rdgram-fwd, verbs driver on rxe0 (guest.sh exit $grc)"
grep -v '^TELEMETRY\|^avx512\|^$' "$LAB_RUN/fwd.out" 2>/dev/null
fail=0
[[ $src == 0 ]] || { echo "FAIL: soft_peer exit $src (not every datagram came back byte for byte)"; fail=1; }
[[ $grc == 0 ]] || { echo "FAIL: rdgram-fwd in the guest failed"; fail=1; }
/usr/bin/python3 - "$LAB_RUN/fwd.json" $((2 * n)) "$workers" <<'PY' || fail=1
import json, sys
try:
    st = json.load(open(sys.argv[1]))
except (OSError, ValueError) as e:
    print("FAIL: no --stats-json from rdgram-fwd:", e)
    sys.exit(1)
want, workers = int(sys.argv[2]), int(sys.argv[3])
errs = []


def closes(who, t):
    d = t["drops"]
    pend = sum(v for k, v in d.items() if k.startswith("pend_"))
    rx_drops = sum(v for k, v in d.items() if k.startswith("rx_"))
    tx_drops = sum(v for k, v in d.items() if k.startswith("tx_") and k != "tx_full")
    for what, a, b in [
            ("frames = delivered + to control + driver RX drops", t["frames_received"],
             t["delivered"] + t["to_control"] + rx_drops),
            ("delivered = reflected + app drops", t["delivered"],
             t["reflected"] + t["forwarded"] + d.get("fwd_no_rule", 0) + d.get("reply_bad_wc", 0)),
            ("reflected = handed to driver + pending drops + tx_full + waiting", t["reflected"] + t["forwarded"],
             t["handed_to_driver"] + pend + d.get("tx_full", 0) + t["waiting"]),
            ("tx_pkts = handed to driver - TX drops", t["tx_pkts"], t["handed_to_driver"] - tx_drops),
            ("dropped = sum of reasons", t["dropped"], sum(d.values()))]:
        if a != b:
            errs.append(f"{who}: {what}: {a} != {b}")


if st["driver"] != "verbs" or st["workers"] != workers:
    errs.append(f"driver {st['driver']}, workers {st['workers']}; expected verbs, {workers}")
if st["stopped"] not in ("max packets reached", "every worker stopped"):
    errs.append(f"stopped: {st['stopped']}, expected by --max-packets")
t = st["totals"]
closes("totals", t)
for i, w in enumerate(st["per_worker"]):
    closes(f"worker {i}", w["totals"])
w0 = st["per_worker"][0]["totals"]
for k in ("delivered", "reflected", "handed_to_driver", "tx_pkts"):
    if t[k] != want or w0[k] != want:
        errs.append(f"{k}: worker 0 {w0[k]}, totals {t[k]}; expected {want}")
if t["dropped"] != 0:
    errs.append("dropped: " + str({k: v for k, v in t["drops"].items() if v}))
if st["ports"][0].get("mbufs_out_at_close") != 0:
    errs.append(f"mbufs out of the pool once the queues closed: {st['ports'][0].get('mbufs_out_at_close')}")
ah = st["ports"][0]["ah_service"]
if ah["created"] != 2:
    errs.append(f"reply AHs created on rxe: {ah['created']}, expected 2 (one per family)")
for e in errs:
    print("FAIL:", e)
if not errs:
    print(f"rdgram-fwd: {want} delivered = reflected = sent by worker 0, nothing dropped, 2 reply AHs on rxe; "
          f"the accounting closes for each of {workers} worker(s) and summed")
sys.exit(1 if errs else 0)
PY
rxe_count() { grep -o " $2 [0-9]*" "$LAB_RUN/$1" | awk '{print $2}'; }
if [[ -f $LAB_RUN/stat.after && -f $LAB_RUN/stat.before ]]; then
	rcvd=$(($(rxe_count stat.after rcvd_pkts) - $(rxe_count stat.before rcvd_pkts)))
	sent=$(($(rxe_count stat.after sent_pkts) - $(rxe_count stat.before sent_pkts)))
	echo "rxe: rcvd_pkts +$rcvd, sent_pkts +$sent"
	[[ $rcvd == $((2 * n)) ]] ||
		{ echo "FAIL: rxe's rcvd_pkts grew by $rcvd, expected $((2 * n)) (the bad ones must not count)"; fail=1; }
	[[ $sent == $((2 * n)) ]] || { echo "FAIL: rxe's sent_pkts grew by $sent, expected $((2 * n)) replies"; fail=1; }
else
	echo "FAIL: no rxe counters from the guest"
	fail=1
fi
[[ $fail == 0 ]] &&
	echo "PASS: rdgram-fwd (verbs driver, rxe0 in the guest, $workers worker(s)) reflected $((2 * n)) datagrams of lab_soft_peer (soft driver, host), IPv4 and IPv6"
exit $fail
