#!/usr/bin/env bash
# The soft driver's neighbour resolution against the Linux kernel: a veth
# pair, one end in a new network namespace with an IPv4 and an IPv6 address
# (the kernel answers ARP and ND there), the other end driven by rdgram
# through net_af_packet (tests/integration/neigh_probe.cc). The probe must
# resolve the kernel's MAC by ARP and by ND; then this script changes that
# MAC and the probe's background re-resolution (300 ms TTL) must move both
# live AVs to it. A UDP listener in the namespace checks that datagrams sent
# before and after the change reached the kernel's stack (so the right MAC
# was on the wire each time). Needs root; skips (77) otherwise. Everything
# it creates is removed on exit.
set -u
probe=$1
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root for ip netns"; exit 77; }
command -v ip >/dev/null || { echo "SKIP: iproute2 missing"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: python3 missing"; exit 77; }
id=$$
ns=rdnn$id vh=rdnh$id vk=rdnk$id
mac1=02:00:00:00:5e:01 mac2=02:00:00:00:5e:02
tmp=$(mktemp -d)
lpid= ppid_=
cleanup() {
  [ -n "$ppid_" ] && kill "$ppid_" 2>/dev/null
  [ -n "$lpid" ] && kill "$lpid" 2>/dev/null
  wait 2>/dev/null
  ip link del "$vh" 2>/dev/null
  ip netns del "$ns" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
ip netns add "$ns" || { echo "SKIP: cannot create a namespace"; exit 77; }
ip link add "$vh" type veth peer name "$vk" || { echo "SKIP: cannot create veth"; exit 77; }
ip link set "$vk" netns "$ns" || { echo "FAIL: cannot move $vk into $ns"; exit 1; }
# The kernel's side: an address of each family (no DAD: usable at once).
ip -n "$ns" link set lo up
ip -n "$ns" link set "$vk" address "$mac1" up
ip -n "$ns" addr add 198.51.100.2/24 dev "$vk"
ip -n "$ns" addr add fd5e::2/64 dev "$vk" nodad
# rdgram's side: no address, and no IPv6 chatter from the host kernel.
sysctl -qw "net.ipv6.conf.$vh.disable_ipv6=1" 2>/dev/null
ip link set "$vh" up

# Logs every RoCEv2 datagram (UDP 4791) that reaches the namespace's stack:
# family and payload byte 0 (the probe's phase). RoCEv2 leaves the UDP
# checksum 0, which IPv6 sockets accept only with UDP_NO_CHECK6_RX (102).
ip netns exec "$ns" timeout 120 python3 -c '
import select, socket, sys, time
log = open(sys.argv[1], "w", buffering=1)
s4 = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s4.bind(("0.0.0.0", 4791))
s6 = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
s6.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
try:
    s6.setsockopt(socket.IPPROTO_UDP, 102, 1)
except OSError:
    pass
s6.bind(("::", 4791))
open(sys.argv[2], "w").close()
end = time.time() + 110
while time.time() < end:
    r, _, _ = select.select([s4, s6], [], [], 0.5)
    for s in r:
        d, a = s.recvfrom(9000)
        # BTH (12) + DETH (8), then the payload.
        log.write("%d %d %s\n" % (4 if s is s4 else 6, d[20] if len(d) > 20 else -1, a[0]))
' "$tmp/udp.log" "$tmp/listening" &
lpid=$!
for _ in $(seq 1 100); do [ -e "$tmp/listening" ] && break; sleep 0.1; done
[ -e "$tmp/listening" ] || { echo "FAIL: the UDP listener did not start"; exit 1; }

timeout 90 "$probe" --iface "$vh" --ip4 198.51.100.1 --peer4 198.51.100.2 --ip6 fd5e::1 --peer6 fd5e::2 \
  --expect "$mac1" --new-mac "$mac2" --ready "$tmp/ready" --ttl-ms 300 --timeout 15 >"$tmp/probe.out" 2>&1 &
ppid_=$!
for _ in $(seq 1 400); do
  [ -e "$tmp/ready" ] && break
  kill -0 "$ppid_" 2>/dev/null || break
  sleep 0.1
done
changed=0
if [ -e "$tmp/ready" ]; then
  ip -n "$ns" link set dev "$vk" address "$mac2" && changed=1
  echo "kernel side moved from $mac1 to $mac2"
fi
wait "$ppid_"; prc=$?; ppid_=
sleep 0.3 # the last datagrams into the listener's log
echo "--- probe (exit $prc)"; cat "$tmp/probe.out"
echo "--- datagrams that reached the namespace's UDP socket (family phase source)"; cat "$tmp/udp.log"
echo "--- kernel neighbour table in the namespace"; ip -n "$ns" neigh show dev "$vk"
fail=0
[ "$prc" -eq 0 ] || { echo "FAIL: probe exit $prc"; fail=1; }
[ "$changed" -eq 1 ] || { echo "FAIL: the probe never got to the MAC change"; fail=1; }
for want in "4 1" "4 2" "6 1" "6 2"; do
  grep -q "^$want " "$tmp/udp.log" || { echo "FAIL: no IPv${want% *} datagram of phase ${want#* } reached the kernel"; fail=1; }
done
[ "$fail" -eq 0 ] && echo "PASS"
exit $fail
