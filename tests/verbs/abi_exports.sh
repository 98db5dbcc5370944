#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# rdgram's libibverbs.so.1 exports exactly what the system's does: every
# symbol at every version node (default and compat versions alike), the same
# version nodes, nothing more (no rdgram, DPDK or C++ runtime symbol), and it
# loads no DPDK shared library, no hwloc (libibverbs/meson.build: the
# archives it links carry no link dependency) and no other libibverbs.
#   abi_exports.sh OURS SYSTEM
set -u
ours=$1 sys=$2
exports() { # name@NODE / name@@NODE of every defined global, and the nodes
  readelf -W --dyn-syms "$1" | awk '$5 == "GLOBAL" && $7 != "UND" { print $8 }' | sort
}
rc=0
if ! diff <(exports "$sys") <(exports "$ours") >/tmp/abi.$$; then
  echo "FAIL: the export lists differ (< system, > rdgram):"
  cat /tmp/abi.$$
  rc=1
fi
rm -f /tmp/abi.$$
n=$(exports "$sys" | wc -l)
echo "exports compared: $n (system) against $(exports "$ours" | wc -l) (rdgram)"
[ "$n" -gt 150 ] || { echo "FAIL: only $n exports read from $sys"; rc=1; }
soname=$(readelf -d "$ours" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = libibverbs.so.1 ] || { echo "FAIL: SONAME is '$soname'"; rc=1; }
needed=$(readelf -d "$ours" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
if echo "$needed" | grep -Eq '^(librte_|libibverbs|libmlx|libefa|libhwloc)'; then
  echo "FAIL: NEEDED has a shared DPDK, rdma-core or hwloc library:"; echo "$needed"; rc=1
fi
[ $rc -eq 0 ] && echo "ok: same exports, SONAME libibverbs.so.1, NEEDED: $(echo $needed)"
exit $rc
