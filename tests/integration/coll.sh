#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright(c) 2026 The rdgram authors
#
# rdgram-coll end to end on the soft driver: 8 ranks as state machines in one
# process with receive drops (every barrier, allgather and alltoall
# verified at every rank, retransmissions > 0), the same with the poll lcore
# sleeping when idle, on two poll threads (--workers 2, the accounting
# closing per worker), the runnable config, and refusals of bad options and
# configs (one line, exit 2). On the verbs driver over rxe: the lab's
# lab_coll_rxe. Ranks as processes on real ports:
# coll_bridge.sh. Every run is under `timeout`.
# Usage: coll.sh RDGRAM_COLL CONFIG_DIR
set -u
coll=$1
cfgdir=$2
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
fail=0
eal() { echo "-l $1 --no-huge --no-shconf -m $2 --no-pci --log-level=lib.eal:error --file-prefix rdgram-colltest$$-$3"; }
# check OUT RANKS_HERE ITERS: the report says PASS, every collective
# verified, none failed.
check() {
  local out=$1 here=$2 iters=$3 want
  want=$((here * iters * 3))
  grep -q '^result: PASS$' "$out" || { echo "FAIL: $out: no PASS"; cat "$out"; return 1; }
  grep -q "verified: $want  failed: 0" "$out" || { echo "FAIL: $out: expected $want verified, 0 failed"; cat "$out"; return 1; }
  grep -q '^  accounting: .*: closed$' "$out" || { echo "FAIL: $out: accounting does not close"; cat "$out"; return 1; }
  for op in barrier allgather alltoall; do
    grep -Eq "^  $op +[0-9.]+ +[0-9.]+ +[0-9.]+ +$((here * iters))\$" "$out" || { echo "FAIL: $out: no $op latency row"; return 1; }
  done
  return 0
}
counter() { grep -Eo "$2: [0-9]+" "$1" | head -1 | grep -Eo '[0-9]+$'; }

# 1. Eight ranks, threads mode, 5% of received datagrams dropped.
timeout 60 "$coll" $(eal 0,1 512 t) -- --ranks 8 --iters 100 --drop-rate 0.05 --seed 7 --json "$tmp/t8.json" \
  >"$tmp/t8.out" 2>"$tmp/t8.err"
rc=$?
if [ $rc -ne 0 ]; then echo "FAIL: threads 8 ranks exit $rc"; cat "$tmp/t8.out" "$tmp/t8.err"; fail=1
elif check "$tmp/t8.out" 8 100; then
  rt=$(counter "$tmp/t8.out" retransmits); dr=$(counter "$tmp/t8.out" 'dropped \(--drop-rate\)')
  [ "${rt:-0}" -gt 0 ] && [ "${dr:-0}" -gt 0 ] || { echo "FAIL: drops $dr retransmits $rt: loss recovery not exercised"; fail=1; }
  [ "$(grep -c '^  rank ' "$tmp/t8.out")" -eq 8 ] || { echo "FAIL: not 8 per-rank storm times"; fail=1; }
  grep -q '7/7 created' "$tmp/t8.out" && ! grep -E '^  rank .* [0-6]/7 created' "$tmp/t8.out" \
    || { echo "FAIL: AH storm incomplete"; fail=1; }
  grep -q 'storm ms: min [0-9.]*  median [0-9.]*  max [0-9.]*' "$tmp/t8.out" || { echo "FAIL: no storm summary"; fail=1; }
  # --json carries the same results as the table.
  python3 - "$tmp/t8.json" "$rt" "$dr" <<'PY' || { echo "FAIL: --json"; cat "$tmp/t8.json"; fail=1; }
import json, sys
d = json.load(open(sys.argv[1]))
assert d["result"] == "PASS" and d["ranks"] == 8 and d["local_ranks"] == 8, d
assert len(d["storm"]) == 8 and all(s["created"] == 7 and s["ms"] > 0 for s in d["storm"]), d["storm"]
assert set(d["collectives"]) == {"barrier", "allgather", "alltoall"}, d["collectives"]
assert all(c["samples"] == 800 and 0 < c["p50_us"] <= c["p99_us"] <= c["max_us"] for c in d["collectives"].values())
assert d["verified"] == 2400 and d["verify_failed"] == 0, d
assert d["retransmits"] == int(sys.argv[2]) and d["dropped"] == int(sys.argv[3]), d
PY
  echo "threads: 8 ranks ok (dropped $dr, retransmits $rt)"
else fail=1; fi
# Without drops nothing is dropped by the app.
timeout 60 "$coll" $(eal 0,1 512 t) -- --ranks 4 --iters 20 >"$tmp/t4.out" 2>"$tmp/t4.err" \
  && check "$tmp/t4.out" 4 20 && [ "$(counter "$tmp/t4.out" 'dropped \(--drop-rate\)')" = 0 ] \
  || { echo "FAIL: threads 4 ranks without drops"; cat "$tmp/t4.out" "$tmp/t4.err"; fail=1; }

