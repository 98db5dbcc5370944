#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Runs one libFuzzer target for a bounded time on a copy of its checked-in
# corpus (the source tree is never written). Exit status: 0 when the time
# ran out without a finding; non-zero on a crash, leak, timeout, OOM or
# invariant failure, with the report and the reproducer's path printed.
#
# usage: run_fuzzer.sh <fuzzer> <name> <seed corpus dir> <dict or ""> <artifact dir> [libFuzzer options...]
# environment:
#   RDGRAM_FUZZ_SECONDS     run time (default 10)
#   RDGRAM_FUZZ_CORPUS_DIR  keep a growing corpus in <dir>/<name> across runs
#                           (default: a temporary copy, removed afterwards)
#   RDGRAM_FUZZ_RSS_MB      libFuzzer -rss_limit_mb (default 2048)
set -uo pipefail

(($# >= 5)) || {
	echo "usage: $0 <fuzzer> <name> <seed corpus dir> <dict or \"\"> <artifact dir> [libFuzzer options...]" >&2
	exit 2
}
exe=$1 name=$2 seeds=$3 dict=$4 art=$5
shift 5
secs=${RDGRAM_FUZZ_SECONDS:-10}
[[ $secs =~ ^[0-9]+$ ]] || {
	echo "RDGRAM_FUZZ_SECONDS must be a number of seconds, got '$secs'" >&2
	exit 2
}

mkdir -p "$art"
if [[ -n ${RDGRAM_FUZZ_CORPUS_DIR:-} ]]; then
	work=$RDGRAM_FUZZ_CORPUS_DIR/$name
	mkdir -p "$work"
else
	work=$(mktemp -d "${TMPDIR:-/tmp}/rdgram-fuzz-$name.XXXXXX")
	trap 'rm -rf "$work"' EXIT
fi
# The copy: libFuzzer writes new inputs into its first corpus directory.
if [[ -d $seeds ]]; then
	find "$seeds" -maxdepth 1 -type f -exec cp -n -t "$work" {} +
fi
nseeds=$(find "$work" -maxdepth 1 -type f | wc -l)

opts=(-max_total_time="$secs" -rss_limit_mb="${RDGRAM_FUZZ_RSS_MB:-2048}" -timeout=10
	-print_final_stats=1 -artifact_prefix="$art/$name-")
[[ -n $dict && -f $dict ]] && opts+=(-dict="$dict")

log=$art/$name.log
echo "fuzz $name: $secs s on $nseeds inputs ($work), log $log"
# A hard stop well after max_total_time, in case the fuzzer wedges.
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0} \
	UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1} \
	timeout -k 10 $((secs + 120)) "$exe" "${opts[@]}" "$@" "$work" >"$log" 2>&1
rc=$?

# One line of figures: executions, coverage (edges) and features.
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
last=$(grep -E '^#[0-9]+' "$log" | tail -1)
cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9]*[a-zA-Z]*\).*/\1/p' <<<"$last")
echo "fuzz $name: rc=$rc execs=${execs:-?} cov=${cov:-?} ft=${ft:-?} corpus=${corp:-?} seconds=$secs"

if ((rc != 0)); then
	echo "fuzz $name: FAILED (exit $rc); the end of $log:"
	tail -n 60 "$log"
	ls -1 "$art/$name-"* 2>/dev/null | sed 's/^/reproducer: /'
	echo "reproduce: $exe <reproducer>"
	exit 1
fi
exit 0
