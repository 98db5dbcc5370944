#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright(c) 2026 The rdgram authors
#
# rdgram-coll procs mode on real ports: N ranks, each a process whose soft
# device runs on net_af_packet (or net_af_xdp) on its own veth, the veths'
# peers ports of one Linux bridge, all in one network namespace
# (tests/integration/lib.sh fabric_up) with the TCP rendezvous on its
# loopback. Every rank must pass with every collective verified, resolve
# every peer by ARP through the bridge to the MAC the peer published, and
# close its accounting exactly (sent = port sent + refused; port received
# = app received + named drops; every mbuf back). With --loss, the bridge
# ports of ranks 1 and 2 drop that share of the RoCEv2 frames they forward
# (an nftables rule; tc netem where nft is missing): the collectives' loss
# recovery must survive it (retransmissions counted). Over the job, every
# frame sent is received, dropped under a named reason at a receiver or by
# the bridge (counted by its rule), or missed (a full af_packet ring,
# counted by the kernel); a rest (late frames) is printed, at most 1%.
# Needs root (ip netns); skips (77) with the reason otherwise. Everything
# it creates is removed on exit, on failure too. Every run is under timeout.
# Usage: coll_bridge.sh RDGRAM_COLL [--ranks N] [--iters K] [--loss PCT]
#          [--pmd af_packet|af_xdp] [--launchers|--mpirun] [--limit S] [-- COLL_ARGS...]
#   --launchers: rank 1 takes its rank from mpirun's environment, rank 2
#   from a PMIx server's (OMPI_COMM_WORLD_*, PMIX_RANK), the rest from --rank.
#   --mpirun: the job is launched by Open MPI's mpirun inside the namespace,
#   one command line for every rank, the PMIx bootstrap (no --rank, --ranks
#   or --rendezvous); skips (77) without mpirun or a PMIx build.
#   --limit: seconds the whole job may take (default 60).
#   KEEP=1 in the environment copies the ranks' outputs to /tmp/coll_bridge_keep.
set -u
coll=$1
shift
n=4 iters=30 loss= pmd=af_packet launchers=0 limit=60 mpi=0
while [ $# -gt 0 ]; do
  case $1 in
  --ranks) n=$2; shift 2 ;;
  --iters) iters=$2; shift 2 ;;
  --loss) loss=$2; shift 2 ;;
  --pmd) pmd=$2; shift 2 ;;
  --launchers) launchers=1; shift ;;
  --mpirun) mpi=1; shift ;;
  --limit) limit=$2; shift 2 ;;
  --) shift; break ;;
  *) echo "usage: $0 RDGRAM_COLL [--ranks N] [--iters K] [--loss PCT] [--pmd P] [--launchers|--mpirun] [--limit S] [-- ARGS]"; exit 2 ;;
  esac
done
extra=("$@")
# net_af_xdp's and libpmix's own leaks (tests/lsan.supp), for the ASan tree.
export LSAN_OPTIONS="print_suppressions=0:suppressions=$(cd "$(dirname "$0")/.." && pwd)/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root for ip netns"; exit 77; }
command -v ip >/dev/null || { echo "SKIP: iproute2 missing"; exit 77; }
if [ $mpi -eq 1 ]; then
  command -v mpirun >/dev/null || { echo "SKIP: no mpirun (Debian: openmpi-bin)"; exit 77; }
  "$coll" -l 0 --no-huge --no-shconf -m 64 --no-pci -- --mode procs --bootstrap pmix 2>&1 | grep -q 'this build has none' \
    && { echo "SKIP: rdgram-coll built without PMIx (libpmix-dev)"; exit 77; }
