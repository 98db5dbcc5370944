#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# rdma-core v44.0's own tests/test_addr.py, unmodified, with Debian's
# python3-pyverbs, on an rdgram-verbs device. The tests are not packaged:
# ../shared/third_party/rdma-core-tests-v44.0 holds them beside the clone.
#   pyverbs_addr.sh RDGRAM_VERBS SOURCE_ROOT
# ($RDMA_CORE_TESTS, when set, is where the suite is.)
set -u
. "$(dirname "$0")/lib.sh"
verbs_setup "$1"
suite=${RDMA_CORE_TESTS:-$2/../shared/third_party/rdma-core-tests-v44.0}
[ -f "$suite/tests/test_addr.py" ] || { echo "SKIP: $suite/tests/test_addr.py is absent (rdma-core's tests are not packaged)"; exit 77; }
/usr/bin/python3 -c 'import pyverbs' 2>/dev/null || { echo "SKIP: python3-pyverbs missing"; exit 77; }
cat >"$tmp/one.toml" <<EOT
[[port]]
name = "rdg0"
devargs = "net_ring0"
mac = "02:00:00:00:00:01"
addresses = ["10.0.0.1", "fd00::1"]
EOT
for gid in 1 2; do
  (cd "$suite" && timeout 120 "$RV" -c "$tmp/one.toml" /usr/bin/python3 tests/run_tests.py -v --dev rdg0 --port 1 \
    --gid $gid test_addr) >"$tmp/out" 2>&1
  echo "exit $?" >>"$tmp/out"
  what="test_addr.py on rdg0, GID index $gid"
  expect "$tmp/out" '^OK' "$what: unittest says OK" &&
    expect "$tmp/out" 'exit 0' "$what: exit 0" &&
    expect "$tmp/out" 'Ran [1-9][0-9]* tests?' "$what: ran tests" &&
    ! grep -q 'skipped' "$tmp/out" && echo "ok: $what ($(grep -E '^Ran ' "$tmp/out"))"
  grep -q skipped "$tmp/out" && { echo "FAIL: $what skipped tests:"; grep -i skip "$tmp/out"; fails=$((fails + 1)); }
done
finish
