# SPDX-License-Identifier: BSD-3-Clause
# Helpers for the verbs-library tests: unmodified verbs programs run under
# rdgram-verbs, two processes joined by a net_memif pair (abstract sockets:
# nothing on disk, nothing left by a killed run) or by a veth pair between
# two network namespaces (net_af_packet).
#
#   verbs_setup RDGRAM_VERBS     sets RV, makes $tmp (removed on exit)
#   memif_pair NAME [MTU]         writes $tmp/NAME-a.toml (server, rdg0,
#                                 10.0.0.1, fd00::1) and $tmp/NAME-b.toml
#                                 (client, rdg1, 10.0.0.2, fd00::2)
#   next_port                     sets PORT to a TCP port no earlier case of
#                                 this run used (a closed one stays in
#                                 TIME_WAIT, and the tools' bind fails)
#   run_pair A_CFG B_CFG TIMEOUT -- SERVER_ARGS -- CLIENT_ARGS
#                                 the server under A in the background, then
#                                 the client under B once the server listens
#                                 on TCP $PORT (pass -p $PORT to both tools);
#                                 outputs in $tmp/srv.out and $tmp/cli.out,
#                                 exit codes in $src and $crc
#   expect FILE REGEX WHAT        fails (with FILE shown) unless REGEX matches
set -u
fails=0
verbs_setup() {
  RV=$1
  tmp=$(mktemp -d)
  trap 'verbs_cleanup' EXIT
}
verbs_cleanup() {
  [ -n "${spid:-}" ] && kill -9 "$spid" 2>/dev/null
  [ -n "${extra_cleanup:-}" ] && eval "$extra_cleanup"
  rm -rf "$tmp"
}
memif_pair() {
  local name=$1 mtu=${2:-1024} sock="rdgv-$$-$1"
  cat >"$tmp/$name-a.toml" <<EOT
[[port]]
name = "rdg0"
devargs = "net_memif0,role=server,socket=$sock"
mac = "02:00:00:00:00:01"
addresses = ["10.0.0.1", "fd00::1"]
mtu = $mtu
EOT
  cat >"$tmp/$name-b.toml" <<EOT
[[port]]
name = "rdg1"
devargs = "net_memif1,role=client,socket=$sock"
mac = "02:00:00:00:00:02"
addresses = ["10.0.0.2", "fd00::2"]
mtu = $mtu
EOT
}
PORT=$((20000 + ($$ % 20000)))
next_port() { PORT=$((PORT + 1)); }
# Waits until something listens on TCP port $1 (in namespace $2 if given).
wait_listen() {
  local port=$1 ns=${2:-} i
  for ((i = 0; i < 200; i++)); do
    if [ -n "$ns" ]; then
      ip netns exec "$ns" ss -ltn 2>/dev/null | grep -q ":$port " && return 0
    else
      ss -ltn 2>/dev/null | grep -q ":$port " && return 0
    fi
    sleep 0.05
  done
  return 1
}
run_pair() {
  local a=$1 b=$2 to=$3
  shift 3
  [ "$1" = "--" ] && shift
  local sargs=() cargs=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do sargs+=("$1"); shift; done
  shift
  cargs=("$@")
  ${NS_A:+ip netns exec "$NS_A"} timeout "$to" "$RV" -c "$a" "${sargs[@]}" >"$tmp/srv.out" 2>&1 &
  spid=$!
  if ! wait_listen "$PORT" "${NS_A:-}"; then
    echo "the server never listened on $PORT"
  fi
  ${NS_B:+ip netns exec "$NS_B"} timeout "$to" "$RV" -c "$b" "${cargs[@]}" >"$tmp/cli.out" 2>&1
  crc=$?
  wait "$spid"
  src=$?
  spid=
}
expect() {
  if ! grep -Eq -- "$2" "$1"; then
    echo "FAIL: $3 (no /$2/ in $(basename "$1")):"
    sed 's/^/    /' "$1" | tail -n 25
    fails=$((fails + 1))
    return 1
  fi
  return 0
}
pair_ok() { # WHAT: both exit codes 0, every mbuf back in its pool at exit
  if grep -q 'not back in the pool' "$tmp/srv.out" "$tmp/cli.out"; then
    echo "FAIL: $1: mbufs not back in the pool:"; grep -h 'not back in the pool' "$tmp/srv.out" "$tmp/cli.out"
    fails=$((fails + 1))
    return 1
  fi
  if [ "$src" -ne 0 ] || [ "$crc" -ne 0 ]; then
    echo "FAIL: $1: server exit $src, client exit $crc"
    echo "  server:"; sed 's/^/    /' "$tmp/srv.out" | tail -n 20
    echo "  client:"; sed 's/^/    /' "$tmp/cli.out" | tail -n 20
    fails=$((fails + 1))
    return 1
  fi
  echo "ok: $1"
}
finish() {
  if [ "$fails" -ne 0 ]; then
    echo "$fails check(s) failed"
    exit 1
  fi
  exit 0
}