fi
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
ns=rdcb$$
tmp=$(mktemp -d)
cleanup() {
  local p
  for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
  fabric_down "$ns"
  # The ranks' EAL runtime directories (every rank's --file-prefix starts
  # with $ns-): DPDK 22.11 empties its own but leaves the directory.
  rm -rf "${XDG_RUNTIME_DIR:-/var/run}/dpdk/$ns"-* /var/run/dpdk/"$ns"-* 2>/dev/null
  [ -n "${KEEP:-}" ] && cp -r "$tmp" /tmp/coll_bridge_keep; rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
fabric_up "$ns" "$n" 2>"$tmp/up.err" || { echo "SKIP: $(cat "$tmp/up.err")"; exit 77; }
port="net_af_packet{rank},iface=rdc{rank}"
if [ "$pmd" = af_xdp ]; then
  port="net_af_xdp{rank},iface=rdc{rank}"
  # Probe: one port up and down, or skip with the PMD's own reason.
  ip netns exec "$ns" timeout 20 "$coll" -l 0,1 --no-huge --no-shconf -m 128 --no-pci --log-level=lib.eal:error \
    --file-prefix "$ns-probe" --vdev "net_af_xdp9,iface=rdc0" -- --ranks 1 --iters 1 >"$tmp/probe.out" 2>&1 \
    || { echo "SKIP: net_af_xdp does not work here: $(grep -v -e TELEMETRY -e avx512 "$tmp/probe.out" | head -3 | tr '\n' ' ')"; exit 77; }
fi
if [ -n "$loss" ]; then
  for i in 1 2; do
    fabric_loss "$ns" "$i" "$loss" 2>"$tmp/loss.err" || { echo "SKIP: $(cat "$tmp/loss.err")"; exit 77; }
  done
fi

rdv=$((20000 + $$ % 20000))
common=(--mode procs --iters "$iters" --timeout $((limit - 10)) --rendezvous "127.0.0.1:$rdv" --port "$port"
)
pids=()
SECONDS=0
fail=0
if [ $mpi -eq 1 ]; then
  # One command line for all: {rank} is each rank's (EAL prefix, JSON).
  # shellcheck disable=SC2046
  ip netns exec "$ns" timeout "$limit" mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$n" \
    --output-filename "$tmp/mpi" "$coll" -l 0,1 --no-huge --no-shconf -m 128 --no-pci --log-level=lib.eal:error \
    --file-prefix "$ns-{rank}" -- --mode procs --iters "$iters" --timeout $((limit - 10)) --port "$port" \
    --json "$tmp/r{rank}.json" "${extra[@]}" >"$tmp/mpirun.log" 2>&1
  rc=$?
  [ $rc -eq 0 ] || { echo "FAIL: mpirun -np $n exit $rc"; cat "$tmp/mpirun.log"; fail=1; }
  # mpirun's per-rank files (rank.N, zero-padded from 10 ranks on).
  for d in "$tmp"/mpi/1/rank.*; do
    r=$((10#${d##*.}))
    cp "$d/stdout" "$tmp/r$r.out" 2>/dev/null; cp "$d/stderr" "$tmp/r$r.err" 2>/dev/null
    [ $rc -eq 0 ] || cat "$tmp/r$r.out" "$tmp/r$r.err"
  done
  launchers=2
fi
# Highest rank first: the rendezvous waits for rank 0.
for ((r = n - 1; r >= 0 && mpi == 0; r--)); do
  envs=() rk=(--ranks "$n" --rank "$r")
  if [ $launchers -eq 1 ] && [ $r -eq 1 ]; then envs=(OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE="$n") rk=(); fi
  if [ $launchers -eq 1 ] && [ $r -eq 2 ]; then envs=(PMIX_RANK=2 PMIX_NAMESPACE=collbridge) rk=(--ranks "$n"); fi
  # Each rank on both CPUs, starting on a different one; its own EAL prefix.
  ip netns exec "$ns" env "${envs[@]}" timeout "$limit" stdbuf -oL "$coll" -l $((r % 2)),$(((r + 1) % 2)) --no-huge \
    --no-shconf -m 128 --no-pci --log-level=lib.eal:error --file-prefix "$ns-$r" -- "${common[@]}" "${rk[@]}" \
    --json "$tmp/r$r.json" "${extra[@]}" >"$tmp/r$r.out" 2>"$tmp/r$r.err" &
  pids[r]=$!
done
for ((r = 0; r < n && mpi == 0; r++)); do
  wait "${pids[r]}"; rc=$?
  if [ $rc -ne 0 ]; then echo "FAIL: rank $r exit $rc"; cat "$tmp/r$r.out" "$tmp/r$r.err"; fail=1; fi
done
took=$SECONDS
bridge_drops=$(fabric_drops "$ns")
exact=0
fabric_loss_exact "$ns" && exact=1
[ $fail -eq 0 ] || exit 1

python3 - "$tmp" "$n" "$iters" "$bridge_drops" "$launchers" "${loss:-0}" "$exact" <<'PY' || fail=1
import json, sys
tmp, n, iters, bdrops, launchers, loss = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
exact = loss == 0 or sys.argv[7] == "1"
bad = []
tx = rx = rxd = missed = retx = 0
for r in range(n):
    d = json.load(open("%s/r%d.json" % (tmp, r)))
    out = open("%s/r%d.out" % (tmp, r)).read()
    if d["result"] != "PASS" or d["verified"] != 3 * iters or d["verify_failed"] != 0:
        bad.append("rank %d: %s, verified %d" % (r, d["result"], d["verified"]))
    if d["accounting"] != "closed" or d["mbufs_leaked"] != 0:
        bad.append("rank %d: accounting %s, %d mbufs leaked" % (r, d["accounting"], d["mbufs_leaked"]))
    if d["arp_matched"] != n - 1:
        bad.append("rank %d: %d of %d peers resolved by ARP to their MAC" % (r, d["arp_matched"], n - 1))
    if d["port"]["held_overflow"] != 0:
        bad.append("rank %d: %d early datagrams dropped" % (r, d["port"]["held_overflow"]))
    if d["port"]["counters"].get("rx_to_control", 0) == 0:
        bad.append("rank %d: no ARP frame reached its control thread" % r)
    want = {1: "Open MPI", 2: "PMIx"}.get(r, "command line") if launchers == 1 else "PMIx" if launchers == 2 else "command line"
    if d["launcher"] != want:
        bad.append("rank %d: launcher %s, expected %s" % (r, d["launcher"], want))
    if "switch" in out:
        bad.append("rank %d: procs mode reported a switch" % r)
    # Frames that were never a rank's RoCEv2 datagram (another protocol
    # on the link) are named drops but not part of what ranks sent.
    other = sum(d["port"]["counters"].get(k, 0) for k in ("rx_not_ip", "rx_not_udp", "rx_not_roce"))
    tx += d["port"]["sent"]; rx += d["port"]["received"]; rxd += d["port"]["rx_drops"] - other
    missed += d["port"]["imissed"]; retx += d["retransmits"]
# Over the job: every RoCEv2 frame a port sent was received, dropped under
# a named reason at a receiver, or dropped by the bridge (netem's count
# includes ARP frames: then at most that many), or missed by a port: a
# net_af_packet port's missed are the frames its ring had no room for
# (the kernel's PACKET_STATISTICS tp_drops, which the soft port layer adds
# to imissed), of every kind: 32 ranks on 2 CPUs overflow rings by the
# thousand, with the ARP storm at their start among them. So what was not
# received must be >= 0 and at most the missed frames, but for a small
# rest, printed: frames that reached a receiver after it stopped, at most
# 1% of what was sent (2% when the ranks' poll threads outnumber the CPUs
# eightfold).
import os
cpus = len(os.sched_getaffinity(0))
lost = tx - (rx + rxd) - (bdrops if exact else 0)
rest = max(0, lost - missed)
allowed = tx // (50 if n > 8 * cpus else 100)
if lost < 0 and exact or rest > allowed + (0 if exact else bdrops):
    bad.append("job: sent %d, received %d + rx drops %d + bridge drops %d: %d not received, %d of them beyond "
               "the %d missed" % (tx, rx, rxd, bdrops, lost, rest, missed))
if loss > 0 and (bdrops == 0 or retx == 0):
    bad.append("loss %.1f%%: bridge dropped %d, retransmits %d: loss recovery not exercised" % (loss, bdrops, retx))
d0 = json.load(open("%s/r0.json" % tmp))
if len(d0["job_storm"]) != n or not all(s["start_to_ahs_ms"] > 0 for s in d0["job_storm"]):
    bad.append("rank 0 gathered %d storm times" % len(d0["job_storm"]))
if launchers == 2 and d0["bootstrap"] != "PMIx":
    bad.append("rank 0's bootstrap: %s" % d0["bootstrap"])
for b in bad:
    print("FAIL:", b)
c = d0["collectives"]
print("job: %d ranks, sent %d = received %d + rx drops %d + bridge drops %d + not received %d (missed %d, rest %d); retransmits %d; "
      "rank 0 p50/p99 us: barrier %.0f/%.0f allgather %.0f/%.0f alltoall %.0f/%.0f; storm max %.1f ms; "
      "start barrier to AHs to all peers max %.1f ms"
      % (n, tx, rx, rxd, bdrops, lost, missed, rest, retx, c["barrier"]["p50_us"], c["barrier"]["p99_us"],
         c["allgather"]["p50_us"], c["allgather"]["p99_us"], c["alltoall"]["p50_us"], c["alltoall"]["p99_us"],
         max(s["ms"] for s in d0["job_storm"]), max(s["start_to_ahs_ms"] for s in d0["job_storm"])))
sys.exit(1 if bad else 0)
PY
grep -h 'accounting:' "$tmp/r0.out"
[ $fail -eq 0 ] && echo "PASS: $n ranks on $pmd behind a bridge${loss:+, $loss% loss on 2 ports}$([ $mpi -eq 1 ] && echo ", under mpirun with PMIx"), ${took} s"
exit $fail
