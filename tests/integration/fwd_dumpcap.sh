#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Live capture of an rdgram app with DPDK's own tool: rdgram-fwd reflects
# UD SENDs that a net_pcap port replays in a loop (infinite_rx: scapy's
# frames, gen_roce_pcap.py), Debian's dpdk-dumpcap attaches to it as a
# secondary process (--file-prefix from the app's start-up line) and writes
# -c N packets of both directions to a pcapng file; tshark's InfiniBand
# dissector (nothing malformed) and scapy's ICRC check every RoCE frame of
# each direction (check_capture.py). Then the bad input: with every free
# hugepage taken, and with no hugetlbfs mount, the app (capture auto)
# starts without a word about capture, and dpdk-dumpcap against it fails;
# --capture on refuses to start with one line saying why.
#
# It reserves 128 more 2 MB hugepages (an app takes them when 160 MB are
# free) and mounts hugetlbfs in a mount namespace of its own (so no other
# test sees the mount), and restores nr_hugepages on exit. Skips (77) when
# not root or the kernel gives too few hugepages. CPU time ~7 s (user 4 s,
# sys 2.5 s: EAL starts, tshark, scapy); wall 33 s at load average 19.
# usage: fwd_dumpcap.sh RDGRAM_FWD
set -u
fwd=$1
tools=$(cd "$(dirname "$0")/../tools" && pwd)
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "not root: reserving hugepages and mounting hugetlbfs need root"
# DPDK's secondary maps the primary's memory at the primary's addresses;
# Debian's dpdk-dumpcap could not attach to an ASan-built rdgram-fwd (ASan
# reserves its shadow across the address space): "EAL init failed: is
# primary process running?", then SIGSEGV in dpdk-dumpcap, in a fresh-clone
# run. The release tree runs this test; sanitizer trees skip it.
case ${RDGRAM_SANITIZE:-none} in
none | '') ;;
*) skip "built with -Db_sanitize=$RDGRAM_SANITIZE: dpdk-dumpcap (not instrumented) cannot attach to a sanitized primary" ;;
esac
command -v dpdk-dumpcap >/dev/null || skip "dpdk-dumpcap not installed (dpdk package)"
command -v tshark >/dev/null || skip "tshark not installed"
/usr/bin/python3 -c 'import scapy' 2>/dev/null || skip "python3-scapy not installed"
command -v unshare >/dev/null || skip "unshare not installed (util-linux)"
if [ -z "${RDGRAM_DUMPCAP_NS:-}" ]; then
  # A private mount namespace: the hugetlbfs mount is seen by this test's
  # processes only, and goes away with them.
  RDGRAM_DUMPCAP_NS=1 exec unshare --mount --propagation private "$0" "$@"
  skip "unshare --mount failed"
fi

kb=2048
nr_file=/sys/kernel/mm/hugepages/hugepages-${kb}kB/nr_hugepages
free_file=/sys/kernel/mm/hugepages/hugepages-${kb}kB/free_hugepages
[ -w "$nr_file" ] || skip "$nr_file is not writable (no 2 MB hugepages, or /sys read-only)"
want=128
tmp=$( { [ -d /dev/shm ] && [ -w /dev/shm ] && mktemp -d -p /dev/shm; } || mktemp -d)
old_nr=$(cat "$nr_file")
given_back=0
pids=()
holder=
# Gives back the pages this test added (others may have changed the count
# since: never below what was there).
give_back() {
  local cur
  cur=$(cat "$nr_file")
  echo $((cur - want < old_nr ? old_nr : cur - want)) >"$nr_file" 2>/dev/null
  given_back=1
}
# Waits for process $1 at most $2 seconds, then kills it; its status.
bounded_wait() {
  local i
  for ((i = 0; i < $2 * 10; i++)); do
    kill -0 "$1" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$1" 2>/dev/null && { echo "FAIL: pid $1 still running after $2 s: killed"; kill -KILL "$1" 2>/dev/null; }
  wait "$1" 2>/dev/null
}
cleanup() {
  [ -n "${watchdog:-}" ] && kill "$watchdog" 2>/dev/null
  for p in "${pids[@]}" $holder; do kill -TERM "$p" 2>/dev/null; done
  for p in "${pids[@]}" $holder; do bounded_wait "$p" 5; done
  rm -f "$tmp/huge/holder"
  umount "$tmp/huge" 2>/dev/null
  [ $given_back -eq 1 ] || give_back
  rm -rf "$tmp"
}
trap cleanup EXIT
# Ends itself before meson's timeout (120 s), so that cleanup gives the
# hugepages back: a test killed by meson would leave them reserved for
# every test after it.
{ sleep 90 >/dev/null 2>&1; echo "FAIL: fwd_dumpcap took over 90 s"; kill -TERM $$; } &
watchdog=$!
echo $((old_nr + want)) >"$nr_file" 2>/dev/null || skip "cannot write $nr_file"
free=$(cat "$free_file")
[ "$free" -ge 80 ] || skip "the kernel gave $free free 2 MB hugepages (asked for $want more): memory too fragmented"
mkdir "$tmp/huge"
mount -t hugetlbfs -o pagesize=2M nodev "$tmp/huge" || skip "cannot mount hugetlbfs"
echo "hugepages: $free of ${kb} kB free, hugetlbfs at $tmp/huge (private mount namespace)"

