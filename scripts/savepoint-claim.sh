#!/usr/bin/env bash
# savepoint-claim.sh: a NO_CLAIM restore shares nothing with its base,
# across processes and kill -9.
#
# Runs the counter job with incremental checkpoints every 100ms and kills it
# with SIGKILL at a random moment after its first checkpoint; restores its
# latest checkpoint by its chk-<n> path (the default NO_CLAIM mode) as a new
# job (pipeline.name) with a new checkpoint directory; once that run
# completed a checkpoint, deletes the first job's whole checkpoint
# directory and kills the run at a random moment; resumes the new job with
# --from latest, lets it finish, and checks the committed output: every key
# k has the running counts 1..n_k exactly once (the check of
# kill-restart.sh).
#
# Usage: scripts/savepoint-claim.sh [pebble|hashmap]
# Environment: WEIR (a built weir binary; default: go build one),
# RECORDS (300000), KEYS (1000), RATE (records/s, 100000), PARALLELISM (2),
# EXTRA (more weir run flags for every run, e.g. "--changelog"),
# SEED (seeds the kill times; logged, so a failing run can be repeated).
# A run that ends with an error before it is killed fails the script.
set -euo pipefail

seed=${SEED:-$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')}
RANDOM=$seed
echo "seed $seed (SEED=$seed repeats the kill times)"

backend=${1:-pebble}
records=${RECORDS:-300000}
keys=${KEYS:-1000}
rate=${RATE:-100000}
parallelism=${PARALLELISM:-2}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
weir=${WEIR:-}
if [[ -z $weir ]]; then
	weir=$work/weir
	go build -o "$weir" "$(dirname "$0")/../cmd/weir"
fi

# shellcheck disable=SC2206
extra=(${EXTRA:-})
args=(run counter --records "$records" --keys "$keys" --rate "$rate"
	--parallelism "$parallelism" --output "$work/out" --incremental
	--set execution.checkpointing.interval=100ms
	--set "state.backend.type=$backend"
	--set "state.backend.local-dir=$work/state"
	--log-level warn)
base=(--set "execution.checkpointing.dir=$work/chk")
restored=(--set "execution.checkpointing.dir=$work/chk2" --set pipeline.name=counter-restored)
# Run 2 retains every checkpoint it completes, so that the check after its
# kill sees every reference it made, its first checkpoint's included.
retain_all=(--set execution.checkpointing.num-retained=1000)
base_job=$work/chk/counter
new_job=$work/chk2/counter-restored

fail() {
	cat "$work/log" >&2
	echo "FAIL: $*"
	exit 1
}

# wait_checkpoint DIR PID: wait until DIR holds a complete checkpoint
# (chk-<n>/_metadata) while PID runs. Returns 1 if PID ended first.
wait_checkpoint() {
	local dir=$1 pid=$2 i
	for ((i = 0; i < 3000; i++)); do
		if compgen -G "$dir/chk-*/_metadata" >/dev/null; then
			return 0
		fi
		if ! kill -0 "$pid" 2>/dev/null; then
			return 1
		fi
		sleep 0.02
	done
	fail "no checkpoint in $dir within a minute"
}

# kill_at_random NAME PID: SIGKILL PID between 0 and 1 second from now,
# and report how it ended; an exit with an error fails the script.
kill_at_random() {
	local name=$1 pid=$2 rc=0
	sleep "$(awk -v r=$RANDOM 'BEGIN { printf "%.2f", r / 32768 }')"
	kill -9 "$pid" 2>/dev/null || true
	wait "$pid" || rc=$?
	case $rc in
	137) echo "$name: killed with SIGKILL" ;;
	0) echo "$name: finished before the kill" ;;
	*) fail "$name exited with code $rc before the kill" ;;
	esac
}

# 1. The base job, killed after a checkpoint.
"$weir" "${args[@]}" "${base[@]}" "${extra[@]}" 2>>"$work/log" &
pid=$!
wait_checkpoint "$base_job" "$pid" || true
kill_at_random "run 1 (job counter)" "$pid"
latest=$(find "$base_job" -mindepth 2 -maxdepth 2 -name _metadata -path '*/chk-*/_metadata' |
	sed 's|.*/chk-\([0-9]*\)/_metadata$|\1|' | sort -n | tail -1)
if [[ -z $latest ]]; then
	fail "job counter has no complete checkpoint to restore"
fi
from=$base_job/chk-$latest
shared_before=$(find "$base_job" -path '*/shared/*' -type f | wc -l)
echo "restoring $from (no claim; the base job has $shared_before shared files)"
if [[ $backend == pebble && $shared_before -eq 0 ]]; then
	fail "the base job has no shared files: its checkpoints are not incremental"
fi

# 2. The restored job, by the checkpoint's path, in NO_CLAIM mode: once it
# completed a checkpoint, the base is deleted under it; then it is killed.
"$weir" "${args[@]}" "${restored[@]}" "${retain_all[@]}" --from "$from" "${extra[@]}" 2>>"$work/log" &
pid=$!
if wait_checkpoint "$new_job" "$pid"; then
	if [[ ! -e $from/_metadata ]]; then
		fail "the NO_CLAIM restore deleted its base checkpoint $from"
	fi
	rm -rf "$work/chk/counter"
	echo "run 2 (job counter-restored) completed a checkpoint; deleted the checkpoint directory of job counter"
	kill_at_random "run 2 (job counter-restored)" "$pid"
else
	rc=0
	wait "$pid" || rc=$?
	fail "run 2 (job counter-restored) ended with code $rc before its first checkpoint"
fi

# Every file a checkpoint of run 2 references is in its own job directory:
# none is one of the base's (deleted by now).
refs=$("$weir" checkpoints inspect "$new_job" --json | grep -o '"path":"[^"]*/[^"]*"' | sed 's/"path":"//; s/"$//' | sort -u)
if [[ -z $refs ]]; then
	fail "run 2 left no complete checkpoint that references files"
fi
dangling=()
for p in $refs; do
	if [[ ! -f $new_job/$p ]]; then
		dangling+=("$p")
	fi
done
if ((${#dangling[@]} > 0)); then
	fail "checkpoints of run 2 reference ${#dangling[@]} files that are not in $new_job: ${dangling[*]}"
fi
echo "run 2's checkpoints reference $(echo "$refs" | grep -c .) files, all in its own directory"

# 3. The restored job resumes its own checkpoints, without the base.
echo "final run (job counter-restored, --from latest)"
if ! "$weir" "${args[@]}" "${restored[@]}" --from latest "${extra[@]}" 2>>"$work/log"; then
	fail "the final run failed"
fi
if [[ -e $work/chk/counter ]]; then
	fail "the checkpoint directory of job counter is back: $(find "$work/chk/counter" | head)"
fi

# Every file under shared/ is referenced by a retained checkpoint and every
# referenced file exists.
if [[ -d $new_job/shared ]]; then
	referenced=$("$weir" checkpoints inspect "$new_job" --json | grep -o '"path":"shared/[^"]*"' | sed 's/"path":"//; s/"$//' | sort -u)
	present=$(cd "$new_job" && find shared -type f | sort)
	if [[ "$referenced" != "$present" ]]; then
		echo "FAIL: shared files and references differ:"
		diff <(echo "$referenced") <(echo "$present") || true
		exit 1
	fi
	echo "shared/: $(echo "$present" | grep -c .) files, all referenced"
fi

# Committed files only: in-progress and pending files are hidden (.part-*).
bash "$(dirname "$0")/check-counter-output.sh" "$work/out" "$records" "$keys"
