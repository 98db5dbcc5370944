#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# rdgram-fwd with two workers on the soft driver, on this 2-CPU machine:
# -l 0,1 -- --workers 2 runs two poll threads, the main lcore one of them.
# net_pcap opens two queues, each replaying its own capture (scapy-made,
# gen_fwd_queues.py); QP 0x100 belongs to worker 0 and 0x101 to worker 1.
#   own    each worker's datagrams arrive on its own queue; reflected, then
#          forwarded to one peer by a rule;
#   cross  every datagram arrives on queue 0, worker 1's included: they
#          reach worker 1 only through the soft driver's hand-off between
#          queues (issue 26 item 1);
# check_fwd_workers.py then checks the --stats-json accounting for each
# worker and summed, and each queue's output capture.
#   bad    bad input: one line on stderr, exit 2: --workers beyond the
#          lcores, a QP placed on a queue no worker serves, a worker left
#          without a QP, an unknown driver, a driver this build lacks
#          (meson's reason; DRIVERS lists those built) or one that cannot
#          serve rdgram-fwd (EFA in reflect mode).
#   stop   worker 1 stops (idle) while worker 0 goes on (net_pcap
#          infinite_rx); each worker's accounting closes;
# usage: fwd_workers.sh RDGRAM_FWD own|cross|stop|bad DRIVERS
set -u
fwd=$1
what=$2
built=" ${3//,/ } "
tools=$(cd "$(dirname "$0")/../tools" && pwd)
/usr/bin/python3 -c 'import scapy' 2>/dev/null || { echo "SKIP: python3-scapy not installed"; exit 77; }
tmp=$( { [ -d /dev/shm ] && [ -w /dev/shm ] && mktemp -d -p /dev/shm; } || mktemp -d)
trap 'rm -rf "$tmp"' EXIT
eal=(-l 0,1 --no-huge --no-shconf --no-pci -m 256 --log-level=lib.eal:error --file-prefix "rdgram-fwdw$$")
n=400
cat >"$tmp/w.toml" <<TOML
[[port]]
name = "p0"
mac = "02:00:00:00:00:01"
addresses = ["10.0.0.1"]
qps = [{ qpn = 0x100, qkey = 0x11111111 }, { qpn = 0x101, qkey = 0x22222222 }]
neighbours = [{ ip = "10.0.0.20", mac = "02:00:00:00:00:20" }, { ip = "10.0.0.21", mac = "02:00:00:00:00:21" }]
TOML
port="net_pcap0,rx_pcap=$tmp/q0.pcap,rx_pcap=$tmp/q1.pcap,tx_pcap=$tmp/o0.pcap,tx_pcap=$tmp/o1.pcap"

case $what in
own | cross)
	/usr/bin/python3 "$tools/gen_fwd_queues.py" "$tmp" "$what" $n || exit 1
	timeout 60 "$fwd" "${eal[@]}" -- -c "$tmp/w.toml" --workers 2 --idle-exit 0.5 --stats-json "$tmp/s.json" \
		--port "$port" >"$tmp/log" 2>&1
	rc=$?
	grep -v '^TELEMETRY\|^avx512' "$tmp/log"
	[ $rc -eq 0 ] || { echo "FAIL: rdgram-fwd exited $rc"; exit 1; }
	grep -q "2 worker(s) on poll lcore 1 (cpu 1), 0 (cpu 0)" "$tmp/log" ||
		{ echo "FAIL: the two workers are not lcores 1 and 0 (the main lcore last)"; exit 1; }
	/usr/bin/python3 "$tools/check_fwd_workers.py" "$tmp/s.json" "$what" $n "$tmp" || exit 1
	[ "$what" = own ] || exit 0
	# Forward mode: one rule to a static peer; each worker forwards what
	# it received from its own QP on its own queue, the peer's AH created
	# once at start-up and shared.
	echo "--- forward"
	cat >>"$tmp/w.toml" <<TOML
