#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# rdgram-fwd on rdgram's own mlx5 driver (drivers/mlx5) under rdgram-verbs
# on a kind = "mlx5" port, reflecting what lab_soft_peer (the soft driver
# on the other end of a net_memif pair, tests/lab/soft_peer.cc) sends: N
# good datagrams per address family to the QP rdgram-fwd printed, each to
# come back byte for byte from that QP and the port's GID, and one of each
# kind a RoCE port drops (wrong ICRC, Q_Key, P_Key, destination QPN),
# each to be dropped by rdgram-verbs' port and counted by its reason. The reply AHs
# are rdgram-fwd's own, made from each completion's GRH area through
# libmlx5's ibv_create_ah (the emulated mlx5_ib resolves the MAC by ARP
# and ND); drivers/mlx5 writes the replies' WQEs, the emulated NIC
# executes them. Then the counts: soft_peer's, rdgram-fwd's --stats-json
# (delivered = reflected = sent = 2N, nothing dropped, every mbuf back,
# 2 reply AHs) and the NIC's (no error counter).
# The same pattern as tests/lab/fwd_rxe.sh, with the emulated ConnectX
# where that has rxe.
# usage: mlx5_fwd.sh RDGRAM_VERBS RDGRAM_FWD LAB_SOFT_PEER
set -u
. "$(dirname "$0")/lib.sh"
verbs_setup "$1"
FWD=$2 SOFT=$3
[ -e /usr/lib/x86_64-linux-gnu/libmlx5.so.1 ] || [ -n "$(ldconfig -p 2>/dev/null | grep libmlx5.so.1)" ] ||
  { echo "SKIP: libmlx5.so.1 missing (ibverbs-providers)"; exit 77; }
memif_pair f
sed -e 's/^name = "rdg0"/name = "mlx5_0"\nkind = "mlx5"/' "$tmp/f-a.toml" >"$tmp/m.toml"
sock=$(sed -n 's/.*socket=\([^"]*\)".*/\1/p' "$tmp/f-a.toml")
n=40 # good datagrams per family
printf '[fwd]\ndriver = "mlx5"\nworkers = 1\nmode = "reflect"\n[rdma]\ndevice = "mlx5_0"\nport = 1\ngid_index = 1\n' \
  >"$tmp/fwd.toml"
RDGRAM_VERBS_STATS=1 timeout 90 "$RV" -c "$tmp/m.toml" "$FWD" -c "$tmp/fwd.toml" --max-packets $((2 * n)) \
  --duration 80 --stats-json "$tmp/fwd.json" >"$tmp/fwd.out" 2>&1 &
spid=$!
l=
for _ in $(seq 1 600); do
  l=$(grep -m1 'queue 0 (worker 0): qpn' "$tmp/fwd.out") && break
  kill -0 "$spid" 2>/dev/null || break
  sleep 0.1
done
[ -n "$l" ] || { echo "FAIL: rdgram-fwd printed no QPN"; cat "$tmp/fwd.out"; exit 1; }
echo "$l" | sed 's/.*\(qpn 0x[0-9a-f]* qkey 0x[0-9a-f]*\).*/\1/' >"$tmp/fwd.ready"
timeout 90 "$SOFT" --port "net_memif1,role=client,socket=$sock" --mac 02:00:00:00:00:02 --ip4 10.0.0.2 \
  --ip6 fd00::2 --peer-mac 02:00:00:00:00:01 --peer4 10.0.0.1 --peer6 fd00::1 --ready "$tmp/fwd.ready" \
  --count $n --echo --bad --timeout 80 >"$tmp/sp.out" 2>&1
prc=$?
wait "$spid"
frc=$?
spid=
echo "--- lab_soft_peer (exit $prc)"; cat "$tmp/sp.out"
echo "--- rdgram-fwd under rdgram-verbs (exit $frc)"; cat "$tmp/fwd.out"
[ "$prc" = 0 ] || { echo "FAIL: soft_peer exit $prc (not every datagram came back byte for byte)"; fails=$((fails + 1)); }
[ "$frc" = 0 ] || { echo "FAIL: rdgram-fwd exit $frc"; fails=$((fails + 1)); }
if grep -E '^  (tx_[a-z_]*err|tx_compact_av|tx_av_unknown|rx_[a-z_]*err|rx_no_qp|rx_no_wqe|cq_overrun|flushed) ' \
  "$tmp/fwd.out"; then
  echo "FAIL: NIC error counters moved"; fails=$((fails + 1))
fi
for c in rx_bad_icrc rx_bad_qkey rx_bad_pkey rx_unknown_qpn; do
  expect "$tmp/fwd.out" "^  $c +2 " "the port dropped the two bad datagrams of $c"
done
python3 - "$tmp/fwd.json" $((2 * n)) <<'PY' || fails=$((fails + 1))
import json, sys
try:
    st = json.load(open(sys.argv[1]))
except (OSError, ValueError) as e:
    print("FAIL: no --stats-json from rdgram-fwd:", e)
    sys.exit(1)
want = int(sys.argv[2])
errs = []
if st["driver"] != "mlx5":
    errs.append(f"driver {st['driver']}, expected mlx5")
if st["stopped"] != "max packets reached":
    errs.append(f"stopped: {st['stopped']}, expected by --max-packets")
t = st["totals"]
for k in ("delivered", "reflected", "handed_to_driver", "tx_pkts"):
    if t[k] != want:
        errs.append(f"{k}: {t[k]}, expected {want}")
if t["dropped"] != 0:
    errs.append("dropped: " + str({k: v for k, v in t["drops"].items() if v}))
p = st["ports"][0]
if p.get("mbufs_out_at_close") != 0:
    errs.append(f"mbufs out of the pool once the queues closed: {p.get('mbufs_out_at_close')}")
bad = {k: v for k, v in p["driver"].items() if v and ("err" in k or "bad" in k or "stale" in k or "stray" in k
                                                      or "mismatch" in k or "unparsed" in k or "no_" in k)}
if bad:
    errs.append(f"drivers/mlx5 counters: {bad}")
if p["ah_service"]["created"] != 2:
    errs.append(f"reply AHs: {p['ah_service']['created']}, expected 2 (one per family)")
for e in errs:
    print("FAIL:", e)
if not errs:
    print(f"ok: rdgram-fwd on drivers/mlx5: {want} delivered = reflected = sent, nothing dropped, every mbuf back, "
          "2 reply AHs through libmlx5")
sys.exit(1 if errs else 0)
PY
finish
