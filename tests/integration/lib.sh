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
  return $fail
}
