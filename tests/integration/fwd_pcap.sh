#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# rdgram-fwd driven through net_pcap with packets from an independent tool:
# scapy writes RoCEv2 UD traffic from four senders (IPv4 and IPv6) plus
# malformed frames (gen_roce_pcap.py); rdgram-fwd replays it in reflect mode,
# then in forward mode with two rules; tshark and scapy check every frame it
# wrote and the --stats-json counters (check_fwd_capture.py). Also: bad
# options and configs are refused with one line and a non-zero exit, and
# SIGUSR1 prints the counters while running.
# usage: fwd_pcap.sh RDGRAM_FWD CONFIG_DIR
set -u
fwd=$1
cfgdir=$2
tools=$(cd "$(dirname "$0")/../tools" && pwd)
command -v tshark >/dev/null || { echo "SKIP: tshark not installed"; exit 77; }
/usr/bin/python3 -c 'import scapy' 2>/dev/null || { echo "SKIP: python3-scapy not installed"; exit 77; }
# On tmpfs when there is one: net_pcap writes the output capture from the
# poll thread, and a disk busy with other jobs' builds can stall it for
# seconds.
tmp=$( { [ -d /dev/shm ] && [ -w /dev/shm ] && mktemp -d -p /dev/shm; } || mktemp -d)
trap 'rm -rf "$tmp"' EXIT
eal=(-l 0-1 --no-huge --no-shconf --no-pci -m 256 --log-level=lib.eal:error --file-prefix "rdgram-fwd$$")
fail=0

/usr/bin/python3 "$tools/gen_roce_pcap.py" "$tmp/in.pcap" "$tmp/manifest.json" || exit 1

for mode in reflect forward; do
  cfg=$cfgdir/rdgram-fwd.toml
  [ "$mode" = forward ] && cfg=$cfgdir/rdgram-fwd-forward.toml
  echo "--- $mode"
  timeout 120 "$fwd" "${eal[@]}" -- -c "$cfg" --idle-exit 0.5 --stats-json "$tmp/$mode.json" \
    --port "net_pcap0,rx_pcap=$tmp/in.pcap,tx_pcap=$tmp/$mode.pcap" >"$tmp/$mode.log" 2>&1
  rc=$?
  cat "$tmp/$mode.log"
  [ $rc -eq 0 ] || { echo "FAIL: rdgram-fwd $mode exited $rc"; fail=1; continue; }
  grep -q "stopped\": \"idle\"" "$tmp/$mode.json" || { echo "FAIL: $mode did not end by --idle-exit"; fail=1; }
  /usr/bin/python3 "$tools/check_fwd_capture.py" "$mode" "$tmp/manifest.json" "$tmp/$mode.pcap" "$tmp/$mode.json" \
    || fail=1
done

# Two ports: everything is forwarded from the capture's port to a peer on a
# second net_pcap port (IPv4, while a quarter of the input arrived over IPv6),
# with the peer's fixed Q_Key and the second port's QP as the source.
echo "--- forward across ports"
/usr/bin/python3 -c "import struct,sys; open(sys.argv[1],'wb').write(struct.pack('<IHHiIII',0xa1b2c3d4,2,4,0,0,65535,1))" "$tmp/empty.pcap"
cat >"$tmp/two.toml" <<TOML
[fwd]
mode = "forward"
[[port]]
name = "in"
devargs = "net_pcap0,rx_pcap=$tmp/in.pcap,tx_pcap=$tmp/two-in.pcap"
mac = "02:00:00:00:00:01"
addresses = ["10.0.0.1", "fd00::1"]
qps = [{ qpn = 0x100, qkey = 0x11111111 }, { qpn = 0x101, qkey = 0x22222222 }, { qpn = 0x102, qkey = 0x55555555 }]
[[port]]
name = "out"
devargs = "net_pcap1,rx_pcap=$tmp/empty.pcap,tx_pcap=$tmp/two-out.pcap"
mac = "02:00:00:00:01:01"
addresses = ["192.168.7.1"]
qps = [{ qpn = 0x200, qkey = 0x7777 }]
[peers.far]
ip = "192.168.7.9"
mac = "02:00:00:00:01:09"
qpn = 0x999
qkey = 0x1234
port = "out"
[[rule]]
to = "far"
TOML
if timeout 120 "$fwd" "${eal[@]}" -- -c "$tmp/two.toml" --idle-exit 0.5 --stats-json "$tmp/two.json" >"$tmp/two.log" 2>&1; then
  /usr/bin/python3 "$tools/check_capture.py" 120 0x999 0x200 0x1234 "$tmp/two-out.pcap:0" || fail=1
  /usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); p=d["ports"]; assert p[1]["driver"]["tx_pkts"] == 120 and p[0]["driver"]["tx_pkts"] == 0 and d["rules"][0]["hits"] == 120, p' "$tmp/two.json" \
    || { echo "FAIL: two-port counters"; fail=1; }
