#!/usr/bin/env bash
# rdgram-perf sends through net_pcap into a capture file; tshark and scapy
# (independent implementations) must accept every frame: IPv4 and IPv6,
# with and without immediate data, payloads of 0, 1, 1000 and 4096 bytes.
set -u
perf=$1
cfgdir=$2
tools=$(cd "$(dirname "$0")/../tools" && pwd)
command -v tshark >/dev/null || { echo "SKIP: tshark not installed"; exit 77; }
/usr/bin/python3 -c 'import scapy' 2>/dev/null || { echo "SKIP: python3-scapy not installed"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 -c "import struct,sys; open(sys.argv[1],'wb').write(struct.pack('<IHHiIII',0xa1b2c3d4,2,4,0,0,65535,1))" "$tmp/empty.pcap"
fail=0
run=0
specs=()
# config | immediate | payload bytes
for combo in "loopback.toml||0" "loopback.toml|--imm|1" "loopback.toml||1000" "loopback.toml|--imm|4096" \
             "loopback-ipv6.toml|--imm|0" "loopback-ipv6.toml||1" "loopback-ipv6.toml|--imm|1000" \
             "loopback-ipv6.toml||4096"; do
  IFS='|' read -r cfg imm size <<<"$combo"
  run=$((run + 1))
  out=$tmp/out$run.pcap
  "$perf" -l 0 --no-huge --no-shconf --no-pci -m 256 --log-level=lib.eal:error \
    --file-prefix "rdgram-pcap$$" -- -c "$cfgdir/$cfg" --mode client --test txonly -n 50 -s "$size" $imm \
    --port "net_pcap0,rx_pcap=$tmp/empty.pcap,tx_pcap=$out" >"$tmp/log" 2>&1 \
    || { echo "FAIL: rdgram-perf ($cfg $imm -s $size)"; cat "$tmp/log"; fail=1; continue; }
  echo "capture $run: $cfg ${imm:-no-imm} payload $size"
  specs+=("$out:$size")
done
/usr/bin/python3 "$tools/check_capture.py" 50 0x100 0x101 0x11111111 "${specs[@]}" || fail=1
exit $fail
