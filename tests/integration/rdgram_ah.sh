#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright(c) 2026 The rdgram authors
#
# rdgram-ah end to end on the soft driver: inspect (JSON: every AH the run
# asked for, static and ARP-resolved, held and cached, with consistent
# slots/generations and wire-valid AV bytes), storm (all N ready, p50 <= p99,
# registry figures), bench (rates positive, every lookup a hit), the three
# on two poll threads (--workers 2: the watch split, lookups on both, each
# worker's frames adding up), the runnable config, and refusals of bad
# options and configs (one line, exit 2).
# Usage: rdgram_ah.sh RDGRAM_AH CONFIG_DIR
set -u
ah=$1
cfgdir=$2
eal="-l 0,1 --no-huge --no-shconf -m 512 --no-pci --log-level=lib.eal:error"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
run() { "$ah" $eal --file-prefix "rdgram-ahtest$$" -- "$@"; }

# inspect: 3 static + 2 resolved destinations, 2 flows each = 10 AHs, 3 released.
run --json inspect --dests 3 --resolved 2 --flows 2 --release 3 >"$tmp/inspect.json" 2>"$tmp/inspect.err" \
  || { echo "FAIL: inspect exit $?"; cat "$tmp/inspect.err"; fail=1; }
/usr/bin/python3 - "$tmp/inspect.json" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
e = d["entries"]
def need(c, msg):
    if not c:
        sys.exit("FAIL: inspect: " + msg)
need(d["requested"] == 10 and d["created"] == 10 and len(e) == 10, "10 AHs: %s" % d["created"])
need(d["registry"]["live"] == 10 and d["registry"]["unreferenced"] == 3, "registry %s" % d["registry"])
need(sum(x["state"] == "cached" and x["refcount"] == 0 for x in e) == 3, "3 cached")
need(sum(x["state"] == "held" and x["refcount"] == 1 for x in e) == 7, "7 held")
need(len({x["slot"] for x in e}) == 10, "distinct slots")
need(all(x["generation"] % 2 == 1 for x in e), "live generations are odd (ah_table)")
need(all(x["ahn"] == x["slot"] for x in e), "soft ahn = slot")
static = [x for x in e if x["dest"].startswith("10.2.")]
resolved = [x for x in e if x["dest"].startswith("10.3.")]
need(len(static) == 6 and all(x["neighbour"] == "static" and x["ttl_config_ms"] is None for x in static),
     "static neighbours")
need(len(resolved) == 4 and all(x["neighbour"] in ("reachable", "stale") and x["ttl_config_ms"] == 30000
                                 for x in resolved), "ARP-resolved neighbours")
need(all(x["ttl_left_ms"] is None for x in static), "static neighbours never expire")
need(all((x["neighbour"] == "reachable" and 0 < x["ttl_left_ms"] <= 30000) or
         (x["neighbour"] == "stale" and x["ttl_left_ms"] is None) for x in resolved),
     "resolved neighbours: what is left of the 30 s TTL")
need(all(x["mac"].lower() == "02:00:00:00:a0:02" for x in e), "every destination behind the peer's MAC")
for x in e:
    av = bytes.fromhex(x["av"])
    need(x["av_bytes"] == 42 and len(av) == 42, "IPv4 AV is 42 header bytes")
    need(av[0:6] == bytes.fromhex("02000000a002"), "AV destination MAC")
    need(av[12:14] == b"\x08\x00", "AV ethertype IPv4")
    need(av[23] == 17, "AV IP protocol UDP")
    need(".".join(str(b) for b in av[30:34]) == x["dest"], "AV destination IP")
    need(av[36:38] == b"\x12\xb7", "AV UDP port 4791")
print("inspect ok: %d entries" % len(e))
PY

# storm: 2000 AHs over 200 destinations, and 300 over 100 ARP-resolved ones.
for args in "storm 2000 --dests 200" "storm 300 --dests 100 --resolve"; do
  run --json $args >"$tmp/storm.json" 2>"$tmp/storm.err" || { echo "FAIL: $args exit $?"; cat "$tmp/storm.err"; fail=1; }
  /usr/bin/python3 - "$tmp/storm.json" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
n = d["requested"]
bad = [k for k, ok in (("created", d["created"] == n), ("all_ready", d["all_ready"]), ("ready", d["ready"] == n),
                       ("p50<=p99", 0 < d["ready_p50_ms"] <= d["ready_p99_ms"] <= d["all_ready_ms"]),
                       ("failed", d["failed"] == {}), ("registry", d["registry"]["live"] == n),
                       ("memory", d["registry_memory_bytes"] > 0)) if not ok]
