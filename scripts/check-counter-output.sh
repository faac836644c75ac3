#!/usr/bin/env bash
# check-counter-output.sh: the exactly-once check of the counter job's
# committed output, shared by the kill/restart scripts.
#
# Usage: scripts/check-counter-output.sh OUTDIR RECORDS KEYS
# Reads the committed part files of OUTDIR (in-progress and pending files
# are hidden, .part-*) and checks that every key k has the running counts
# 1..n_k exactly once and nothing else; prints OK or FAIL (exit 1).
set -euo pipefail
out=$1 records=$2 keys=$3
find "$out" -maxdepth 1 -type f -name 'part-*' -exec cat {} + |
	awk -F, -v n="$records" -v k="$keys" '
	{ seen[$1 "," $2]++; lines++ }
	END {
		missing = 0; dup = 0
		for (key = 0; key < k; key++) {
			nk = int(n / k) + (key < n % k ? 1 : 0)
			for (c = 1; c <= nk; c++) {
				if (!((key "," c) in seen)) missing++
				else if (seen[key "," c] > 1) dup++
			}
		}
		if (missing || dup || lines != n) {
			printf "FAIL: %d lines for %d records, %d counts missing, %d duplicated\n", lines, n, missing, dup
			exit 1
		}
		printf "OK: %d records, every key counted exactly once\n", n
	}'
