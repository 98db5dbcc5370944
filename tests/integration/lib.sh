# Shared by the two-process integration tests: checks the outputs of an
# rdgram-perf server/client pair. Usage: check_pair DIR CLIENT_RC SERVER_RC N [lossy]
# With "lossy" (a kernel path: UD may drop) any received count is accepted,
# but it must be reported.
check_pair() {
  local dir=$1 crc=$2 src=$3 n=$4 lossy=${5:-} fail=0 got=$4
  echo "--- client (exit $crc)"; cat "$dir/client.out"
  echo "--- server (exit $src)"; cat "$dir/server.out"
  [ "$crc" -eq 0 ] || { echo "FAIL: client exit $crc"; fail=1; }
  [ "$src" -eq 0 ] || { echo "FAIL: server exit $src"; fail=1; }
  grep -q 't_typical\[usec\]' "$dir/client.out" || { echo "FAIL: no latency table"; fail=1; }
  grep -q 'MsgRate\[Mpps\]' "$dir/client.out" || { echo "FAIL: no bandwidth table"; fail=1; }
  [ -n "$lossy" ] && got='[0-9]*'
  grep -q "receiver: $got of $n messages" "$dir/client.out" || { echo "FAIL: bandwidth messages lost or not counted"; fail=1; }
  # The accounting invariant (tests/common/accounting.h) as far as
  # rdgram-perf's output shows it: on a loss-free path, sent = received
  # (above) and no message dropped under any reason (rdgram-perf prints every
  # non-zero counter).
  if [ -z "$lossy" ] && grep -Eo ' (rx_(not_|truncated|bad_|ip_fragment|dgid_|unknown_|chained_|control_full)|tx_(stale_|too_long|bad_))[a-z_]*=[1-9][0-9]*' \
      "$dir/client.out" "$dir/server.out"; then
    echo "FAIL: messages dropped (counters above)"; fail=1
  fi
  return $fail
}

# Waits (up to 60 s) until a memif server has created its socket: a net_memif
# client that starts first fails to connect and does not retry. A fixed
# sleep was not enough on a loaded machine.
wait_socket() {
  for _ in $(seq 1 600); do
    [ -S "$1" ] && return 0
    sleep 0.1
  done
  echo "FAIL: $1 never appeared (memif server did not start)"
  return 1
}

# The fabric of a multi-process job on one host: one network namespace
# holding a Linux bridge and one veth pair per rank. Rank i's end is
# ${prefix}i (no address: rdgram's soft driver speaks for it, through
# net_af_packet or net_af_xdp on it), its peer ${prefix}ib is a port of the
# bridge br0. The namespace's loopback is up, so a launcher's traffic
# (mpirun's PMIx, rdgram-coll's TCP rendezvous) runs there too. IPv6 is off
# on every link of the fabric (no router solicitations or MLD reports among
# the ranks' frames), STP off and no forwarding delay (ports forward at
# once). Everything lives in the namespace: removing it (fabric_down)
# removes the bridge and every veth.
#   fabric_up NS N [PREFIX]   (PREFIX defaults to rdc; needs root)
#   fabric_down NS
#   fabric_loss NS I PCT [PREFIX]  the bridge port of rank I drops PCT% of
#                             the RoCEv2 frames it sends to rank I (an
#                             nftables rule; tc netem where nft is missing)
#   fabric_drops NS           frames those rules dropped, summed
# Use: ip netns exec NS rdgram-coll ... --port 'net_af_packet{rank},iface=rdc{rank}'
# Returns non-zero with the reason on stderr (and nothing left behind)
# when the namespace cannot be made. At most 63 ranks.
fabric_up() {
  local ns=$1 n=$2 pre=${3:-rdc} i
  ip netns add "$ns" || { echo "cannot create network namespace $ns" >&2; return 1; }
  if ! {
    ip -n "$ns" link set lo up &&
    ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 &&
    ip -n "$ns" link add br0 type bridge stp_state 0 forward_delay 0 &&
    ip -n "$ns" link set br0 up
  }; then
    echo "cannot set up the bridge in $ns" >&2; ip netns del "$ns"; return 1
  fi
  for ((i = 0; i < n; i++)); do
    # Rank ends get ifindex (i + 1) * 1024: DPDK 22.11's net_af_packet
    # joins the PACKET_FANOUT group (getpid() ^ ifindex) & 0xffff, and two
    # processes whose groups collide in one namespace fail with EINVAL.
    # With these indexes a collision needs two ranks' pids to differ by a
    # multiple of 1024 (pids of one job's launch are closer than that).
    if ! { ip -n "$ns" link add "$pre$i" index $(((i + 1) * 1024)) type veth peer name "$pre${i}b" &&
           ip -n "$ns" link set "$pre${i}b" master br0 &&
           ip -n "$ns" link set "$pre${i}b" up && ip -n "$ns" link set "$pre$i" up; }; then
      echo "cannot create veth $pre$i in $ns" >&2; ip netns del "$ns"; return 1
    fi
  done
}
fabric_down() {
  ip netns del "$1" 2>/dev/null
  return 0
}
fabric_loss() {
  local ns=$1 i=$2 pct=$3 pre=${4:-rdc}
  # An nftables rule on the bridge (numgen random) drops RoCEv2 frames
  # only (UDP 4791: ARP gets through) and counts each; where nft is
  # missing, tc netem on the bridge port drops every kind of frame.
  if command -v nft >/dev/null; then
    ip netns exec "$ns" nft list table bridge rdgram_loss >/dev/null 2>&1 ||
      ip netns exec "$ns" nft add table bridge rdgram_loss '{ chain forward { type filter hook forward priority 0; policy accept; }; }' ||
      { echo "cannot add an nftables bridge table in $ns" >&2; return 1; }
    ip netns exec "$ns" nft add rule bridge rdgram_loss forward oifname "$pre${i}b" udp dport 4791 \
      numgen random mod 1000 '<' "$(awk -v p="$pct" 'BEGIN { printf "%d", p * 10 }')" counter drop
    return
  fi
  ip netns exec "$ns" tc qdisc add dev "$pre${i}b" root netem loss "$pct%" ||
    { echo "neither nft (nftables) nor tc netem available" >&2; return 1; }
}
# exact: the loss rules count RoCEv2 frames only (nftables); else (netem)
# their count includes other frames (ARP).
fabric_loss_exact() {
  ip netns exec "$1" nft list table bridge rdgram_loss >/dev/null 2>&1
}
# Frames the loss rules dropped, summed over both kinds.
fabric_drops() {
  local tcd nftd
  tcd=$(ip netns exec "$1" tc -s qdisc show 2>/dev/null | awk '/qdisc netem/ {n = 1; next}
    n && /dropped/ { for (i = 1; i <= NF; i++) if ($i == "(dropped") { v = $(i + 1); gsub(",", "", v); s += v } n = 0 }
    END { print s + 0 }')
  nftd=$(ip netns exec "$1" nft list table bridge rdgram_loss 2>/dev/null | grep -Eo 'counter packets [0-9]+' |
    awk '{ s += $3 } END { print s + 0 }')
  echo $((tcd + nftd))
}
