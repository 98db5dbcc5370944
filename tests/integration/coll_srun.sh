#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright(c) 2026 The rdgram authors
#
# rdgram-coll procs mode under a real Slurm: a one-node cluster of its own
# (tests/cluster/slurm.sh: Debian's munged, slurmctld and slurmd, the PMIx
# plugin) inside the fabric's network namespace (lib.sh fabric_up: a
# Linux bridge, one veth per rank), and `srun --mpi=pmix` starting the
# ranks, each on net_af_packet on its veth, the PMIx bootstrap (no --rank,
# --ranks or --rendezvous).
#   job N   a job of N ranks: every rank passes with every collective
#           verified; each prints its placement (lcore_placement.h) and the
#           placements are checked: local ranks 0..N-1, their lcores on
#           distinct CPUs while the task's CPUs suffice, else the line says
#           they share (and they do); and each lcore's thread ran on the CPU
#           placed (the "lcores ran on" line: each thread's own
#           sched_getaffinity once bound; read from outside, a busy
#           process's affinity can take seconds on gVisor). Then a batch
#           script (sbatch --wait) running 2 ranks with srun. Then (N <= 8) 2 ranks of one lcore
#           each (-l 0), which the 2 CPUs here suffice for: distinct CPUs.
#   kill    a 4-rank job (srun -K, --kill-on-bad-exit) in its collectives:
#           rank 3 is killed (SIGKILL): the job ends within 20 s, rank 3
#           named (by srun, or by Slurm's PMIx plugin in slurmd's log when
#           it ended the step first); no rank is left.
# Needs root (namespaces); skips (77) with the reason without Slurm,
# munge, the PMIx plugin or a PMIx build. Every run is under timeout;
# the cluster, the fabric and every process started here are gone at the
# end, on failure too.
# Usage: coll_srun.sh RDGRAM_COLL job N | kill
#   KEEP=1 in the environment copies the outputs and the cluster's logs to
#   /tmp/coll_srun_keep.
set -u
coll=$1
what=${2:-job}
n=${3:-8}
here=$(cd "$(dirname "$0")" && pwd)
# libpmix's own leaks (tests/lsan.supp), for the ASan tree; srun passes
# the environment on to the ranks.
export LSAN_OPTIONS="print_suppressions=0:suppressions=$here/../lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root (network namespace, munged and Slurm's daemons as root)"; exit 77; }
for t in munged mungekey slurmctld slurmd srun sinfo scontrol nsenter; do
  command -v $t >/dev/null || { echo "SKIP: $t missing (Debian: munge slurmctld slurmd slurm-client; scripts/install-deps.sh cluster)"; exit 77; }
done
"$coll" -l 0 --no-huge --no-shconf -m 64 --no-pci -- --mode procs --bootstrap pmix 2>&1 | grep -q 'this build has none' \
  && { echo "SKIP: rdgram-coll built without PMIx (libpmix-dev)"; exit 77; }
