#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright(c) 2026 The rdgram authors
#
# A Slurm cluster of one node, of its own: Debian's munged, slurmctld and
# slurmd (22.05) with the PMIx plugin (mpi_pmix_v4.so), started in the
# background inside a network namespace, their configuration, munge key,
# state, spool and logs in one directory, stopped by their PIDs.
#
# Sourced (tests):
#   slurm_up DIR NS       starts the cluster in network namespace NS (a
#                         name under /run/netns; "" for this process's
#                         own), DIR an empty directory of its own. Returns
#                         0 once the node is idle, with SLURM_CONF
#                         exported; else 1 after one line on stderr naming
#                         the daemon that did not start and its log, with
#                         whatever it had started stopped.
#   slurm_in CMD...       runs CMD in the cluster's namespace (srun, sinfo).
#   slurm_down            stops slurmd and the job steps' slurmstepd, then
#                         slurmctld, then munged, by their PIDs (TERM,
#                         KILL after SLURM_STOP_WAIT s, 5 by default); DIR
#                         stays for the caller to read and remove. Safe to
#                         call twice, and from a trap.
# Run (by hand):
#   slurm.sh start DIR [NS]   then SLURM_CONF=DIR/slurm.conf srun ... (in NS:
#                             nsenter --net=/run/netns/NS srun ...)
#   slurm.sh stop DIR
#
# What the node is: NodeName is this host's name with CPUs=32 (Slurm
# takes the configured count: SlurmdParameters=config_overrides, else the
# node goes INVAL on a 2-CPU machine), so 32 ranks fit on 2 cores;
# task/none (no binding: every task may use every CPU, and the ranks place
# their lcores by PMIx local rank), proctrack/linuxproc (no cgroups),
# MpiDefault=pmix. Slurm resolves names with AI_ADDRCONFIG, which wants an
# IPv4 address other than loopback in the namespace: slurm_up gives NS one
# on a veth pair of its own (sl0/sl0b, SLURM_ADDR, 10.253.0.1 by default)
# when it has none. Its ports: SLURM_PORT (slurmctld) and the next
# (slurmd), by default from this shell's PID. SLURM_CONF_EXTRA: lines
# added to slurm.conf. The daemons run under `nsenter --net=`: slurmd dies
# under `ip netns exec`, which remounts /sys. Needs root (munged and the
# daemons run as root: SlurmUser=root); SLURM_MUNGE_KEY names another key
# file (the test of a missing key).

slurm_ns=
slurm_dir=
# The command prefix that enters the namespace: a plain array, not a
# function, so that $! of a daemon started with it is the daemon's PID
# (nsenter execs it).
slurm_pre=()

slurm_in() {
	"${slurm_pre[@]}" "$@"
}

# slurm_fail DAEMON LOG WHY: the one line with the daemon's last words
# and the file they are in (its log; what it printed, DIR/DAEMON.out, when
# it stopped before opening its log), then everything stopped.
slurm_fail() {
	local last='' f log=$2
	for f in "$2" "$slurm_dir/$1.out"; do
		[ -s "$f" ] || continue
		last=$(grep -v '^[[:space:]]*$' "$f" | tail -n 1 | sed -e 's/^\[[^]]*\] //' -e "s/^$1: //")
		log=$f
		break
	done
	echo "slurm: $1 did not start ($3${last:+: $last}); see $log" >&2
	slurm_down
	return 1
}

# slurm_wait_up DAEMON PIDFILE LOG TEST: polls TEST (every 0.1 s, up to
# 15 s) while the daemon lives.
slurm_wait_up() {
	local d=$1 pid log=$3 i
	pid=$(cat "$2")
	for ((i = 0; i < 150; i++)); do
		eval "$4" && return 0
		kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null; slurm_fail "$d" "$log" "it exited"; return 1; }
		sleep 0.1
	done
	slurm_fail "$d" "$log" "not ready after 15 s"
}

