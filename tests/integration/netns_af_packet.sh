#!/usr/bin/env bash
# Two rdgram-perf processes in two network namespaces joined by a veth pair,
# each on net_af_packet: RoCEv2 UD through real kernel interfaces. Needs root
# (ip netns); skips (77) otherwise. Everything it creates is removed on exit.
set -u
. "$(dirname "$0")/lib.sh"
perf=$1
cfg=$2
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root for ip netns"; exit 77; }
command -v ip >/dev/null || { echo "SKIP: iproute2 missing"; exit 77; }
id=$$
na=rdga$id nb=rdgb$id va=rdva$id vb=rdvb$id
tmp=$(mktemp -d)
cleanup() {
  [ -n "${spid:-}" ] && kill "$spid" 2>/dev/null
  ip netns del "$na" 2>/dev/null
  ip netns del "$nb" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
ip netns add "$na" && ip netns add "$nb" || { echo "SKIP: cannot create namespaces"; exit 77; }
ip link add "$va" type veth peer name "$vb" || { echo "SKIP: cannot create veth"; exit 77; }
ip link set "$va" netns "$na" && ip link set "$vb" netns "$nb" \
  || { ip link del "$va" 2>/dev/null; echo "SKIP: cannot move the veth into the namespaces"; exit 77; }
# The MACs the config gives each endpoint; no IP address: the kernel stays
# out of the way (rdgram speaks RoCEv2 itself).
ip -n "$na" link set "$va" address 02:00:00:00:00:01 mtu 9000 up
ip -n "$nb" link set "$vb" address 02:00:00:00:00:02 mtu 9000 up
pmd="qpairs=1,blocksz=4096,framesz=4096,framecnt=512"
common=(-c "$cfg" --timeout 60 -s 1024)
ip netns exec "$na" "$perf" "${common[@]}" --mode server --port "net_af_packet0,iface=$va,$pmd" \
  >"$tmp/server.out" 2>&1 &
spid=$!
sleep 1
ip netns exec "$nb" "$perf" "${common[@]}" --mode client -n 5000 --port "net_af_packet0,iface=$vb,$pmd" \
  >"$tmp/client.out" 2>&1
crc=$?
wait "$spid"; src=$?; spid=
check_pair "$tmp" $crc $src 5000 lossy