# shellcheck source=lib.sh
. "$here/lib.sh"
# shellcheck source=../cluster/slurm.sh
. "$here/../cluster/slurm.sh"
ns=rdsr$$
tmp=$(mktemp -d)
pfx=rdgram-srun$$
srunpid=
cleanup() {
  local p
  [ -n "$srunpid" ] && kill -KILL "$srunpid" 2>/dev/null
  SLURM_STOP_WAIT=3 slurm_down
  # Whatever else runs in the namespace (ranks).
  for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
  fabric_down "$ns"
  rm -rf "${XDG_RUNTIME_DIR:-/var/run}/dpdk/$pfx"-* /var/run/dpdk/"$pfx"-* 2>/dev/null
  [ -n "${KEEP:-}" ] && rm -rf /tmp/coll_srun_keep && cp -r "$tmp" /tmp/coll_srun_keep
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
ranks=$n
[ "$what" = kill ] && ranks=4
fabric_up "$ns" "$ranks" 2>"$tmp/up.err" || { echo "SKIP: $(cat "$tmp/up.err")"; exit 77; }
SECONDS=0
slurm_up "$tmp/slurm" "$ns" || { echo "FAIL: the cluster did not start"; exit 1; }
echo "cluster up in $SECONDS s: $(slurm_in sinfo -h -o '%P %t %c CPUs on %N')"
slurm_in srun --mpi=list 2>&1 | grep -q pmix || { echo "SKIP: Slurm's PMIx plugin missing (slurm-wlm-basic-plugins: mpi_pmix_v4.so)"; exit 77; }
fail=0
eal="-l 0,1 --no-huge --no-shconf -m 128 --no-pci --log-level=lib.eal:error --file-prefix $pfx-{rank}"
app="--mode procs --port net_af_packet{rank},iface=rdc{rank} --idle sleep"
# srun, in the namespace, one output file per rank (%t: the task, = rank).
srun_in=("${slurm_pre[@]}" srun --mpi=pmix --output="$tmp/%x.%t.out" --error="$tmp/%x.%t.err")

# check_placement NAME N LCORES: every rank's line, local ranks 0..N-1,
# distinct CPUs while they suffice, else said and so.
check_placement() {
  local name=$1 k=$2 lc=$3
  python3 - "$tmp" "$name" "$k" "$lc" <<'PY'
import re, sys
tmp, name, n, lc = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
pat = re.compile(r"^rdgram-coll: rank (\d+): placement: local rank (\d+) of (\d+), the task's CPUs (\S+) "
                 r"\(every local rank's\): lcores? ([\d,]+) on CPUs? ([\d,]+); (.*)$")
local_ranks, use, said, tasks, bad = [], {}, set(), set(), []
for r in range(n):
    lines = [m for m in map(pat.match, open("%s/%s.%d.out" % (tmp, name, r))) if m]
    if len(lines) != 1:
        bad.append("rank %d: %d placement lines" % (r, len(lines)))
        continue
    m = lines[0]
    if int(m[1]) != r or int(m[3]) != n:
        bad.append("rank %d: says rank %s, local size %s" % (r, m[1], m[3]))
    local_ranks.append(int(m[2]))
    tasks.add(m[4])
    cpus = [int(c) for c in m[6].split(",")]
    if len(cpus) != lc or len(m[5].split(",")) != lc:
        bad.append("rank %d: lcores %s on CPUs %s" % (r, m[5], m[6]))
    # Where the lcores' threads ran, as each read it of itself once bound.
    ran = [l for l in open("%s/%s.%d.out" % (tmp, name, r)) if l.startswith("rdgram-coll: rank %d: lcores ran on: " % r)]
    want = dict(zip(m[5].split(","), m[6].split(",")))
    got = dict(re.findall(r"(\d+) CPU ([\d,-]+) \((?:main|poll)\)", ran[0])) if len(ran) == 1 else {}
    if got != want:
        bad.append("rank %d: lcores ran on %s, placed on %s" % (r, got, want))
    for c in cpus:
        use.setdefault(c, []).append(r)
    if m[7] != "no CPU shared with another local rank" and not re.fullmatch(
            r"%d lcores on \d+ CPUs: local ranks share CPUs" % (n * lc), m[7]):
        bad.append("rank %d: %r" % (r, m[7]))
    said.add("local ranks share CPUs" in m[7])
if sorted(local_ranks) != list(range(n)):
    bad.append("local ranks %s, expected 0..%d" % (sorted(local_ranks), n - 1))
if len(tasks) != 1:
    bad.append("the ranks saw different task CPUs: %s" % tasks)
else:
    ncpu = 0
    for part in tasks.pop().split(","):
        lo, _, hi = part.partition("-")
        ncpu += int(hi or lo) - int(lo) + 1
    shared = any(len(v) > 1 for v in use.values())
    suffice = ncpu >= n * lc
    if said != {not suffice}:
        bad.append("%d CPUs for %d x %d lcores, yet the lines say shared: %s" % (ncpu, n, lc, said))
    if shared != (not suffice):
        bad.append("%d CPUs for %d x %d lcores, CPUs shared: %s (%s)" % (ncpu, n, lc, shared, use))
    print("placement: %d ranks x %d lcores on %d CPUs: %s, each lcore's thread on its CPU; lcores per CPU %s"
          % (n, lc, ncpu, "shared, as the lines say" if shared else "distinct CPUs, as the lines say",
             {c: len(v) for c, v in sorted(use.items())}))
for b in bad:
    print("FAIL: placement:", b)
sys.exit(1 if bad else 0)
PY
}

# check_job NAME N ITERS: every rank passed with every collective verified
# under PMIx.
check_job() {
  local name=$1 k=$2 iters=$3 r f ok=0
  for ((r = 0; r < k; r++)); do
    f=$tmp/$name.$r.out
    if ! grep -q '^result: PASS$' "$f" || ! grep -q "verified: $((iters * 3))  failed: 0" "$f" \
      || ! grep -q "^rdgram-coll: $k ranks, mode procs (PMIx), exchange .* ms, bootstrap PMIx$" "$f"; then
      echo "FAIL: $name rank $r"; cat "$f" "$tmp/$name.$r.err" 2>/dev/null; ok=1
    fi
  done
  grep -q "$((k - 1))/$((k - 1)) created" "$tmp/$name.0.out" || { echo "FAIL: $name: storm incomplete"; ok=1; }
  return $ok
}

if [ "$what" = job ]; then
  # N ranks of -l 0,1: on 2 CPUs they share them, and say so.
  t0=$SECONDS
  # shellcheck disable=SC2086
  timeout 120 "${srun_in[@]}" -J j$n -n "$n" "$coll" $eal -- $app --iters 10 --timeout 60 \
    --json "$tmp/j$n-{rank}.json" >"$tmp/srun.log" 2>&1
  rc=$?
  if [ $rc -ne 0 ]; then echo "FAIL: srun -n $n exit $rc"; cat "$tmp/srun.log"; tail -n 20 "$tmp"/j"$n".*; fail=1
  elif check_job "j$n" "$n" 10 && check_placement "j$n" "$n" 2; then
    echo "srun --mpi=pmix -n $n: every rank verified in $((SECONDS - t0)) s"
    grep -h 'placement' "$tmp/j$n.1.out"
  else fail=1; fi
  # 2 ranks of one lcore: the 2 CPUs here suffice, each its own (not
  # again in the stress suite's large job).
  [ "$n" -le 8 ] || { slurm_down; echo "coll_srun job $n: $SECONDS s"; exit $fail; }
  t0=$SECONDS
  # shellcheck disable=SC2086
  timeout 60 "${srun_in[@]}" -J one -n 2 "$coll" ${eal/-l 0,1/-l 0} -- $app --iters 10 --timeout 30 >"$tmp/srun1.log" 2>&1
  rc=$?
  if [ $rc -ne 0 ]; then echo "FAIL: srun -n 2 (-l 0) exit $rc"; cat "$tmp/srun1.log" "$tmp"/one.*; fail=1
  elif check_job one 2 10 && check_placement one 2 1; then
    echo "srun -n 2, -l 0: verified in $((SECONDS - t0)) s"; grep -h placement "$tmp"/one.*.out
  else fail=1; fi
fi

if [ "$what" = job ]; then
  # A batch script, as on a cluster (docs/APPS.md), of 2 ranks on this one
  # node: sbatch --wait returns once the job is over.
  t0=$SECONDS
  cat >"$tmp/coll.sbatch" <<EOF
#!/bin/bash
#SBATCH --job-name=rdgram-coll
#SBATCH --nodes=1
#SBATCH --ntasks=2
#SBATCH --output=$tmp/batch.out
srun --mpi=pmix -K "$coll" $eal -- $app --iters 10 --timeout 30 --json '$tmp/batch-{rank}.json'
EOF
  timeout 60 "${slurm_pre[@]}" sbatch --wait "$tmp/coll.sbatch" >"$tmp/sbatch.log" 2>&1
  rc=$?
  if [ $rc -ne 0 ] || [ "$(grep -c '^result: PASS$' "$tmp/batch.out")" -ne 2 ] ||
    [ "$(grep -c 'verified: 30  failed: 0' "$tmp/batch.out")" -ne 2 ] || ! [ -s "$tmp/batch-1.json" ]; then
    echo "FAIL: sbatch exit $rc"; cat "$tmp/sbatch.log" "$tmp/batch.out"; fail=1
  else
    echo "sbatch --wait, 2 ranks under srun in the batch script: both verified in $((SECONDS - t0)) s"
  fi
fi

if [ "$what" = kill ]; then
  # pid_of_rank R: the PID of rank R of the running job, from slurmd
  # (scontrol listpids: PID, job, step, local and global task id). The
  # ranks' /proc/PID/environ is not read: a busy process's takes seconds
  # to read on some kernels (gVisor).
  pid_of_rank() {
    slurm_in scontrol listpids 2>/dev/null | awk -v r="$1" '$1 > 0 && $5 == r && $3 == 0 { print $1; f = 1 } END { exit !f }'
  }
  # shellcheck disable=SC2086
  "${srun_in[@]}" -K -J long -n 4 "$coll" $eal -- $app --iters 1000000 --timeout 90 >"$tmp/long.log" 2>&1 &
  srunpid=$!
  # Running: all 4 ranks launched (slurmd's word), then into their
  # collectives: rank 3 dies.
  t0=$SECONDS
  until [ "$(slurm_in scontrol listpids 2>/dev/null | awk '$1 > 0 && $3 == 0' | wc -l)" -eq 4 ] ||
    [ $((SECONDS - t0)) -ge 30 ]; do sleep 0.2; done
  sleep 3
  if ! victim=$(pid_of_rank 3); then
    echo "FAIL: the long job did not start within 30 s"; cat "$tmp/long.log"; exit 1
  fi
  kill -KILL "$victim"; t0=$SECONDS
  for _ in $(seq 200); do kill -0 "$srunpid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$srunpid" 2>/dev/null; then echo "FAIL: srun still runs 20 s after rank 3 was killed"; fail=1
  else
    wait "$srunpid"; rc=$?
    [ $rc -ne 0 ] || { echo "FAIL: a killed rank, srun exit 0"; fail=1; }
    # srun names task 3 (the others Terminated by -K); or Slurm's PMIx
    # plugin saw the rank's connection lost first and killed the step
    # itself (SIGKILL to all: srun then says tasks 0-3 were Killed), and
    # its slurmstepd names the rank in slurmd's log.
    if grep -q 'srun: error: .*: task 3: Killed' "$tmp/long.log"; then
      echo "srun named task 3"
    elif grep -q 'srun: error: .*: tasks 0-3: Killed' "$tmp/long.log" &&
      grep -q "mpi/pmix_v4: _errhandler: .* source = \[slurm.pmix.[0-9.]*:3\]" "$tmp/slurm/slurmd.log"; then
      echo "Slurm's PMIx plugin ended the step and named rank 3 in slurmd's log: $(grep -o '_errhandler: .*' "$tmp/slurm/slurmd.log" | head -1)"
    else
      echo "FAIL: neither srun nor slurmstepd named rank 3"; cat "$tmp/long.log"; grep '\[1\.0\]' "$tmp/slurm/slurmd.log"; fail=1
    fi
    left=$(for p in $(ip netns pids "$ns"); do grep -lx rdgram-coll "/proc/$p/comm" 2>/dev/null; done | wc -l)
    [ "$left" -eq 0 ] || { echo "FAIL: $left ranks left running"; fail=1; }
    echo "killed rank 3: the job ended in $((SECONDS - t0)) s (exit $rc), srun said:"
    grep -v '^$' "$tmp/long.log"
  fi
  srunpid=
fi

t0=$SECONDS
slurm_down
echo "cluster down in $((SECONDS - t0)) s; coll_srun $what: $SECONDS s"
exit $fail
