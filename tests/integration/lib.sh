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