[fwd]
mode = "forward"
[peers.sink]
ip = "10.0.0.99"
mac = "02:00:00:00:00:99"
qpn = 0x999
qkey = 0x1234
[[rule]]
to = "sink"
TOML
	timeout 60 "$fwd" "${eal[@]}" -- -c "$tmp/w.toml" --workers 2 --idle-exit 0.5 --stats-json "$tmp/f.json" \
		--port "$port" >"$tmp/log" 2>&1
	rc=$?
	grep 'worker\|totals' "$tmp/log"
	[ $rc -eq 0 ] || { cat "$tmp/log"; echo "FAIL: rdgram-fwd forward exited $rc"; exit 1; }
	/usr/bin/python3 "$tools/check_fwd_workers.py" "$tmp/f.json" "$what" $n "$tmp" forward
	exit $?
	;;
stop)
	# Worker 1's queue replays an empty capture and stops on --idle-exit;
	# worker 0's replays its capture in a loop and goes on to --duration.
	/usr/bin/python3 "$tools/gen_fwd_queues.py" "$tmp" own 50 || exit 1
	/usr/bin/python3 -c "import struct,sys; open(sys.argv[1],'wb').write(struct.pack('<IHHiIII',0xa1b2c3d4,2,4,0,0,65535,1))" "$tmp/q1.pcap"
	timeout 60 "$fwd" "${eal[@]}" -- -c "$tmp/w.toml" --workers 2 --idle-exit 0.5 --duration 2.5 \
		--stats-json "$tmp/s.json" --port "net_pcap0,rx_pcap=$tmp/q0.pcap,rx_pcap=$tmp/q1.pcap,infinite_rx=1" >"$tmp/log" 2>&1
	rc=$?
	grep 'worker\|totals\|mbufs' "$tmp/log"
	[ $rc -eq 0 ] || { cat "$tmp/log"; echo "FAIL: rdgram-fwd exited $rc"; exit 1; }
	/usr/bin/python3 - "$tmp/s.json" <<'PY'
import json, sys
st = json.load(open(sys.argv[1]))
w0, w1 = st["per_worker"]
errs = []
if w1["stopped"] != "idle" or w1["elapsed_s"] > 1.5:
    errs.append(f"worker 1 stopped '{w1['stopped']}' after {w1['elapsed_s']:.2f} s; expected idle after about 0.5 s")
if w0["stopped"] != "duration reached" or w0["elapsed_s"] < 2.4:
    errs.append(f"worker 0 stopped '{w0['stopped']}' after {w0['elapsed_s']:.2f} s; expected to go on to 2.5 s")
for i, w in enumerate((w0, w1)):
    t = w["totals"]
    d = t["drops"]
    pend = sum(v for k, v in d.items() if k.startswith("pend_"))
    if t["delivered"] != t["reflected"] or t["reflected"] != t["handed_to_driver"] + pend + t["waiting"] or \
            t["tx_pkts"] != t["handed_to_driver"] or t["dropped"] != sum(d.values()) or t["waiting"] != 0:
        errs.append(f"worker {i}: the accounting does not close: {t}")
# Worker 0 is under the same --idle-exit: reaching the duration means it
# kept receiving after worker 1 stopped.
if w0["totals"]["delivered"] == 0 or w1["totals"]["delivered"] != 0:
    errs.append(f"delivered: worker 0 {w0['totals']['delivered']}, worker 1 {w1['totals']['delivered']}")
for e in errs:
    print("FAIL:", e)
if not errs:
    print(f"ok: worker 1 stopped idle after {w1['elapsed_s']:.2f} s, worker 0 went on to {w0['elapsed_s']:.2f} s "
          f"and reflected {w0['totals']['reflected']}; both accountings close")
sys.exit(1 if errs else 0)
PY
	exit $?
	;;
bad) ;;
*)
	echo "usage: fwd_workers.sh RDGRAM_FWD own|cross|stop|bad DRIVERS"
	exit 2
	;;
esac