TOOLS=$tools /usr/bin/python3 - "$tmp/in.pcap" <<'PY' || exit 1
# One sender's ARP request, then 16 UD SENDs to QP 0x100 (scapy's frames).
import os, sys
sys.path.insert(0, os.environ["TOOLS"])
from gen_roce_pcap import SENDERS, QPS, roce, neighbour_frame
from scapy.layers.l2 import Ether
from scapy.utils import wrpcap
s = SENDERS[0]
frames = [neighbour_frame(s)]
for i, size in enumerate([0, 1, 4, 17, 64, 100, 333, 1000, 1500, 8, 16, 32, 48, 256, 512, 1024]):
    frames.append(roce(s, 0x100, QPS[0x100], bytes((i + k) & 0xff for k in range(size)), psn=i, sport=0xC000 + i))
wrpcap(sys.argv[1], [Ether(f) for f in frames])
PY

fail=0
n=100
# rdgram-fwd with no EAL arguments: the defaults take the hugepages (the
# mount above) and a shared configuration; --capture on has it say how to
# capture (auto says nothing). The port replays the capture forever; what
# it transmits is dropped (net_pcap without tx_pcap).
"$fwd" -- --capture on --port "net_pcap0,rx_pcap=$tmp/in.pcap,infinite_rx=1" --duration 60 >"$tmp/fwd.out" 2>"$tmp/fwd.err" &
pids+=($!)
# Its ports exist once it says where its workers poll.
for _ in $(seq 200); do grep -q "poll lcore" "$tmp/fwd.out" "$tmp/fwd.err" && break; sleep 0.1; done
line=$(grep "^rdgram-fwd: capture" "$tmp/fwd.err")
echo "start-up: $line"
prefix=$(sed -n 's/^rdgram-fwd: capture: dpdk-dumpcap --file-prefix=\([^ ]*\) .*/\1/p' "$tmp/fwd.err")
if [ -z "$prefix" ]; then
  echo "FAIL: rdgram-fwd did not offer capture:"; cat "$tmp/fwd.out" "$tmp/fwd.err"; exit 1
fi
# Reflecting already (its counters on SIGUSR1: a QP's "reflected", not the
# driver's tx_pkts, which counts its ARP request and reply too): the
# capture then holds both directions from its first frame, however long
# the first ARP learning and the AH to the sender took on a loaded
# machine. (A capture of 120 frames all inbound came of waiting for
# tx_pkts: the replies were still waiting for their AH.)
for _ in $(seq 100); do
  kill -USR1 "${pids[0]}" 2>/dev/null
  sleep 0.2
  grep -Eq "reflected [1-9]" "$tmp/fwd.out" && break
done
timeout 30 dpdk-dumpcap --file-prefix="$prefix" -D >"$tmp/list" 2>&1
rc=$?
grep -q "^0\. net_pcap0" "$tmp/list" || { echo "FAIL: dpdk-dumpcap -D (exit $rc) does not list net_pcap0:"; cat "$tmp/list"; fail=1; }
timeout 30 dpdk-dumpcap --file-prefix="$prefix" -i net_pcap0 -c $n -w "$tmp/live.pcapng" >"$tmp/dumpcap.log" 2>&1
rc=$?
cat "$tmp/dumpcap.log"
[ $rc -eq 0 ] || { echo "FAIL: dpdk-dumpcap exited $rc"; fail=1; }

# Each direction apart: what came in (scapy's, to QP 0x100) and what
# rdgram-fwd sent back (to the sender's QP 0xa11, from QP 0x100).
sender_qpn=0xa11 qpn=0x100 qkey=0x11111111
# (pcapng's epb_flags: 1 inbound, 2 outbound.)
tshark -r "$tmp/live.pcapng" -T fields -e frame.packet_flags_direction -e udp.dstport >"$tmp/dirs" 2>"$tmp/tshark.err" \
  || { echo "FAIL: tshark"; cat "$tmp/tshark.err"; fail=1; }
n_all=$(grep -c . "$tmp/dirs")
n_in=$(grep -c "^0x0*1[[:space:]]4791$" "$tmp/dirs")
n_out=$(grep -c "^0x0*2[[:space:]]4791$" "$tmp/dirs")
for dir in 1 2; do
  tshark -r "$tmp/live.pcapng" -Y "udp.dstport == 4791 && frame.packet_flags_direction == $dir" \
    -w "$tmp/dir$dir.pcapng" 2>"$tmp/tshark.err" || { echo "FAIL: tshark split"; cat "$tmp/tshark.err"; fail=1; }
