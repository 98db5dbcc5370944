#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# rdma-core v44.0's own pyverbs tests of the device, PD, MR, CQ, QP and CQ
# events (tests/test_device.py, test_pd.py, test_mr.py, test_cq.py,
# test_qp.py, test_cq_events.py), unmodified, with Debian's python3-pyverbs,
# on an rdgram-verbs device (net_ring: the traffic cases loop back through
# the wire format).
#
# No failure, no error. No test is left out by name: each of these decides
# for itself whether it applies, from what the device reports and answers
# (EOPNOTSUPP for an RC QP, no device memory, ...). A skip is accepted only
# for a reason below, each a feature a UD-only soft device does not have;
# any other skip fails the check, so a UD case that stops running shows.
#   pyverbs_core.sh RDGRAM_VERBS SOURCE_ROOT
# The suite: $RDMA_CORE_TESTS, else SOURCE_ROOT/../shared/third_party/
# rdma-core-tests-v44.0 (its README; the tests are not packaged).
set -u
. "$(dirname "$0")/lib.sh"
verbs_setup "$1"
suite=${RDMA_CORE_TESTS:-$2/../shared/third_party/rdma-core-tests-v44.0}
modules="test_device test_pd test_mr test_cq test_qp test_cq_events"
for m in $modules; do
  [ -f "$suite/tests/$m.py" ] ||
    { echo "SKIP: $suite/tests/$m.py is absent (rdma-core v44.0's tests/$m.py, unmodified, belongs there)"; exit 77; }
done
/usr/bin/python3 -c 'import pyverbs' 2>/dev/null || { echo "SKIP: python3-pyverbs missing"; exit 77; }
# The skips a UD-only device without device memory may see, as the tests
# word them:
#   RC, UC and raw-packet QPs (ibv_create_qp: EOPNOTSUPP; the MR, MW,
#   dmabuf-traffic and RC CQ-event cases build RC QPs);
#   memory windows of either type (for RDMA reads and writes: UD has none);
#   device memory (max_dm_size 0);
#   dmabuf MRs (the host's GPU driver allocates none; ibv_reg_dmabuf_mr is
#   refused too).
allowed="Create QP type 2 is not supported|Create (RC|UC|Raw Packet) QP (with|without)( extended)? attrs is not supported"
allowed+="|Create memory window of type [0-9]+ is not supported|Device memory is not supported"
allowed+="|Allocating dmabuf is not supported by [^']*"
cat >"$tmp/one.toml" <<EOT
[[port]]
name = "rdg0"
devargs = "net_ring0"
mac = "02:00:00:00:00:01"
addresses = ["10.0.0.1", "fd00::1"]
EOT
for gid in 1 2; do
  # shellcheck disable=SC2086
  (cd "$suite" && timeout 120 "$RV" -c "$tmp/one.toml" /usr/bin/python3 tests/run_tests.py -v --dev rdg0 --port 1 \
    --gid $gid $modules) >"$tmp/out" 2>&1
  echo "exit $?" >>"$tmp/out"
  what="rdma-core v44.0 $modules on rdg0, GID index $gid"
  expect "$tmp/out" '^OK' "$what: unittest says OK" &&
    expect "$tmp/out" 'exit 0' "$what: exit 0" &&
    expect "$tmp/out" 'Ran [1-9][0-9]* tests' "$what: ran tests" || continue
  other=$(grep -E "skipped '" "$tmp/out" | grep -Ev "skipped '($allowed)'")
  if [ -n "$other" ]; then
    echo "FAIL: $what: skipped for a reason not on the list:"; echo "$other" | sed 's/^/    /'
    fails=$((fails + 1))
  else
    ran=$(grep -E '^Ran ' "$tmp/out")
    echo "ok: $what ($ran; $(grep -c "\.\.\. ok$" "$tmp/out") passed, $(grep -c "skipped '" "$tmp/out") skipped)"
  fi
done
finish
