#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright(c) 2026 The rdgram authors
#
# rdgram-perf --workers 2 on the soft driver, the main lcore one of the
# workers (-l 0,1), each worker's accounting closing on its own:
#  - txonly on net_null (2 queues): each worker sends -n messages, all
#    built into frames (tx_pkts) on its own queue, none pending; the JSON
#    line is the sum and carries each worker's figures;
#  - two processes over net_memif with 2 queues a side (queue i to queue
#    i), 2 workers each: worker i's bandwidth messages all counted by the
#    server's worker i, the summed tables, no drop under any name;
#  - bad input: one "rdgram-perf:" line and exit 2.
# Usage: perf_workers.sh RDGRAM_PERF CONFIG_DIR
set -u
. "$(dirname "$0")/lib.sh"
perf=$1
cfgdir=$2
eal=(-l 0,1 --no-huge --no-shconf --no-pci -m 512 --log-level=lib.eal:error)
tmp=$(mktemp -d)
spid=
trap '[ -n "$spid" ] && kill $spid 2>/dev/null; rm -rf "$tmp"' EXIT
fail=0

# ---- txonly on net_null, 2 workers --------------------------------------
n=300000
"$perf" "${eal[@]}" --file-prefix "rdgram-wk$$" -- --mode client --test txonly -n $n -s 64 \
  --port net_null0 --status-interval 0 --workers 2 --json >"$tmp/tx.out" 2>"$tmp/tx.err"
rc=$?
cat "$tmp/tx.out" "$tmp/tx.err"
[ $rc -eq 0 ] || { echo "FAIL: txonly --workers 2: exit $rc"; fail=1; }
for w in 0 1; do
  grep -Eq "^ worker $w: lcore [0-9]+ \(cpu [0-9]+\), QPN 0x[0-9a-f]+ -> 0x[0-9a-f]+: txonly $n sent, [0-9.]+ Mpps = tx_pkts $n \+ tx drops 0, 0 pending: closes$" "$tmp/tx.err" \
    || { echo "FAIL: txonly worker $w: its accounting does not close"; fail=1; }
done
# The two workers ran on the two lcores, the main lcore (0) among them.
[ "$(grep -Eo '^ worker [01]: lcore [0-9]+' "$tmp/tx.err" | awk '{print $4}' | sort | tr '\n' ' ')" = "0 1 " ] \
  || { echo "FAIL: txonly: the workers are not lcores 0 and 1"; fail=1; }
/usr/bin/python3 - "$tmp/tx.out" $n <<'PY' || fail=1
import json, sys
lines = [l for l in open(sys.argv[1]) if l.startswith("{")]
n = int(sys.argv[2])
bad = []
if len(lines) != 1:
    bad.append("%d JSON lines, want 1" % len(lines))
else:
    j = json.loads(lines[0])
    w = j.get("workers", [])
    if j["iterations"] != 2 * n:
        bad.append("summed iterations %d, want %d" % (j["iterations"], 2 * n))
    if [x["worker"] for x in w] != [0, 1] or any(x["iterations"] != n for x in w):
        bad.append("per-worker detail wrong: %s" % w)
    # The sum's rate: every message over the longer worker's time.
    if w and abs(j["msg_rate_mpps"] - 2 * n / max(x["seconds"] for x in w) / 1e6) > 0.01 * j["msg_rate_mpps"]:
        bad.append("msg_rate_mpps %.3f is not the sum over the longer worker's time" % j["msg_rate_mpps"])
for b in bad:
    print("FAIL: txonly JSON:", b)
sys.exit(1 if bad else 0)
PY

# ---- two processes over net_memif, 2 workers a side ----------------------
# Four poll threads on two CPUs: few iterations (the latency test is then
# the scheduler's, which is not what this checks).
sock=$tmp/memif.sock
n=300
common=(-c "$cfgdir/memif-pair.toml" --timeout 60 -s 128 --workers 2 --status-interval 0 -n $n --warmup 10)
"$perf" "${eal[@]}" --file-prefix "rdgram-wks$$" -- "${common[@]}" --mode server \
  --port "net_memif0,role=server,id=0,socket=$sock,socket-abstract=no" >"$tmp/server.out" 2>&1 &
spid=$!
wait_socket "$sock" || exit 1
"$perf" "${eal[@]}" --file-prefix "rdgram-wkc$$" -- "${common[@]}" --mode client \
  --port "net_memif0,role=client,id=0,socket=$sock,socket-abstract=no" >"$tmp/client.out" 2>&1
crc=$?
wait $spid
src=$?
spid=
check_pair "$tmp" $crc $src $((2 * n)) || fail=1
for w in 0 1; do
  grep -Eq "^ worker $w: .*: lat $n samples, .* bw $n sent, [0-9.]+ Mpps, $n received by the server's worker $w: closes$" "$tmp/client.out" \
    || { echo "FAIL: memif client worker $w: its accounting does not close"; fail=1; }
  grep -q "^ server worker $w: .*: answered $n data messages in the last test$" "$tmp/server.out" \
    || { echo "FAIL: memif server worker $w did not answer $n"; fail=1; }
done
grep -q "^ client counters, summed over 2 workers:" "$tmp/client.out" \
  || { echo "FAIL: memif: no summed counters"; fail=1; }

# ---- bad input -----------------------------------------------------------
# bad NAME WANT_PATTERN EAL_LCORES ARGS...: exit 2, one "rdgram-perf:"
# line matching the pattern, nothing run.
bad() {
  local name=$1 pat=$2 lc=$3
  shift 3
  timeout 60 "$perf" -l "$lc" "${eal[@]:2}" --file-prefix "rdgram-wkb$$" -- "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$? lines
  lines=$(grep -c '^rdgram-perf:' "$tmp/err")
  echo "$name: exit $rc; $(grep '^rdgram-perf:' "$tmp/err")"
  if [ $rc -ne 2 ] || [ "$lines" -ne 1 ] || ! grep -q "^rdgram-perf: .*$pat" "$tmp/err"; then
    echo "FAIL: $name: want exit 2 and one line matching '$pat'"; cat "$tmp/out" "$tmp/err"; fail=1
  fi
  if grep -q 'MsgRate\|t_typical' "$tmp/out"; then
    echo "FAIL: $name: ran a test"; fail=1
  fi
}
bad "beyond the lcores" "--workers 3: only 2 lcore(s) given to the EAL (-l)" 0,1 \
  --mode client --test txonly -n 1000 --port net_null0 --workers 3
bad "loopback needs 2 a worker" "--workers 2 in loopback runs 4 poll threads" 0,1 --workers 2 -n 1000
bad "zero workers" "--workers" 0,1 --workers 0
bad "not a number" "--workers" 0,1 --workers two
printf '[perf]\nworkers = 0\n' >"$tmp/w0.toml"
bad "workers = 0" "w0.toml:2:11: key 'perf.workers'" 0,1 -c "$tmp/w0.toml"
bad "the tools speak for one QP" "speaks for one QP" 0,1 --workers 2 --mode client --port net_null0 \
  --oob 127.0.0.1:18599 --oob-proto perftest --test lat
bad "one histogram" "one worker's histogram" 0,1 --workers 2 --hist-csv "$tmp/h.csv"
printf '[perf]\ndriver = "verbs"\n' >"$tmp/verbs.toml"
bad "RDMA driver, two workers, a server test" "runs --test txonly only" 0,1 -c "$tmp/verbs.toml" \
  --mode client --workers 2 --test bw
exit $fail
