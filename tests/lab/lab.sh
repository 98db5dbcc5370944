# SPDX-License-Identifier: BSD-3-Clause
# The lab: Linux's rdma_rxe (the kernel's RoCEv2) in a QEMU guest under
# TCG, joined to the host in one of two ways (LAB_NET), both inside the
# machine:
#   tap    (default) a tap inside a network namespace the test creates;
#          rdgram on the host side runs on net_af_packet over it, and the
#          host's kernel has an address there for TCP exchanges;
#   vhost  QEMU's vhost-user netdev against DPDK's net_vhost: no kernel
#          networking on the host side at all (the guest's memory is a
#          shared memfd; the NIC has vectors=0, as QEMU 7.2 under TCG
#          crashes enabling a vhost-user virtio-net with MSI-X). The host's
#          DPDK process must listen on the socket before lab_start.
# Sourced by the lab's tests (tests/lab/*.sh):
#
#   . tests/lab/lab.sh
#   lab_init NAME          checks what the lab needs (exit 77 with the reason
#                          when QEMU or the kernel is missing, or not root),
#                          makes the run directory, the namespace and the tap,
#                          and builds the initramfs and the PVH kernel (once)
#   lab_keep PATH...       host paths the guest must see although they lie
#                          under /tmp or /run (where the guest has its own
#                          tmpfs); the checkout is kept already
#   lab_guest_script <<EOF the guest's commands (bash, run as root in a chroot
#   ...                    of the host's root: same paths, same binaries);
#   EOF                    $LAB_RUN there is the run directory (/mnt)
#   lab_start              boots the guest in the background
#   lab_host CMD...        runs CMD on the host side, inside the namespace
#   lab_host_port          the DPDK devargs of the host's port to the guest
#   lab_wait               waits for the guest to power off (bounded):
#                          0 when guest.sh exited 0; prints the console on
#                          failure; a guest that did not boot, a module that
#                          did not load or a timeout is said as such
#   (cleanup on exit)      kills QEMU and everything lab_host started, deletes
#                          the namespace and the run directory
#
# Addresses on the lab's link (10.77.0.0/24, fd77::/64; inside the test's
# own namespace, reachable from nowhere else):
#   guest eth0 / rxe0  10.77.0.2  fd77::2   MAC 52:54:00:77:00:02
#   host kernel (tap)  10.77.0.254 fd77::fe  (TCP for the out-of-band exchanges)
#   rdgram on the tap  10.77.0.1  fd77::1   (the soft driver's own addresses)
# No timing measured in the guest is a performance figure: TCG emulates the CPU.

LAB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LAB_REPO=$(cd "$LAB_DIR/../.." && pwd)
LAB_GUEST_IP=10.77.0.2
LAB_GUEST_IP6=fd77::2
LAB_GUEST_MAC=52:54:00:77:00:02
LAB_HOST_IP=10.77.0.254
LAB_HOST_IP6=fd77::fe
LAB_SOFT_IP=10.77.0.1
LAB_SOFT_IP6=fd77::1
LAB_BOOT_TIMEOUT=${LAB_BOOT_TIMEOUT:-240} # seconds from start to power-off, at most
LAB_GUEST_TIMEOUT=${LAB_GUEST_TIMEOUT:-180} # seconds for guest.sh, counted in the guest
LAB_NET=${LAB_NET:-tap}

lab_skip() {
	echo "SKIP: $*"
	exit 77
}
lab_fail() {
	echo "FAIL: $*"
	exit 1
}

# The newest packaged kernel that has rdma_rxe and its image.
lab_kernel() {
	local k best=
	for k in /lib/modules/*; do
		k=${k##*/}
		[[ -r /boot/vmlinuz-$k && -f /lib/modules/$k/kernel/drivers/infiniband/sw/rxe/rdma_rxe.ko ]] || continue
		best=$k
	done
	echo "$best"
}