else
  echo "FAIL: rdgram-fwd with two ports"; cat "$tmp/two.log"; fail=1
fi

# Counters on demand: SIGUSR1 while it runs prints the table (from the main
# thread) and rewrites the JSON; SIGTERM then stops it with exit 0.
echo "--- SIGUSR1"
"$fwd" "${eal[@]}" -- -c "$cfgdir/rdgram-fwd.toml" --idle-exit 0 --duration 30 --stats-json "$tmp/usr1.json" \
  --port "net_pcap0,rx_pcap=$tmp/in.pcap,tx_pcap=$tmp/usr1.pcap" >"$tmp/usr1.log" 2>&1 &
pid=$!
for _ in $(seq 100); do grep -q "poll lcore" "$tmp/usr1.log" && break; sleep 0.1; done
# Until the snapshot shows the whole replay (a loaded machine may need more
# than one look); each SIGUSR1 prints one table.
sent=0 ok=0
for _ in $(seq 20); do
  kill -USR1 $pid; sent=$((sent + 1))
  sleep 0.5
  if /usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["stopped"] == "running", d["stopped"]; assert d["totals"]["delivered"] == 120, d["totals"]' \
      "$tmp/usr1.json" 2>/dev/null; then ok=1; break; fi
done
[ $ok -eq 1 ] || { echo "FAIL: no valid JSON with the whole replay after SIGUSR1"; fail=1; }
kill -TERM $pid
wait $pid
rc=$?
[ $rc -eq 0 ] || { echo "FAIL: exit $rc after SIGTERM"; fail=1; }
n=$(grep -c "rdgram-fwd: reflect mode, .* s, " "$tmp/usr1.log")
# One table per SIGUSR1 the main thread saw (signals sent while it was
# descheduled may merge into one) plus the exit's.
[ "$n" -ge 2 ] && [ "$n" -le $((sent + 1)) ] || { echo "FAIL: $n counter tables for $sent SIGUSR1 and the exit"; cat "$tmp/usr1.log"; fail=1; }
grep -q "s, signal" "$tmp/usr1.log" || { echo "FAIL: exit report does not say signal"; fail=1; }

# Bad input: one clear line on stderr, exit 2, nothing started.
echo "--- bad input"
bad_case() { # name, expected text, config text (or "" to use args only), args...
  local name=$1 want=$2 text=$3; shift 3
  local args=("$@")
  if [ -n "$text" ]; then printf '%s\n' "$text" >"$tmp/bad.toml"; args=(-c "$tmp/bad.toml" "${args[@]}"); fi
  "$fwd" "${eal[@]}" -- "${args[@]}" >"$tmp/bad.out" 2>"$tmp/bad.err"
  local rc=$? lines
  lines=$(grep -c . "$tmp/bad.err")
  if [ $rc -ne 2 ] || [ "$lines" -ne 1 ] || ! grep -q -- "$want" "$tmp/bad.err"; then
    echo "FAIL: $name: exit $rc, $lines stderr lines, want '$want':"; cat "$tmp/bad.err"; fail=1
  else
    echo "ok: $name: $(cat "$tmp/bad.err")"
  fi
}
port='[[port]]
devargs = "net_null0"
addresses = ["10.0.0.1"]
qps = [{ qpn = 0x100 }]'
bad_case "unknown option" "--bogus" "" --bogus
bad_case "bad mode" "mode" "" --mode mirror
bad_case "unknown key" "bad.toml:2:1: unknown key 'fwd.idle'" '[fwd]
idle = 3'
bad_case "bad value" "bad.toml:2:8: key 'fwd.mode'" '[fwd]
mode = "mirror"'
bad_case "rule to unknown peer" "key 'rule\[0\].to'" "$port
[[rule]]
match_qpn = 0x100
to = \"nobody\""
bad_case "qpn out of range" "key 'port\[0\].qps\[0\].qpn'" '[[port]]
devargs = "net_null0"
addresses = ["10.0.0.1"]
qps = [{ qpn = 0x1000000 }]'
bad_case "forward without rules" "forward needs" "$port" --mode forward
bad_case "no port" "no port" ""
bad_case "TOML syntax" "bad.toml:1:" '[fwd'
exit $fail
