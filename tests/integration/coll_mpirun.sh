#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright(c) 2026 The rdgram authors
#
# rdgram-coll procs mode under Open MPI's mpirun with the PMIx bootstrap: no
# --rank, --ranks or --rendezvous; every rank on net_af_packet on its own
# veth, behind one Linux bridge (lib.sh fabric_up; needs root, skips 77
# otherwise). Jobs of 4 then 8 ranks run barrier,
# allgather and alltoall, verified byte for byte at every rank; 2 ranks
# that mpirun binds to a core each keep their lcores there; then the
# faults: no PMIx server (one line), endpoint records that disagree (Q_Key,
# MTU, another job: refused with the reason), a rank killed mid-job (mpirun
# ends the job within seconds naming it), a rank stopped mid-job (the others
# give up at their deadline naming it). Every run is under `timeout`; every
# process started here is gone at the end.
# Usage: coll_mpirun.sh RDGRAM_COLL [SANITIZERS]
#   SANITIZERS: meson's b_sanitize; in a sanitizer tree (twice as slow) the
#   8-rank job and the stopped rank are left to the release tree.
set -u
coll=$1
quick=0
[ "${2:-none}" != none ] && quick=1
# libpmix's own leaks (tests/lsan.supp), for the ASan tree.
export LSAN_OPTIONS="print_suppressions=0:suppressions=$(cd "$(dirname "$0")/.." && pwd)/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
command -v mpirun >/dev/null || { echo "SKIP: no mpirun (Debian: openmpi-bin)"; exit 77; }
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root for ip netns (the ranks' bridge)"; exit 77; }
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
tmp=$(mktemp -d)
pfx=rdgram-collmpi$$
mpipid=
# The fabric: one namespace with a bridge and 8 veths (lib.sh fabric_up);
# mpirun and its ranks run inside it (PMIx on its loopback), rank r on
# net_af_packet on rdc<r>.
ns=rdcm$$
cleanup() {
  local p
  [ -n "$mpipid" ] && kill -KILL "$mpipid" 2>/dev/null
  # Every process of this test's namespace (ranks, orted).
  for p in $(ip netns pids "$ns" 2>/dev/null); do kill -CONT "$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null; done
  fabric_down "$ns"
  # The EAL runtime directories of ranks mpirun killed (a clean exit
  # removes its own).
  rm -rf "${XDG_RUNTIME_DIR:-/var/run}/dpdk/$pfx"-* /var/run/dpdk/"$pfx"-* 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
fabric_up "$ns" 8 2>"$tmp/up.err" || { echo "SKIP: $(cat "$tmp/up.err")"; exit 77; }
fail=0
# Every rank gets the same EAL arguments; the app adds a --file-prefix per
# rank from the PMIx namespace and rank (the jobs that end cleanly), or
# takes {rank} in the one given (the jobs killed here, whose runtime
# directories cleanup removes).
eal="-l 0,1 --no-huge --no-shconf -m 256 --no-pci --log-level=lib.eal:error"
ealk="$eal --file-prefix $pfx-{rank}"
mpi="ip netns exec $ns mpirun --allow-run-as-root --oversubscribe --bind-to none"
# Every job's ranks on the bridge; the poll lcores nap when idle (8 ranks
# share 2 cores).
common() { echo "--mode procs --port net_af_packet{rank},iface=rdc{rank} --idle sleep"; }
SECONDS=0

# 0. Without a PMIx server: --bootstrap pmix is one line, exit 2. A build
# without libpmix says so: skip.
timeout 20 "$coll" $eal -- --mode procs --bootstrap pmix --port net_null0 >"$tmp/np.out" 2>"$tmp/np.err"
rc=$?
if grep -q 'this build has none' "$tmp/np.err"; then echo "SKIP: rdgram-coll built without PMIx (libpmix-dev)"; exit 77; fi
lines=$(grep -vc -e '^TELEMETRY' -e 'avx512' "$tmp/np.err")
if [ $rc -ne 2 ] || [ "$lines" -ne 1 ] || ! grep -q '^rdgram-coll: PMIx: no PMIx server answers' "$tmp/np.err"; then
  echo "FAIL: --bootstrap pmix without a server: exit $rc, $lines lines"; cat "$tmp/np.err"; fail=1
fi
# A stale server address in the environment (auto takes PMIx): the same.
env PMIX_NAMESPACE=gone PMIX_RANK=0 PMIX_SERVER_URI41='0.0;tcp4://127.0.0.1:1' \
  timeout 20 "$coll" $eal -- --mode procs --port net_null0 >"$tmp/np.out" 2>"$tmp/np.err"
rc=$?
if [ $rc -ne 2 ] || ! grep -q '^rdgram-coll: PMIx: no PMIx server answers' "$tmp/np.err"; then
  echo "FAIL: a stale PMIX_SERVER_URI41: exit $rc"; cat "$tmp/np.err"; fail=1
fi
[ $fail -eq 0 ] && echo "no server: one line ok"

# check DIR N ITERS: every rank of the job passed with every collective
# verified, took its rank from PMIx, and rank 0 gathered N figures of each.
check() {
  local d=$1 n=$2 iters=$3 r f ok=0
  for ((r = 0; r < n; r++)); do
    f=$(echo "$d"/1/rank.$r/stdout)
    if ! [ -f "$f" ] || ! grep -q '^result: PASS$' "$f" || ! grep -q "verified: $((iters * 3))  failed: 0" "$f" \
      || ! grep -q "^rdgram-coll: $n ranks, mode procs (PMIx), exchange .* ms, bootstrap PMIx$" "$f" \
      || ! grep -q "start barrier (PMIx fence) to AHs to all peers: [0-9.]* ms" "$f"; then
      echo "FAIL: $d rank $r"; cat "$f" "$d/1/rank.$r/stderr" 2>/dev/null; ok=1; continue
    fi
    for op in barrier allgather alltoall; do
      grep -Eq "^  $op +[0-9.]+ +[0-9.]+ +[0-9.]+ +$iters\$" "$f" || { echo "FAIL: $f: no $op row"; ok=1; }
    done
  done
  f=$d/1/rank.0/stdout
  [ "$(grep -A$(((n + 7) / 8)) 'start barrier (PMIx fence) to AHs to all peers, all ranks' "$f" | tail -n +2 |
    grep -Eo '[0-9]+\.[0-9]+' | wc -l)" -eq "$n" ] || { echo "FAIL: rank 0 did not gather $n start-to-AH times"; ok=1; }
  grep -q "$((n - 1))/$((n - 1)) created" "$f" || { echo "FAIL: storm incomplete"; ok=1; }
  return $ok
}

# 1. Jobs of 4 and 8 ranks (the second with 2% receive drops: loss
# recovery under PMIx too).
sizes="4 8"; [ $quick -eq 1 ] && sizes=4
for n in $sizes; do
  extra=""; [ $n -eq 8 ] && extra="--drop-rate 0.02 --seed 3"
  # shellcheck disable=SC2086
  timeout 90 $mpi -np $n --output-filename "$tmp/j$n" "$coll" $eal -- $(common j$n) --iters 10 --timeout 40 $extra \
    --json "$tmp/j$n-{rank}.json" >"$tmp/j$n.log" 2>&1
  rc=$?
  if [ $rc -ne 0 ]; then echo "FAIL: mpirun -np $n exit $rc"; cat "$tmp/j$n.log"; tail -n 30 "$tmp"/j$n/1/rank.*/std* ; fail=1
  elif check "$tmp/j$n" $n 10; then echo "mpirun -np $n: every rank verified ($SECONDS s so far)"
  else fail=1; fi
done
[ $quick -eq 1 ] || python3 - "$tmp/j8-0.json" <<'PY' || { echo "FAIL: rank 0's --json"; cat "$tmp/j8-0.json"; fail=1; }
import json, sys
d = json.load(open(sys.argv[1]))
assert d["result"] == "PASS" and d["ranks"] == 8 and d["bootstrap"] == "PMIx", d
assert len(d["job_storm"]) == 8 and all(s["start_to_ahs_ms"] > 0 for s in d["job_storm"]), d["job_storm"]
assert d["storm"][0]["start_to_ahs_ms"] >= d["storm"][0]["ms"], d["storm"]
assert d["dropped"] > 0 and d["retransmits"] > 0, d
PY

# 1b. Ranks mpirun binds (--bind-to core, 2 ranks: a core each, where
# there are 2): each keeps its lcores on its own core and says so, and its
# threads ran there.
if [ "$(nproc)" -ge 2 ]; then
  # shellcheck disable=SC2086
  timeout 60 ${mpi/--bind-to none/--bind-to core} -np 2 --output-filename "$tmp/bound" "$coll" $eal -- $(common bound) \
    --iters 5 --timeout 30 >"$tmp/bound.log" 2>&1
  rc=$?
  [ $rc -eq 0 ] || { echo "FAIL: --bind-to core: mpirun exit $rc"; cat "$tmp/bound.log"; fail=1; }
  python3 - "$tmp/bound/1" <<'PY' || fail=1
import re, sys
def cpus(l):
    out = []
    for p in l.split(","):
        lo, _, hi = p.partition("-")
        out += range(int(lo), int(hi or lo) + 1)
    return out
ok = True
for r in (0, 1):
    t = open("%s/rank.%d/stdout" % (sys.argv[1], r)).read()
    m = re.search(r"^rdgram-coll: rank %d: placement: local rank %d of 2, bound by the launcher to CPUs (\S+): "
                  r"lcores 0,1 on CPUs (\d+),(\d+); " % (r, r), t, re.M)
    ran = re.search(r"^rdgram-coll: rank %d: lcores ran on: 0 CPU (\S+) \(main\), 1 CPU (\S+) \(poll\)$" % r, t, re.M)
    if not m or not ran or not {int(m[2]), int(m[3])} <= set(cpus(m[1])) or (ran[1], ran[2]) != (m[2], m[3]):
        print("FAIL: --bind-to core, rank %d: placement %s, ran on %s" % (r, m and m[0], ran and ran[0]))
        ok = False
sys.exit(0 if ok else 1)
PY
  [ $fail -eq 0 ] && { echo "mpirun --bind-to core: each rank's lcores on its core:"; grep -h 'placement' "$tmp"/bound/1/rank.*/stdout; }
fi

# 2. Endpoint records that disagree, in one job of 4 (MPMD): rank 1 has
# another Q_Key, rank 2 another MTU, rank 3 another job's name. Each is
# refused with its reason; nothing hangs.
# shellcheck disable=SC2086
timeout 60 $mpi --output-filename "$tmp/bad" -np 1 "$coll" $ealk -- $(common bad) \
  : -np 1 "$coll" $ealk -- $(common bad) --qkey 0x22220000 \
  : -np 1 "$coll" $ealk -- $(common bad) --mtu 1024 \
  : -np 1 "$coll" $ealk -- $(common bad) --job another >"$tmp/bad.log" 2>&1
rc=$?
e() { cat "$tmp/bad/1/rank.$1/stderr" 2>/dev/null; }
if [ $rc -eq 0 ] || [ $rc -eq 124 ]; then echo "FAIL: mismatched records: mpirun exit $rc"; fail=1; fi
e 0 | grep -q "rank 1's endpoint record has Q_Key 0x22220000, this rank's is 0x11110000" \
  || { echo "FAIL: rank 0 did not refuse rank 1's Q_Key"; e 0; fail=1; }
e 1 | grep -q "rank 0's endpoint record has Q_Key 0x11110000, this rank's is 0x22220000" \
  || { echo "FAIL: rank 1 did not refuse rank 0's Q_Key"; e 1; fail=1; }
e 2 | grep -q "rank 0's endpoint record has MTU 2048, this rank's is 1024" \
  || { echo "FAIL: rank 2 did not refuse rank 0's MTU"; e 2; fail=1; }
e 3 | grep -q "rank 0's endpoint record belongs to another job" \
  || { echo "FAIL: rank 3 did not refuse rank 0's job"; e 3; fail=1; }
[ $fail -eq 0 ] && { echo "mismatched records refused ($SECONDS s so far), e.g."; e 3 | grep -v -e '^TELEMETRY' -e avx512; }

# pid_of_rank R: the pid of rank R of the running mpirun job.
pid_of_rank() {
  local p
  for p in $(pgrep -P "$mpipid"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "PMIX_RANK=$1" && { echo "$p"; return 0; }
  done
  return 1
}
# start_long DIR: a 4-rank job long enough to be interrupted, in the
# background; returns once rank 3 is in its collectives.
start_long() {
  # shellcheck disable=SC2086
  $mpi -np 4 --output-filename "$1" "$coll" $ealk -- $(common "$(basename "$1")") --iters 100000 --timeout 4 >"$1.log" 2>&1 &
  mpipid=$!
  for _ in $(seq 300); do
    grep -qs 'start barrier (PMIx fence) to AHs' "$1/1/rank.3/stdout" && return 0
    sleep 0.1
  done
  return 1
}

# 3. A rank killed mid-job: mpirun ends the job and names it.
if start_long "$tmp/kill" && victim=$(pid_of_rank 3); then
  kill -KILL "$victim"; t0=$SECONDS
  for _ in $(seq 200); do kill -0 "$mpipid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$mpipid" 2>/dev/null; then echo "FAIL: mpirun still runs 20 s after rank 3 was killed"; fail=1
  else
    wait "$mpipid"; rc=$?
    [ $rc -ne 0 ] || { echo "FAIL: a killed rank, mpirun exit 0"; fail=1; }
    grep -q 'process rank 3 with PID .* exited on signal 9' "$tmp/kill.log" \
      || { echo "FAIL: mpirun did not name rank 3"; cat "$tmp/kill.log"; fail=1; }
    echo "killed rank 3: job ended in $((SECONDS - t0)) s, mpirun named it"
  fi
else echo "FAIL: the long job did not start"; cat "$tmp/kill.log"; fail=1; fi
mpipid=

# 4. A rank stopped mid-job (hung, not dead): the others give up at their
# deadline (--timeout 4), wait as long again for each other, and name it;
# their exits end the job.
if [ $quick -eq 1 ]; then echo "stopped rank: left to the release tree"
elif start_long "$tmp/stop" && victim=$(pid_of_rank 3); then
  kill -STOP "$victim"; t0=$SECONDS
  for _ in $(seq 300); do
    n=$(cat "$tmp"/stop/1/rank.[012]/stderr 2>/dev/null | grep -c 'collectives timed out after 4.0 s: rank 3 did not arrive')
    [ "$n" -eq 3 ] && break; sleep 0.1
  done
  [ "$n" -eq 3 ] && { echo "stopped rank 3: every other rank named it after $((SECONDS - t0)) s; rank 0 said:"
    grep -v -e '^TELEMETRY' -e avx512 "$tmp/stop/1/rank.0/stderr"; } \
    || { echo "FAIL: $n of 3 ranks named the stopped rank 3"; cat "$tmp"/stop/1/rank.*/stderr; fail=1; }
  kill -CONT "$victim" 2>/dev/null
  for _ in $(seq 200); do kill -0 "$mpipid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$mpipid" 2>/dev/null && { echo "FAIL: mpirun still runs after the others gave up"; fail=1; }
else echo "FAIL: the long job did not start"; cat "$tmp/stop.log"; fail=1; fi
mpipid=

echo "coll_mpirun: $SECONDS s"
exit $fail