if bad:
    sys.exit("FAIL: storm %s: %s" % (bad, d))
print("storm ok: %d AHs (%s) all ready after %.1f ms, p50 %.1f ms p99 %.1f ms" %
      (n, "resolved" if d["resolved"] else "static", d["all_ready_ms"], d["ready_p50_ms"], d["ready_p99_ms"]))
PY
done

# bench, small.
run --json bench --count 500 --lookup-seconds 0.05 >"$tmp/bench.json" 2>"$tmp/bench.err" \
  || { echo "FAIL: bench exit $?"; cat "$tmp/bench.err"; fail=1; }
/usr/bin/python3 - "$tmp/bench.json" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
if len(d["results"]) != 4 or any(r["per_second"] <= 0 or r["ok"] <= 0 for r in d["results"]):
    sys.exit("FAIL: bench %s" % d)
if d["lookup_hits"] != d["lookups"]:
    sys.exit("FAIL: bench lookups missed")
print("bench ok: " + ", ".join("%s %.0f/s" % (r["test"], r["per_second"]) for r in d["results"]))
PY

# The runnable config, as the docs show it.
run -c "$cfgdir/rdgram-ah.toml" inspect >"$tmp/cfg.out" 2>&1 || { echo "FAIL: config run"; cat "$tmp/cfg.out"; fail=1; }
grep -q 'registry: 12 live of 65536' "$tmp/cfg.out" || { echo "FAIL: config inspect"; cat "$tmp/cfg.out"; fail=1; }

# A port table without devargs: its settings are the ring pair's local
# end's (docs/PORTS.md): its MAC and address in every AV (the VLAN tag is
# added as a frame leaves, so both ends on VLAN 78 is what lets the
# resolved destination's ARP through).
cat >"$tmp/port.toml" <<'EOF'
[port]
mac = "02:00:00:00:09:01"
addresses = ["10.9.0.1", "fd09::1"]
vlan = 78
max_ah = 4096
EOF
run -c "$tmp/port.toml" --json inspect --dests 2 --resolved 1 >"$tmp/port.json" 2>"$tmp/port.err" \
  || { echo "FAIL: inspect on a [port] table exit $?"; cat "$tmp/port.err"; fail=1; }
/usr/bin/python3 - "$tmp/port.json" <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
e = d["entries"]
# dst MAC, src MAC 02:00:00:00:09:01, IPv4 from 10.9.0.1; 10.3.0.1 resolved.
ok = len(e) == 3 and all(x["av"][12:28] == "0200000009010800" and x["av"][52:60] == "0a090001" for x in e)
ok = ok and [x["neighbour"] for x in e if x["dest"] == "10.3.0.1"] == ["reachable"]
ok = ok and all(x["accounting"] == "closed" for x in d["workers"])
if not ok:
    sys.exit("FAIL: the [port] table's mac, vlan, address in the AVs: %s" % d)
print("port table on the ring pair ok: %d AVs from 02:00:00:00:09:01, 10.9.0.1; resolved on VLAN 78" % len(e))
PY

# Refusals: one clear line on stderr, exit 2, before the EAL starts.
# Two poll threads on -l 0,1 (the main lcore one of them): storm's watch
# split between them (every key seen once, by the worker it belongs to),
# bench's lookups on both at once, inspect's ARP frames on queue 0; each
# worker's frames add up.
run --json --workers 2 storm 3000 >"$tmp/w2s.json" 2>"$tmp/w2s.err" \
  || { echo "FAIL: storm --workers 2 exit $?"; cat "$tmp/w2s.err"; fail=1; }
run --json --workers 2 bench --count 2000 --lookup-seconds 0.1 >"$tmp/w2b.json" 2>"$tmp/w2b.err" \
  || { echo "FAIL: bench --workers 2 exit $?"; cat "$tmp/w2b.err"; fail=1; }
run --json --workers 2 inspect --dests 2 --resolved 2 >"$tmp/w2i.json" 2>"$tmp/w2i.err" \
  || { echo "FAIL: inspect --workers 2 exit $?"; cat "$tmp/w2i.err"; fail=1; }