# The poll lcore naps when idle (--idle sleep): the same results, and it
# did sleep.
timeout 60 "$coll" $(eal 0,1 512 t) -- --ranks 8 --iters 50 --drop-rate 0.05 --idle sleep --idle-sleep-us 50 \
  >"$tmp/ts.out" 2>"$tmp/ts.err" && check "$tmp/ts.out" 8 50 \
  && grep -Eq '^  idle sleep \(after 64 empty polls, naps up to 50 us\): empty polls [1-9][0-9]*  yields 0  sleeps [1-9]' "$tmp/ts.out" \
  && grep -q 'accounting: .*: closed$' "$tmp/ts.out" \
  || { echo "FAIL: threads 8 ranks --idle sleep"; cat "$tmp/ts.out" "$tmp/ts.err"; fail=1; }

# Two poll threads on 2 lcores, the main lcore one of them (--workers 2):
# the ranks spread over both (even on worker 0, odd on worker 1), each
# worker's accounting closes on its own and the sums close; the JSON
# carries both workers.
timeout 60 "$coll" $(eal 0,1 512 w) -- --ranks 8 --iters 50 --drop-rate 0.05 --seed 5 --workers 2 \
  --json "$tmp/w2.json" >"$tmp/w2.out" 2>"$tmp/w2.err" && check "$tmp/w2.out" 8 50 \
  && grep -Eq '^  worker 0 \(lcore 1, ranks 0,2,4,6\): verified 600  .*: closed$' "$tmp/w2.out" \
  && grep -Eq '^  worker 1 \(lcore 0, ranks 1,3,5,7\): verified 600  .*: closed$' "$tmp/w2.out" \
  && grep -q '^  driver soft, 2 poll thread(s)$' "$tmp/w2.out" \
  && python3 - "$tmp/w2.json" <<'PY' || { echo "FAIL: threads 8 ranks --workers 2"; cat "$tmp/w2.out" "$tmp/w2.err" "$tmp/w2.json"; fail=1; }
import json, sys
d = json.load(open(sys.argv[1]))
ws = d["workers"]
assert d["driver"] == "soft" and d["result"] == "PASS" and len(ws) == 2, d
assert [w["ranks"] for w in ws] == [[0, 2, 4, 6], [1, 3, 5, 7]], ws
assert all(w["accounting"] == "closed" and w["verified"] == 600 for w in ws), ws
# The workers' figures sum to the job's.
assert sum(w["app_sent"] for w in ws) == d["port"]["sent"] == sum(w["sent"] for w in ws), (ws, d["port"])
assert sum(w["received"] for w in ws) == d["port"]["received"], (ws, d["port"])
assert sum(w["dropped"] for w in ws) == d["dropped"] > 0, (ws, d["dropped"])
PY
[ $fail -eq 0 ] && echo "threads: 8 ranks on 2 workers ok"

# 2. The runnable config (8 ranks, drop rate 0.02), fewer iterations.
timeout 60 "$coll" $(eal 0,1 512 c) -- -c "$cfgdir/rdgram-coll.toml" --iters 20 >"$tmp/cfg.out" 2>"$tmp/cfg.err" \
  && check "$tmp/cfg.out" 8 20 || { echo "FAIL: config/rdgram-coll.toml"; cat "$tmp/cfg.out" "$tmp/cfg.err"; fail=1; }

# 3. Ranks as processes, on real ports behind a bridge: coll_bridge.sh
# (root, a network namespace); under mpirun: coll_mpirun.sh.

# 4. Refusals: one line on stderr, exit 2, before the EAL starts.
printf '[job]\nranks = 4\nfoo = 1\n' >"$tmp/unknown.toml"
printf '[collectives]\ndrop_rate = 0.9\n' >"$tmp/range.toml"
printf '[poll]\nidle = "spin"\n' >"$tmp/idle.toml"
printf '[job\n' >"$tmp/syntax.toml"
printf '[poll]\nworkers = 0\n' >"$tmp/workers.toml"
printf '[job]\ndriver = "rdma"\n' >"$tmp/driver.toml"
while IFS= read -r args; do
  # shellcheck disable=SC2086
  timeout 20 "$coll" $(eal 0,1 256 x) -- $args >"$tmp/bad.out" 2>"$tmp/bad.err"
  rc=$?
  lines=$(grep -vc -e '^TELEMETRY' -e 'avx512' "$tmp/bad.err")
  if [ $rc -ne 2 ] || [ "$lines" -ne 1 ] || ! grep -q '^rdgram-coll: ' "$tmp/bad.err"; then
    echo "FAIL: '$args': exit $rc, $lines lines"; cat "$tmp/bad.err"; fail=1
  fi
done <<EOF_ARGS
--ranks 0
--mode rings
--drop-rate 0.7
--size 5000
--ranks 33
--iters -1
--mode procs --ranks 3 --rank 1
--mode procs --ranks 3 --port net_null0
--mode procs --ranks 3 --rank 3 --port net_null0
--mode procs --ranks 3 --rank 1 --rendezvous 127.0.0.1 --port net_null0
--mode procs --ranks 3 --rank 1 --port net_null0 --idle spin
--idle-sleep-us 0
--no-such-option
-c $tmp/unknown.toml
-c $tmp/range.toml
-c $tmp/idle.toml
-c $tmp/syntax.toml
-c $tmp/missing.toml
--workers 3
--ranks 2 --workers 3
--mode procs --ranks 3 --rank 1 --port net_null0 --workers 2
--driver ib
--driver verbs --port net_null0
--driver verbs --mtu 1024
--device rxe0
--gid-index 1
-c $tmp/workers.toml
-c $tmp/driver.toml
EOF_ARGS
[ $fail -eq 0 ] && echo "refusals ok"
exit $fail
