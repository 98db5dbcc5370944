#!/usr/bin/env bash
# Every header in the folders that make up librdgram is either installed
# (a folder's `headers`) or named internal (`internal_headers`): a header
# added to a folder and to neither list fails here, before an installed
# header includes it and the installed tree breaks.
# usage: headers_listed.sh DIR... -- INSTALLED... -- INTERNAL...
set -u
dirs=() listed=()
while (($# > 0)) && [[ $1 != -- ]]; do dirs+=("$1"); shift; done
shift
while (($# > 0)); do
	[[ $1 == -- ]] || listed+=("$(realpath "$1")")
	shift
done
fail=0
for d in "${dirs[@]}"; do
	for h in "$d"/*.h; do
		[[ -e $h ]] || continue
		h=$(realpath "$h")
		found=0
		for l in "${listed[@]}"; do
			[[ $l == "$h" ]] && { found=1; break; }
		done
		((found)) || { echo "FAIL: $h is in neither the installed nor the internal headers of its meson.build"; fail=1; }
	done
done
((fail == 0)) && echo "PASS: ${#listed[@]} headers listed, each header of ${dirs[*]} among them"
exit $fail