lab_init() {
	local name=$1
	[[ $(id -u) -eq 0 ]] || lab_skip "the lab needs root (network namespace, tap)"
	command -v qemu-system-x86_64 >/dev/null ||
		lab_skip "qemu-system-x86_64 missing (tests/lab/install-deps.sh installs it)"
	LAB_KVER=$(lab_kernel)
	[[ -n $LAB_KVER ]] ||
		lab_skip "no packaged kernel with rdma_rxe (/boot/vmlinuz-* and its modules; tests/lab/install-deps.sh)"
	case "$LAB_NET" in
	tap) [[ -c /dev/net/tun ]] || lab_skip "/dev/net/tun missing: no tap for the guest's NIC" ;;
	vhost) ;;
	*) lab_fail "LAB_NET=$LAB_NET: tap or vhost" ;;
	esac
	# The guest's CPU (QEMU's TCG "max") has AVX2 but no AVX-512.
	if [[ ${LAB_CPU_ISA:-} == native ]] && grep -qw avx512f /proc/cpuinfo; then
		lab_skip "this tree is built for this host's CPU (AVX-512), which the guest's lacks: use a tree configured with -Dcpu_instruction_set=generic (build.sh test's build-generic/)"
	fi
	LAB_INITRD=${LAB_CACHE:-/tmp/rdgram-lab-cache}/initrd-$LAB_KVER.cpio.gz
	"$LAB_DIR/mkinitramfs.sh" "$LAB_KVER" "$LAB_INITRD" || lab_fail "could not build the guest's initramfs"
	# The kernel uncompressed, booted through its PVH entry (mkvmlinux.sh:
	# TCG spends about 4 s in the bzImage's XZ decompressor); the bzImage
	# when the kernel has none.
	LAB_KERNEL=${LAB_CACHE:-/tmp/rdgram-lab-cache}/vmlinux-$LAB_KVER
	"$LAB_DIR/mkvmlinux.sh" "$LAB_KVER" "$LAB_KERNEL" || LAB_KERNEL=/boot/vmlinuz-$LAB_KVER
	LAB_RUN=$(mktemp -d "/tmp/rdgram-lab-$name.XXXXXX")
	# $BASHPID, not $$: labs started from subshells of one script at the
	# same time (selftest.sh) each need their own namespace.
	LAB_NS=rdglab$BASHPID
	LAB_TAP=rdgtap$BASHPID
	LAB_PIDS=()
	LAB_QEMU=
	LAB_KEEP_PATHS=()
	lab_keep "$LAB_REPO"
	trap lab_cleanup EXIT
	ip netns add "$LAB_NS" || lab_skip "cannot create a network namespace"
	ip -n "$LAB_NS" link set lo up
	ip -n "$LAB_NS" tuntap add dev "$LAB_TAP" mode tap || lab_fail "cannot create tap $LAB_TAP"
	ip -n "$LAB_NS" link set "$LAB_TAP" up
	ip -n "$LAB_NS" addr add "$LAB_HOST_IP/24" dev "$LAB_TAP"
	ip -n "$LAB_NS" -6 addr add "$LAB_HOST_IP6/64" dev "$LAB_TAP" nodad
	LAB_VHOST_SOCK=$LAB_RUN/vhost.sock
	echo "lab: kernel $LAB_KVER ($([[ $LAB_KERNEL == */vmlinux-* ]] && echo "PVH entry" || echo bzImage)), run directory $LAB_RUN, namespace $LAB_NS, $([[ $LAB_NET == tap ]] && echo "tap $LAB_TAP" || echo "vhost-user $LAB_VHOST_SOCK")"
}

lab_cleanup() {
	local p
	for p in "${LAB_PIDS[@]}" $LAB_QEMU; do
		kill "$p" 2>/dev/null
	done
	sleep 0.2
	for p in "${LAB_PIDS[@]}" $LAB_QEMU; do
		kill -9 "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	# Anything still running in the namespace (a host-side process
	# started by hand in a test) goes with it.
	local left
	left=$(ip netns pids "$LAB_NS" 2>/dev/null)
	[[ -n $left ]] && kill -9 $left 2>/dev/null
	ip netns del "$LAB_NS" 2>/dev/null
	[[ -n ${LAB_KEEP:-} ]] && echo "lab: kept $LAB_RUN" || rm -rf "$LAB_RUN"
}

lab_keep() {
	local p
	for p in "$@"; do
		p=$(realpath "$p")
		[[ -f $p ]] && p=$(dirname "$p")
		[[ $p == *[,\ ]* ]] && lab_fail "the lab cannot pass a path with a comma or a space to the guest: $p"
		LAB_KEEP_PATHS+=("$p")
	done
}

lab_guest_script() {
	{
		echo "set -u"
		echo "cd '$LAB_REPO'"
		cat
	} >"$LAB_RUN/guest.sh"
}

lab_host_port() {
	if [[ $LAB_NET == tap ]]; then
		echo "net_af_packet0,iface=$LAB_TAP,qpairs=1,blocksz=4096,framesz=2048,framecnt=512"
	else
		echo "net_vhost0,iface=$LAB_VHOST_SOCK,queues=1"
	fi
}

# Waits (bounded) until the host's net_vhost listens on the socket.
lab_wait_vhost_socket() {
	for _ in $(seq 1 300); do
		[[ -S $LAB_VHOST_SOCK ]] && return 0
		sleep 0.1
	done
	lab_fail "nothing listens on $LAB_VHOST_SOCK (the host's net_vhost port did not start)"
}

