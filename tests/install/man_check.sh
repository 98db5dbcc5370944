#!/usr/bin/env bash
# A man page renders with man -l and groff says nothing: any warning
# (unknown macro, bad escape, a line that cannot be broken) fails. Exit 77
# (skip) without man-db or groff.
set -u
page=$1
command -v man >/dev/null || { echo "SKIP: man (man-db) not installed"; exit 77; }
command -v groff >/dev/null || { echo "SKIP: groff not installed"; exit 77; }
out=$(MANWIDTH=80 man --warnings -l -Tutf8 "$page" 2>&1 >/dev/null)
if [[ -n $out ]]; then
	echo "FAIL: $page:"
	echo "$out"
	exit 1
fi
# And it has the sections of rdma-core's pages (a command's, man1: its exit
# status where a function has its return value).
text=$(MANWIDTH=80 man -l -Tutf8 "$page" 2>/dev/null | sed "s/.\x08//g")
result="RETURN VALUE"
[[ $page == *.1 ]] && result="EXIT STATUS"
for s in NAME SYNOPSIS DESCRIPTION "$result" "SEE ALSO"; do
	grep -q "^$s" <<<"$text" || { echo "FAIL: $page has no $s section"; exit 1; }
done
echo "PASS: $page"
