#!/usr/bin/env bash
# checkpoint-stats.sh: run the counter job with checkpoints and summarise
# the completion lines: checkpoint duration p50/p99/max and the largest
# synchronous phase per checkpoint, p50/p99/max.
#
# Usage: scripts/checkpoint-stats.sh BACKEND KEYS RECORDS RATE INTERVAL [weir run flags...]
#   e.g. scripts/checkpoint-stats.sh hashmap 1000 6000000 500000 100ms
#        scripts/checkpoint-stats.sh pebble 1000000 6000000 150000 1s --incremental
# Environment: WEIR (a built weir binary; default: go build one), PARALLELISM (2).
set -euo pipefail
backend=$1 keys=$2 records=$3 rate=$4 interval=$5
shift 5
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
weir=${WEIR:-}
if [[ -z $weir ]]; then
	weir=$work/weir
	go build -o "$weir" "$(dirname "$0")/../cmd/weir"
fi
"$weir" run counter --records "$records" --keys "$keys" --rate "$rate" --parallelism "${PARALLELISM:-2}" \
	--output "$work/out" --set "execution.checkpointing.interval=$interval" \
	--set "execution.checkpointing.dir=$work/chk" --set "state.backend.type=$backend" \
	--set "state.backend.local-dir=$work/state" "$@" 2>&1 | grep "Completed checkpoint" >"$work/log" || true
to_ms() { awk '{ v = $1; if (v ~ /µs$/) { sub(/µs/, "", v); v = v / 1000 } else if (v ~ /ms$/) { sub(/ms/, "", v) } else if (v ~ /s$/) { sub(/s/, "", v); v = v * 1000 } print v }'; }
pct() { awk -v p="$2" '{ a[NR] = $1 } END { if (NR == 0) { print "-"; exit } i = int(NR * p + 0.999); if (i < 1) i = 1; print a[i] }' <<<"$1"; }
dur=$(grep -o 'checkpointDuration=[0-9]*' "$work/log" | cut -d= -f2 | sort -n)
sync=$(grep -o 'max sync [0-9.µms]*' "$work/log" | awk '{ print $3 }' | to_ms | sort -n)
size=$(grep -o 'full size [0-9.]* [KMG]*i*B' "$work/log" | tail -1 | cut -d' ' -f3-)
echo "$backend keys=$keys checkpoints=$(grep -c . <<<"$dur") full-size=$size" \
	"duration p50=$(pct "$dur" 0.5)ms p99=$(pct "$dur" 0.99)ms max=$(pct "$dur" 1)ms" \
	"| sync p50=$(pct "$sync" 0.5)ms p99=$(pct "$sync" 0.99)ms max=$(pct "$sync" 1)ms"