/usr/bin/python3 - "$tmp/w2s.json" "$tmp/w2b.json" "$tmp/w2i.json" <<'PY' || fail=1
import json, sys
s, b, i = (json.load(open(f)) for f in sys.argv[1:4])
def need(c, msg):
    if not c:
        sys.exit("FAIL: --workers 2: " + msg)
for d in (s, b, i):
    w = d["workers"]
    need(len(w) == 2 and [x["lcore"] for x in w] == [1, 0], "two workers, the main lcore last: %s" % w)
    need(all(x["accounting"] == "closed" for x in w), "frames add up per worker: %s" % w)
    need(all(x["local_sent"] == x["peer_received"] + x["left_to_peer"] and
             x["peer_sent"] == x["local_received"] + x["left_to_local"] for x in w), "frame sums %s" % w)
ww = s["watch_workers"]
need(s["all_ready"] and s["ready"] == 3000, "storm all ready: %s" % s)
need([x["watched"] for x in ww] == [1500, 1500] and all(x["seen_ready"] == 1500 and x["pending"] == 0 for x in ww),
     "each worker saw its half ready: %s" % ww)
lw = b["lookup_workers"]
need(len(lw) == 2 and all(x["lookups"] > 0 and x["hits"] == x["lookups"] for x in lw), "both looked up: %s" % lw)
need(sum(x["lookups"] for x in lw) == b["lookups"] == b["lookup_hits"], "lookups summed: %s" % b)
# ARP/ND for the 2 resolved destinations: through queue 0 (worker 0) only.
w0, w1 = i["workers"]
need(w0["local_sent"] >= 2 and w0["peer_sent"] >= 2 and w1["local_sent"] == w1["peer_sent"] == 0,
     "ARP on worker 0's queues: %s" % i["workers"])
PY
[ $fail -eq 0 ] && echo "workers 2: storm, bench, inspect ok"
# More workers than lcores: one line after the EAL's own, exit 2.
run --workers 3 storm 10 >"$tmp/w3.out" 2>"$tmp/w3.err"
rc=$?
lines=$(grep -vc -e '^TELEMETRY' -e 'avx512' -e '^EAL' "$tmp/w3.err")
if [ $rc -ne 2 ] || [ "$lines" -ne 1 ] || ! grep -q '^rdgram-ah: --workers 3: only 2 lcore' "$tmp/w3.err"; then
  echo "FAIL: --workers 3 on 2 lcores: exit $rc, $lines lines"; cat "$tmp/w3.err"; fail=1
fi

printf '[ah]\ncapacity = "big"\n' >"$tmp/bad.toml"
printf '[storm]\nbatchsize = 3\n' >"$tmp/unknown.toml"
printf '[ah]\nworkers = 200\n' >"$tmp/workers.toml"
printf '[ah]\nvlan = 78\n' >"$tmp/oldkey.toml"
for bad in "storm" "storm 10 --bogus" "frobnicate" "storm 0" "--capacity 10 storm 100" \
           "-c $tmp/bad.toml inspect" "-c $tmp/unknown.toml inspect" "-c $tmp/none.toml inspect" \
           "storm 10 --resolve --dests 5000" "--driver verbs inspect" "--driver ib inspect" \
           "--workers 0 storm 10" "-c $tmp/workers.toml inspect" "-c $tmp/oldkey.toml inspect" \
           "--port net_null0 bench" "--port net_null0 inspect" "inspect --to 239.1.1.1"; do
  "$ah" -- $bad >"$tmp/bad.out" 2>"$tmp/bad.err"
  rc=$?
  lines=$(wc -l <"$tmp/bad.err")
  if [ $rc -ne 2 ] || [ "$lines" -ne 1 ]; then
    echo "FAIL: '$bad' exit $rc with $lines lines on stderr"; cat "$tmp/bad.err"; fail=1
  else
    echo "refused: $bad: $(cat "$tmp/bad.err")"
  fi
done
"$ah" --help >"$tmp/help" 2>&1 || { echo "FAIL: --help exit $?"; fail=1; }
"$ah" -- -c "$tmp/oldkey.toml" inspect 2>&1 | grep -q "unknown key 'ah.vlan': the port's settings are in \[port\] (vlan)" ||
  { echo "FAIL: [ah] vlan does not name [port]"; fail=1; }
for opt in --capacity --max-ah --neigh-ttl-ms --hold --json --ipv6 --workers --driver --port --to --ping-qpn; do
  grep -q -- "$opt" "$tmp/help" || { echo "FAIL: --help lacks $opt"; fail=1; }
done
exit $fail