done
echo "captured $n_all frames: $n_in RoCE in, $n_out RoCE out"
# dpdk-dumpcap checks -c after each burst it dequeues (up to 32 packets).
[ "$n_all" -ge $n ] && [ "$n_all" -lt $((n + 32)) ] || { echo "FAIL: $n_all frames in the capture, asked for $n"; fail=1; }
[ "$n_in" -gt 0 ] && [ "$n_out" -gt 0 ] || { echo "FAIL: RoCE frames missing in a direction"; fail=1; }
[ "$n_in" -gt 0 ] && { /usr/bin/python3 "$tools/check_capture.py" "$n_in" $qpn $sender_qpn $qkey "$tmp/dir1.pcapng:0" || fail=1; }
[ "$n_out" -gt 0 ] && { /usr/bin/python3 "$tools/check_capture.py" "$n_out" $sender_qpn $qpn $qkey "$tmp/dir2.pcapng:0" || fail=1; }

kill -TERM "${pids[0]}"
bounded_wait "${pids[0]}" 20
rc=$?
pids=()
[ $rc -eq 0 ] || { echo "FAIL: rdgram-fwd exit $rc after SIGTERM"; cat "$tmp/fwd.err"; fail=1; }
# Nothing left behind: no hugepage file in the mount, no runtime directory.
left=$(ls "$tmp/huge")
[ -z "$left" ] || { echo "FAIL: hugepage files left in the mount: $left"; fail=1; }
[ ! -e "/var/run/dpdk/$prefix" ] || { echo "FAIL: /var/run/dpdk/$prefix left behind"; fail=1; }

# Bad input: an app without hugepages, every free hugepage taken (by a
# process that maps them all from the mount: the EAL falls back to
# --no-huge), then no mount (the hugepages are free: the EAL takes them
# --in-memory). With capture auto (the default) the app starts and says
# nothing about capture, nobody having asked for one, and dpdk-dumpcap
# against it fails (once); --capture on refuses to start: one line with
# the reason, exit 1.
no_capture() { # name, expected reason (grep pattern), try dumpcap (1/0)
  "$fwd" -- --port net_null0 --duration 20 >"$tmp/nh.out" 2>"$tmp/nh.err" &
  pids+=($!)
  for _ in $(seq 200); do grep -q "poll lcore" "$tmp/nh.out" "$tmp/nh.err" && break; sleep 0.1; done
  if ! grep -q "poll lcore" "$tmp/nh.out" "$tmp/nh.err"; then
    echo "FAIL: $1: rdgram-fwd did not start:"; cat "$tmp/nh.out" "$tmp/nh.err"; fail=1
  elif grep -qi "capture" "$tmp/nh.err" "$tmp/nh.out"; then
    echo "FAIL: $1: capture auto spoke of capture, though none was asked for:"; cat "$tmp/nh.err"; fail=1
  else
    echo "$1: capture auto: started, nothing said about capture"
  fi
  if [ "$3" -eq 0 ]; then
    :
  elif timeout 20 dpdk-dumpcap --file-prefix="rdgram-${pids[0]}" -i net_null0 -c 1 -w "$tmp/no.pcapng" >"$tmp/no.log" 2>&1; then
    echo "FAIL: $1: dpdk-dumpcap attached to an app without a shared configuration"; fail=1
  else
    echo "  dpdk-dumpcap against it: $(grep -m1 'EAL: Cannot' "$tmp/no.log")"
  fi
  kill -TERM "${pids[0]}"; bounded_wait "${pids[0]}" 20; pids=()
  "$fwd" -- --capture on --port net_null0 --duration 2 >"$tmp/on.out" 2>"$tmp/on.err"
  local rc=$?
  echo "$1: --capture on: exit $rc: $(cat "$tmp/on.err")"
  [ $rc -eq 1 ] && [ "$(grep -c . "$tmp/on.err")" -eq 1 ] && grep -q "^rdgram-fwd: capture on: $2" "$tmp/on.err" \
    || { echo "FAIL: $1: --capture on did not refuse with one line saying '$2'"; cat "$tmp/on.out"; fail=1; }
}
/usr/bin/python3 - "$tmp/huge/holder" "$free_file" >"$tmp/holder.out" 2>&1 <<'PY' &
import mmap, os, sys, time
n = int(open(sys.argv[2]).read())
fd = os.open(sys.argv[1], os.O_CREAT | os.O_RDWR, 0o600)
os.ftruncate(fd, n << 21)
m = mmap.mmap(fd, n << 21)
for i in range(n):
    m[i << 21] = 1
print(f"holding {n} hugepages", flush=True)
time.sleep(60)
PY
holder=$!
for _ in $(seq 100); do grep -q holding "$tmp/holder.out" && break; sleep 0.1; done
echo "$(cat "$tmp/holder.out"); free now $(cat "$free_file")"
no_capture "all taken" "all [0-9]* hugepages of 2048 kB are taken" 1
kill -TERM "$holder"; bounded_wait "$holder" 5; holder=
rm -f "$tmp/huge/holder"
umount "$tmp/huge"
no_capture "no mount" "no hugetlbfs mount" 0
exit $fail
