#!/bin/busybox sh
# SPDX-License-Identifier: BSD-3-Clause
# /init of the lab guest (tests/lab/mkinitramfs.sh puts it in the
# initramfs). It loads the modules listed in /modules.list in order, mounts
# the host's root read-only over 9p (tag hostroot) and the run's directory
# read-write (tag labrun), sets eth0 up with the address the kernel command
# line gives (lab.ip=, lab.ip6=, lab.mtu=), adds rxe0 on eth0, then runs
# <labrun>/guest.sh inside a chroot of the host's root, with the guest's own
# /proc, /sys, /dev and a tmpfs /tmp and /run. Every line it prints starts
# with "lab:" so the host can tell the init's words from the test's. It
# writes the script's exit status to <labrun>/guest.rc and powers off.
/bin/busybox mkdir -p /proc /sys /dev /host /run-dir /tmp
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sysfs /sys
/bin/busybox mount -t devtmpfs devtmpfs /dev
export PATH=/bin
/bin/busybox --install -s /bin

say() { echo "lab: $*"; }
die() {
	say "FAIL: $*"
	[ -d /run-dir/out ] && echo "$*" >/run-dir/guest.fail
	sync
	poweroff -f
	sleep 5
}

for arg in $(cat /proc/cmdline); do
	case "$arg" in
	lab.ip=*) LAB_IP=${arg#lab.ip=} ;;
	lab.ip6=*) LAB_IP6=${arg#lab.ip6=} ;;
	lab.mtu=*) LAB_MTU=${arg#lab.mtu=} ;;
	lab.vlan=*) LAB_VLAN=${arg#lab.vlan=} ;; # VID,IPV4/LEN,IPV6/LEN: eth0.VID with them
	lab.keep=*) LAB_KEEP_PATHS=${arg#lab.keep=} ;;
	lab.guest_timeout=*) LAB_GUEST_TIMEOUT=${arg#lab.guest_timeout=} ;;
	lab.insmod=*) LAB_INSMOD=${arg#lab.insmod=} ;; # one more, after the list (the lab's self-test)
	esac
done

n=0
while read -r mod args; do
	[ -z "$mod" ] && continue
	insmod "$mod" $args || die "module $(basename "$mod") did not load"
	n=$((n + 1))
done </modules.list
if [ -n "$LAB_INSMOD" ]; then
	insmod "$LAB_INSMOD" || die "module $(basename "$LAB_INSMOD") did not load"
	n=$((n + 1))
fi
say "$n modules loaded"

mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=512000 hostroot /host ||
	die "9p mount of the host root failed"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 labrun /run-dir ||
	die "9p mount of the run directory failed"
mkdir -p /run-dir/out

# A view of the host's root without what is mounted over it next: the
# paths under /tmp or /run the test needs (lab.keep=, comma-separated: the
# checkout and the binaries, wherever they live) are bound back from it
# onto the guest's own tmpfs.
mkdir -p /hostro
mount --bind /host /hostro || die "bind mount of the host's root failed"
mount -t proc proc /host/proc
mount -t sysfs sysfs /host/sys
mount -t devtmpfs devtmpfs /host/dev
mount -t tmpfs tmpfs /host/tmp
mount -t tmpfs tmpfs /host/run
mount --bind /run-dir /host/mnt || die "bind mount of the run directory failed"
for p in $(echo "$LAB_KEEP_PATHS" | tr ',' ' '); do
	case "$p" in
	/tmp/* | /run/*)
		mkdir -p "/host$p" && mount --bind "/hostro$p" "/host$p" || die "cannot keep $p visible in the guest"
		;;
	esac
done

# The host's iproute2 (busybox's ip has no nodad).
hip() { chroot /host /usr/bin/ip "$@"; }
hip link set lo up
hip link set eth0 up || die "no eth0 (virtio_net)"
[ -n "$LAB_MTU" ] && hip link set eth0 mtu "$LAB_MTU"
[ -n "$LAB_IP" ] && hip addr add "$LAB_IP" dev eth0
[ -n "$LAB_IP6" ] && hip -6 addr add "$LAB_IP6" dev eth0 nodad

if [ -n "$LAB_VLAN" ]; then
	# RoCE on a VLAN: the VLAN netdev eth0.VID with addresses of its own;
	# eth0 keeps the lab's untagged ones (the tools' TCP exchange). rxe
	# stays on eth0: Linux refuses rxe on a VLAN netdev since 5.11
	# ("rxe creation allowed on top of a real device only", EPERM), and
	# its GID table takes the VLAN's addresses as GIDs whose netdev is
	# eth0.VID, which rxe sends through (tagged) and receives from. Linux
	# answers ARP for any of its addresses on any interface by default:
	# arp_ignore 1 keeps the VLAN's addresses off the untagged link, as on
	# a fabric where the VLAN is the only way in.
	vid=${LAB_VLAN%%,*}
	rest=${LAB_VLAN#*,}
	echo 1 >/proc/sys/net/ipv4/conf/all/arp_ignore
	hip link add link eth0 name eth0.$vid type vlan id $vid || die "cannot add eth0.$vid (8021q)"
	hip link set eth0.$vid up
	hip addr add "${rest%%,*}" dev eth0.$vid
	hip -6 addr add "${rest#*,}" dev eth0.$vid nodad
fi
chroot /host /usr/bin/rdma link add rxe0 type rxe netdev eth0 || die "rdma link add rxe0 failed"
say "rxe0 on eth0 $LAB_IP $LAB_IP6 ${LAB_VLAN:+(VLAN $LAB_VLAN)}"

# Bounded inside the guest too: a script that hangs ends with 124 and the
# host says so, whatever the emulator's speed.
chroot /host /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp LAB_RUN=/mnt \
	/usr/bin/timeout -k 5 "${LAB_GUEST_TIMEOUT:-180}" /bin/bash /mnt/guest.sh
rc=$?
echo "$rc" >/run-dir/guest.rc
say "guest.sh exited $rc"
sync
umount /host/mnt 2>/dev/null
for p in $(echo "$LAB_KEEP_PATHS" | tr ',' ' '); do umount "/host$p" 2>/dev/null; done
umount /host/run /host/tmp /host/dev /host/sys /host/proc /hostro 2>/dev/null
umount /run-dir 2>/dev/null
poweroff -f
