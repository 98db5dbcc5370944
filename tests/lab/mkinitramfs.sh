#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Builds the lab guest's initramfs: busybox-static, the kernel modules rxe
# and the guest's devices need (with their dependencies, in load order, as
# `modprobe --show-depends` resolves them against the packaged kernel), and
# tests/lab/guest-init.sh as /init. The guest's userspace is the host's own
# root, mounted read-only over 9p (guest-init.sh), so rdma-core, perftest
# and rdgram's binaries are the host's, with their libraries.
#
# usage: mkinitramfs.sh KVER OUT.cpio.gz
# Rebuilds only when OUT is older than this script, guest-init.sh or the
# kernel's modules.dep. One line and exit 1 on any failure.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
kver=${1:?usage: mkinitramfs.sh KVER OUT.cpio.gz}
out=${2:?usage: mkinitramfs.sh KVER OUT.cpio.gz}
fail() { echo "mkinitramfs: $*" >&2; exit 1; }

moddir=/lib/modules/$kver
[[ -f $moddir/modules.dep ]] || fail "no modules for kernel $kver ($moddir/modules.dep missing)"
if [[ -f $out && $out -nt $here/mkinitramfs.sh && $out -nt $here/guest-init.sh &&
	$out -nt $moddir/modules.dep ]]; then
	exit 0
fi
# (The list whole, not piped into grep -q: under pipefail busybox's SIGPIPE
# would fail the check at random.)
applets=$(/bin/busybox --list 2>/dev/null) || applets=
[[ $'\n'$applets$'\n' == *$'\n'insmod$'\n'* ]] ||
	fail "/bin/busybox is not busybox-static with insmod (install busybox-static)"

# crc32_generic first: rxe computes its ICRC through the crypto API's
# "crc32" and fails to add a link without it. Then virtio (PCI, net, 9p
# for the host's root), then the RDMA stack: rxe, uverbs for userspace,
# rdma_ucm for rdma_cm (multicast joins). Then what DPDK's net_tap needs
# for rte_flow rules (lab_verbs_hw runs test_soft_tap): tun, the multiq root and
# ingress qdiscs it creates, flower filters with their skbedit (QUEUE),
# gact (DROP, PASSTHRU) and mirred actions (net_tap's RSS action, BPF, is
# not used). 8021q for the VLAN netdev on eth0 (lab.vlan=, guest-init.sh).
want=(crc32_generic virtio_pci virtio_net 9pnet_virtio 9p rdma_rxe ib_uverbs rdma_ucm
	tun sch_multiq sch_ingress cls_flower act_skbedit act_gact act_mirred 8021q)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage"/{bin,lib/modules}
: >"$stage/modules.list"
declare -A seen=()
for m in "${want[@]}"; do
	deps=$(modprobe -S "$kver" --show-depends "$m" 2>&1) || fail "modprobe --show-depends $m: $deps"
	while read -r verb path rest; do
		[[ $verb == insmod ]] || continue # builtin: nothing to load
		[[ -n ${seen[$path]:-} ]] && continue
		seen[$path]=1
		case "$path" in
		*.ko) ;;
		*) fail "module $path is compressed; the guest's busybox insmod takes plain .ko" ;;
		esac
		mkdir -p "$stage$(dirname "$path")"
		cp "$path" "$stage$path"
		echo "$path $rest" >>"$stage/modules.list"
	done <<<"$deps"
done
cp /bin/busybox "$stage/bin/busybox"
cp "$here/guest-init.sh" "$stage/init"
chmod 755 "$stage/init"
mkdir -p "$(dirname "$out")"
# A file of this run's own, renamed into place: two lab tests started at
# once on an empty cache (build.sh runs two at a time) each build one, and
# the rename is atomic, so neither reads the other's half-written file.
(cd "$stage" && find . | cpio -o -H newc --quiet | gzip -1) >"$out.tmp.$$" || { rm -f "$out.tmp.$$"; fail "cpio failed"; }
mv "$out.tmp.$$" "$out"