slurm_up() {
	local dir=$1 host addr port
	slurm_ns=$2
	slurm_dir=$dir
	slurm_pre=()
	[ -n "$slurm_ns" ] && slurm_pre=(nsenter --net="/run/netns/$slurm_ns")
	host=$(hostname)
	mkdir -p "$dir/state" "$dir/spool" "$dir/tmp" || return 1
	chmod 700 "$dir"
	# A non-loopback IPv4 address in the namespace (AI_ADDRCONFIG).
	addr=${SLURM_ADDR:-10.253.0.1}
	if [ -n "$slurm_ns" ] && ! ip -n "$slurm_ns" -4 -o addr show scope global | grep -q inet; then
		{ ip -n "$slurm_ns" link add sl0 type veth peer name sl0b &&
			ip -n "$slurm_ns" addr add "$addr/24" dev sl0 &&
			ip -n "$slurm_ns" link set sl0 up && ip -n "$slurm_ns" link set sl0b up; } ||
			{ echo "slurm: cannot give namespace $slurm_ns an address (veth sl0)" >&2; return 1; }
	elif [ -z "$slurm_ns" ]; then
		addr=127.0.0.1
	fi
	# Ports of this cluster's own (two can run at once in one namespace).
	port=${SLURM_PORT:-$((20000 + ($$ % 10000) * 2))}
	cat >"$dir/slurm.conf" <<EOF
ClusterName=rdgram
SlurmctldHost=$host($addr)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge.sock
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
TmpFS=$dir/tmp
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
MpiDefault=pmix
SlurmdParameters=config_overrides
ReturnToService=2
MailProg=/bin/true
NodeName=$host NodeAddr=$addr CPUs=32 State=UNKNOWN
PartitionName=rdgram Nodes=ALL Default=YES MaxTime=INFINITE State=UP
${SLURM_CONF_EXTRA:-}
EOF
	export SLURM_CONF=$dir/slurm.conf
	local key=${SLURM_MUNGE_KEY:-$dir/munge.key}
	if [ -z "${SLURM_MUNGE_KEY:-}" ]; then
		mungekey --create --keyfile="$key" 2>"$dir/mungekey.log" || { echo "slurm: mungekey failed: see $dir/mungekey.log" >&2; return 1; }
	fi
	# munged: its own key, socket, pid, seed and log files.
	"${slurm_pre[@]}" munged -F --force --key-file="$key" --socket="$dir/munge.sock" --pid-file="$dir/munged.pid" \
		--seed-file="$dir/munged.seed" --log-file="$dir/munged.log" >"$dir/munged.out" 2>&1 &
	echo $! >"$dir/munged.bg"
	slurm_wait_up munged "$dir/munged.bg" "$dir/munged.log" \
		"munge -n -S '$dir/munge.sock' 2>/dev/null | unmunge -S '$dir/munge.sock' >/dev/null 2>&1" || return 1
	"${slurm_pre[@]}" slurmctld -D -i -c -f "$dir/slurm.conf" >"$dir/slurmctld.out" 2>&1 &
	echo $! >"$dir/slurmctld.bg"
	slurm_wait_up slurmctld "$dir/slurmctld.bg" "$dir/slurmctld.log" \
		"slurm_in scontrol ping 2>/dev/null | grep -q 'is UP'" || return 1
	"${slurm_pre[@]}" slurmd -D -c -N "$host" -f "$dir/slurm.conf" >"$dir/slurmd.out" 2>&1 &
	echo $! >"$dir/slurmd.bg"
	slurm_wait_up slurmd "$dir/slurmd.bg" "$dir/slurmd.log" \
		"slurm_in sinfo -h -o %t 2>/dev/null | grep -qx idle" || return 1
}

slurm_down() {
	local dir=$slurm_dir p node=() ctl=() munge=()
	[ -n "$dir" ] || return 0
	[ -f "$dir/slurmd.bg" ] && node+=("$(cat "$dir/slurmd.bg")")
	# The job steps' slurmstepd: they outlive slurmd.
	for p in $(slurm_steps); do node+=("$p"); done
	[ -f "$dir/slurmctld.bg" ] && ctl+=("$(cat "$dir/slurmctld.bg")")
	[ -f "$dir/munged.bg" ] && munge+=("$(cat "$dir/munged.bg")")
	# The node first, then the controller it reports to, then munged:
	# each still authenticates to the next on its way out (and waits
	# when that one is gone).
	slurm_stop "${node[@]}"
	slurm_stop "${ctl[@]}"
	slurm_stop "${munge[@]}"
	rm -f "$dir"/*.bg
	slurm_dir=
	return 0
}

# slurm_stop PID...: TERM, KILL after SLURM_STOP_WAIT s (5), then gone.
slurm_stop() {
	local p i live
	(($# == 0)) && return 0
	kill -TERM "$@" 2>/dev/null
	for ((i = 0; i < ${SLURM_STOP_WAIT:-5} * 10 + 20; i++)); do
		live=0
		for p in "$@"; do kill -0 "$p" 2>/dev/null && live=1; done
		[ $live -eq 0 ] && break
		[ $i -eq $((${SLURM_STOP_WAIT:-5} * 10)) ] && kill -KILL "$@" 2>/dev/null
		sleep 0.1
	done
	for p in "$@"; do wait "$p" 2>/dev/null; done
	return 0
}

# The slurmstepd processes of this cluster: they log to its slurmd.log,
# so they hold a file of DIR open.
slurm_steps() {
	local p f
	for p in $(pgrep -x slurmstepd); do
		for f in /proc/"$p"/fd/*; do
			case $(readlink "$f" 2>/dev/null) in "$slurm_dir"/*) echo "$p"; break ;; esac
		done
	done
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	set -u
	case ${1:-} in
	start)
		[ $# -ge 2 ] || { echo "usage: $0 start DIR [NS] | stop DIR" >&2; exit 2; }
		slurm_up "$2" "${3:-}" || exit 1
		echo "$slurm_ns" >"$2/ns"
		echo "slurm: up; SLURM_CONF=$2/slurm.conf${slurm_ns:+, in namespace $slurm_ns (nsenter --net=/run/netns/$slurm_ns)}"
		# The daemons are not this shell's children once it exits.
		disown -a ;;
	stop)
		[ $# -ge 2 ] || { echo "usage: $0 start DIR [NS] | stop DIR" >&2; exit 2; }
		slurm_dir=$2 slurm_ns=$(cat "$2/ns" 2>/dev/null)
		slurm_down ;;
	*) echo "usage: $0 start DIR [NS] | stop DIR" >&2; exit 2 ;;
	esac
fi