# Boots the guest: 2 vCPUs (TCG, one thread each), 2 GiB, the host's root
# over 9p read-only, the run directory read-write, a virtio NIC on the tap
# or on vhost-user.
lab_start() {
	local cmdline="console=ttyS0 quiet panic=-1 lab.ip=$LAB_GUEST_IP/24 lab.ip6=$LAB_GUEST_IP6/64"
	cmdline+=" lab.keep=$(IFS=,; echo "${LAB_KEEP_PATHS[*]}")"
	cmdline+=" lab.guest_timeout=$LAB_GUEST_TIMEOUT"
	[[ -n ${LAB_INSMOD:-} ]] && cmdline+=" lab.insmod=$LAB_INSMOD"
	[[ -n ${LAB_VLAN:-} ]] && cmdline+=" lab.vlan=$LAB_VLAN"
	local nic
	if [[ $LAB_NET == tap ]]; then
		nic=(-netdev "tap,id=n0,ifname=$LAB_TAP,script=no,downscript=no"
			-device "virtio-net-pci,netdev=n0,mac=$LAB_GUEST_MAC")
	else
		lab_wait_vhost_socket
		nic=(-object memory-backend-memfd,id=mem,size=2048M,share=on -numa node,memdev=mem
			-chardev "socket,id=vhu,path=$LAB_VHOST_SOCK"
			-netdev vhost-user,id=n0,chardev=vhu
			-device "virtio-net-pci,netdev=n0,mac=$LAB_GUEST_MAC,vectors=0")
	fi
	ip netns exec "$LAB_NS" timeout -k 5 "$LAB_BOOT_TIMEOUT" qemu-system-x86_64 \
		-accel tcg -cpu max -smp 2 -m 2048 -nographic -no-reboot -nodefaults -serial stdio \
		-kernel "$LAB_KERNEL" -initrd "${LAB_INITRD_OVERRIDE:-$LAB_INITRD}" -append "$cmdline" \
		-fsdev local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap \
		-device virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot \
		-fsdev local,id=labrun,path="$LAB_RUN",security_model=none \
		-device virtio-9p-pci,fsdev=labrun,mount_tag=labrun \
		"${nic[@]}" </dev/null >"$LAB_RUN/console.log" 2>&1 &
	LAB_QEMU=$!
	LAB_T0=$SECONDS
}

# Runs a host-side command in the namespace, in the background; its pid is
# in LAB_LAST_PID, and cleanup kills it if it is still running.
lab_host_bg() {
	ip netns exec "$LAB_NS" "$@" &
	LAB_LAST_PID=$!
	LAB_PIDS+=("$LAB_LAST_PID")
}
# The same in the foreground.
lab_host() {
	ip netns exec "$LAB_NS" "$@"
}

# Waits until the guest said its interfaces are up (rxe0 added), or fails.
lab_wait_ready() {
	local limit=${1:-120}
	for _ in $(seq 1 $((limit * 10))); do
		grep -q 'lab: rxe0 on eth0' "$LAB_RUN/console.log" 2>/dev/null && return 0
		grep -q 'lab: FAIL' "$LAB_RUN/console.log" 2>/dev/null && break
		kill -0 "$LAB_QEMU" 2>/dev/null || break
		sleep 0.1
	done
	lab_console
	lab_fail "the guest did not come up ($(lab_why))"
}

lab_why() {
	local f
	f=$(tr -d '\r' <"$LAB_RUN/console.log" 2>/dev/null | grep -m1 -o 'lab: FAIL.*')
	if [[ -n $f ]]; then
		echo "${f#lab: FAIL: }"
	elif ! grep -q 'lab: [0-9]* modules loaded' "$LAB_RUN/console.log" 2>/dev/null; then
		echo "the guest did not boot: its kernel or initramfs never ran /init"
	else
		echo "no power-off within ${LAB_BOOT_TIMEOUT} s"
	fi
}

lab_console() {
	echo "--- guest console"
	tr -d '\r' <"$LAB_RUN/console.log" | grep -v -e '^\s*$' -e 'SeaBIOS' -e 'iPXE' -e 'Booting from' | tail -n "${1:-200}"
	echo "--- end of guest console"
}

lab_wait() {
	wait "$LAB_QEMU"
	local qrc=$?
	LAB_QEMU=
	echo "lab: the guest ran $((SECONDS - LAB_T0)) s (TCG: not a performance figure)"
	if [[ ! -f $LAB_RUN/guest.rc ]]; then
		lab_console
		echo "FAIL: $(lab_why) (qemu exit $qrc)"
		return 1
	fi
	local rc
	rc=$(cat "$LAB_RUN/guest.rc")
	if [[ $rc == 124 ]]; then
		lab_console
		echo "FAIL: guest.sh did not finish within $LAB_GUEST_TIMEOUT s (stopped in the guest)"
		return 1
	fi
	if [[ $rc != 0 ]]; then
		lab_console
		echo "FAIL: guest.sh exited $rc"
		return 1
	fi
	return 0
}