fail=0
/usr/bin/python3 "$tools/gen_fwd_queues.py" "$tmp" own 4 || exit 1
# bad_case NAME WANT_RC PATTERN CONFIG_TEXT ARGS...: one rdgram-fwd line on
# stderr, matching PATTERN, and exit WANT_RC.
bad_case() {
	local name=$1 want=$2 pat=$3 text=$4
	shift 4
	printf '%s\n' "$text" >"$tmp/bad.toml"
	timeout 60 "$fwd" "${eal[@]}" -- -c "$tmp/bad.toml" "$@" >"$tmp/bad.out" 2>"$tmp/bad.err"
	local rc=$? lines
	lines=$(grep -v '^TELEMETRY\|^avx512' "$tmp/bad.err" | grep -c .)
	if [ $rc -ne "$want" ] || [ "$lines" -ne 1 ] || ! grep -q -- "^rdgram-fwd: .*$pat" "$tmp/bad.err"; then
		echo "FAIL: $name: exit $rc (want $want), $lines stderr lines, want '$pat':"
		cat "$tmp/bad.err"
		fail=1
	else
		echo "ok: $name: exit $rc: $(grep '^rdgram-fwd' "$tmp/bad.err")"
	fi
}
three='[[port]]
devargs = "net_null0"
addresses = ["10.0.0.1"]
qps = [{ qpn = 0x100 }, { qpn = 0x101 }, { qpn = 0x102 }]'
bad_case "--workers 3 on -l 0,1" 2 "--workers 3: only 2 lcore(s) given to the EAL" "$three" --workers 3
bad_case "[fwd] workers = 3 on -l 0,1" 2 "--workers 3: only 2 lcore(s)" "[fwd]
workers = 3
$three"
bad_case "QP on a queue no worker serves" 2 "QP 0x101 is placed on worker 2 (queue 2), which no poll thread serves" \
	'[[port]]
devargs = "net_null0"
addresses = ["10.0.0.1"]
qps = [{ qpn = 0x100 }, { qpn = 0x101, worker = 2 }]' --workers 2
bad_case "a worker without a QP" 2 "worker 1 owns no QP" '[[port]]
devargs = "net_null0"
addresses = ["10.0.0.1"]
qps = [{ qpn = 0x100 }]' --workers 2
bad_case "a port with fewer queues than workers" 2 "port p0: 2 queue pairs (one per poll thread), the port offers 1 RX" \
	"[[port]]
name = \"p0\"
devargs = \"net_pcap0,rx_pcap=$tmp/q0.pcap,tx_pcap=$tmp/o0.pcap\"
addresses = [\"10.0.0.1\"]
qps = [{ qpn = 0x100 }, { qpn = 0x101 }]" --workers 2
bad_case "unknown driver" 2 'unknown driver "ibverbs"' "$three" --driver ibverbs
bad_case "[fwd] driver unknown" 2 "bad.toml:2:10: key 'fwd.driver': expected one of \"soft\", \"verbs\"" '[fwd]
driver = "rxe"'
bad_case "a [[port]] on an RDMA driver" 2 "driver verbs serves the \[rdma\] device" "$three" --driver verbs
for d in verbs mlx5 efa; do
	if [[ $built != *" $d "* ]]; then
		bad_case "driver $d not built" 2 "driver $d was not built: " "" --driver $d
	elif [[ $d == efa ]]; then
		bad_case "efa cannot reflect" 2 "driver efa cannot reflect" "" --driver efa
	elif [ -z "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
		# Built, no device here: the open fails in one line (exit 1).
		bad_case "driver $d without a device" 1 "driver $d: cannot open RDMA device '(the first usable)' port 1: no " "" \
			--driver $d --workers 2
	fi
done
# The verbs example config parses and fails only at the device.
cfgdir=$(cd "$(dirname "$0")/../../config" && pwd)
if [[ $built == *" verbs "* ]] && [ -z "$(ls /sys/class/infiniband 2>/dev/null)" ]; then
	bad_case "config/rdgram-fwd-verbs.toml without rxe0" 1 "driver verbs: cannot open RDMA device 'rxe0' port 1: " "$(cat "$cfgdir/rdgram-fwd-verbs.toml")"
fi
exit $fail
