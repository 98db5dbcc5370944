#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Install the Debian 12 packages rdgram's build, tests, apps and benchmarks
# need -- only those that are missing. Idempotent; a no-op run takes well
# under a second (one dpkg-query call, no apt).
#
# usage: install-deps.sh [lab|cluster]
#   (none)   what the build, the tests, the apps and the benchmarks need
#   lab      what the lab needs (tests/lab/: a QEMU guest running Linux's
#            rdma_rxe, with rdma-core's and perftest's tools on its side)
#   cluster  what the Slurm tests need (tests/cluster/slurm.sh: a one-node
#            cluster of their own; the PMIx plugin loads libpmix through
#            libpmix-dev's unversioned link, in the default set)
set -euo pipefail

set_name=${1:-build}
case "$set_name" in
build) ;;
lab | cluster) ;;
*)
	echo "usage: $0 [lab|cluster]" >&2
	exit 2
	;;
esac

PKGS=(
	meson ninja-build pkg-config g++
	libdpdk-dev dpdk-dev
	libibverbs-dev ibverbs-providers librdmacm-dev
	libhwloc-dev libnuma-dev libpcap-dev zlib1g-dev
	libgtest-dev libbenchmark-dev
	libtomlplusplus-dev libcli11-dev
	python3-scapy tshark iproute2   # tests: packet checks, netns
	nftables                       # tests: a bridge port that drops frames (where tc netem is missing)
	sockperf                       # benchmarks/compare.py reference
	gnuplot-nox                    # rdgram-perf --hist-plot
	man-db groff-base              # tests/install: man -l renders the man pages
	clang libclang-rt-dev llvm     # fuzz/: clang, libFuzzer+ASan runtimes, llvm-symbolizer
	libpmix-dev openmpi-bin        # rdgram-coll's PMIx bootstrap; mpirun (its PMIx server) in the tests
	ibverbs-utils perftest python3-pyverbs # tests/verbs: unmodified verbs programs on rdgram-verbs
	ucx-utils                      # tests/verbs/ucx.sh: ucx_info, ucx_perftest (UCX 1.13, libucx0's ud_verbs)
)
if [[ $set_name == lab ]]; then
	PKGS=(
		qemu-system-x86 linux-image-amd64 # the guest: TCG, Debian's kernel (rdma_rxe)
		busybox-static cpio kmod          # its initramfs; modprobe --show-depends
		ibverbs-providers ibverbs-utils rdmacm-utils perftest # rxe's provider, the peers
		iproute2                          # rdma link add rxe0; the namespace and the tap
	)
fi
if [[ $set_name == cluster ]]; then
	# slurm-wlm-basic-plugins (mpi_pmix_v4.so) comes with slurmd.
	PKGS=(munge slurmctld slurmd slurm-client libpmix-dev)
fi

# One dpkg-query for all packages: prints "<pkg> <status>" for known ones;
# unknown packages go to stderr and simply don't appear.
declare -A status=()
while IFS=' ' read -r pkg st; do
	status["$pkg"]="$st"
done < <(dpkg-query -W -f='${Package} ${Status}\n' "${PKGS[@]}" 2>/dev/null || true)

missing=()
for p in "${PKGS[@]}"; do
	if [[ "${status[$p]:-}" != "install ok installed" ]]; then
		missing+=("$p")
	fi
done

if ((${#missing[@]} == 0)); then
	echo "install-deps: all ${#PKGS[@]} packages ($set_name) already installed"
	exit 0
fi

echo "install-deps: missing: ${missing[*]}"

if [[ "$(id -u)" -ne 0 ]]; then
	echo "install-deps: not root; run this (after 'sudo apt-get update' if apt has no package lists), then retry:" >&2
	echo "sudo apt-get install -y --no-install-recommends ${missing[*]}"
	exit 1
fi

export DEBIAN_FRONTEND=noninteractive

# tshark (wireshark-common) asks whether non-root users may capture.
if command -v debconf-set-selections >/dev/null 2>&1; then
	echo "wireshark-common wireshark-common/install-setuid boolean false" |
		debconf-set-selections
fi

apt_install() {
	apt-get install -y --no-install-recommends "${missing[@]}"
}

shopt -s nullglob
lists=(/var/lib/apt/lists/*_Packages*)
shopt -u nullglob

if ((${#lists[@]} == 0)); then
	apt-get update
	apt_install
elif ! apt_install; then
	echo "install-deps: install failed; running apt-get update and retrying" >&2
	apt-get update
	apt_install
fi

echo "install-deps: installed ${missing[*]}"
