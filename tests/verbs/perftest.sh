#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# perftest's ib_send_lat and ib_send_bw -c UD, unmodified (Debian's
# perftest), between two processes under rdgram-verbs over a net_memif pair,
# polled and with events (-e). Both sides' result rows must agree on the
# message size and the iterations.
set -u
. "$(dirname "$0")/lib.sh"
verbs_setup "$1"
command -v ib_send_lat >/dev/null || { echo "SKIP: perftest missing"; exit 77; }
memif_pair p
row() { # the result row: the line after the "#bytes" header
  awk '/#bytes/ { getline; print $1, $2; exit }' "$1"
}
for t in ib_send_lat ib_send_bw; do
  for ev in "" "-e"; do
    what="$t -c UD $ev over net_memif"
    next_port
    run_pair "$tmp/p-a.toml" "$tmp/p-b.toml" 60 -- $t -p $PORT -c UD -d rdg0 -x 1 -n 5000 $ev \
      -- $t -p $PORT -c UD -d rdg1 -x 1 -n 5000 $ev 127.0.0.1
    pair_ok "$what" || continue
    s=$(row "$tmp/srv.out") c=$(row "$tmp/cli.out")
    if [ -z "$s" ] || [ "$s" != "$c" ] || [ "${s#* }" != 5000 ]; then
      echo "FAIL: $what: result rows '$s' (server) and '$c' (client)"
      sed 's/^/    /' "$tmp/srv.out" "$tmp/cli.out" | tail -n 30
      fails=$((fails + 1))
      continue
    fi
    echo "   bytes/iterations: $s; client row: $(awk '/#bytes/ { getline; print; exit }' "$tmp/cli.out" | tr -s ' \t' ' ')"
  done
done
finish
