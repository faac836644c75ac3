#!/usr/bin/env bash
# kill-restart.sh: exactly-once across processes.
#
# Runs the counter job with checkpoints every 200ms, kills it with SIGKILL at
# random moments, resumes it each time with --from latest, lets the last run
# finish, and checks the committed output: every key k has the running
# counts 1..n_k exactly once.
#
# Usage: scripts/kill-restart.sh [hashmap|pebble] [kills]
# Environment: WEIR (a built weir binary; default: go build one),
# RECORDS (600000), KEYS (1000), RATE (records/s, 100000), PARALLELISM (2),
# RESUME_PARALLELISMS (e.g. "3 1 2": each run after a kill takes the next
# parallelism of the list, cycling; default: PARALLELISM throughout),
# SINK_DELAY (--sink-delay: time the sink spends per record, e.g. 20us, so
# that the job is backpressured; default none),
# UNALIGNED=1 (unaligned checkpoints: --set execution.checkpointing.unaligned.enabled=true),
# EXTRA (more weir run flags, e.g. "--set execution.checkpointing.mode=AT_LEAST_ONCE"),
# SEED (seeds the kill times; logged, so a failing run can be repeated).
# A run that ends with an error before it is killed fails the script.
set -euo pipefail

seed=${SEED:-$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')}
RANDOM=$seed
echo "seed $seed (SEED=$seed repeats the kill times)"

backend=${1:-hashmap}
kills=${2:-4}
records=${RECORDS:-600000}
keys=${KEYS:-1000}
rate=${RATE:-100000}
parallelism=${PARALLELISM:-2}
# shellcheck disable=SC2206
resume_parallelisms=(${RESUME_PARALLELISMS:-$parallelism})
for p in "${resume_parallelisms[@]}"; do
	if ! [[ $p =~ ^[1-9][0-9]*$ ]]; then
		echo "RESUME_PARALLELISMS=\"$RESUME_PARALLELISMS\": $p is not a parallelism (a positive integer)" >&2
		exit 2
	fi
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
weir=${WEIR:-}
if [[ -z $weir ]]; then
	weir=$work/weir
	go build -o "$weir" "$(dirname "$0")/../cmd/weir"
fi

args=(run counter --records "$records" --keys "$keys" --rate "$rate"
	--output "$work/out"
	--set execution.checkpointing.interval=200ms
	--set "execution.checkpointing.dir=$work/chk"
	--set "state.backend.type=$backend"
	--set "state.backend.local-dir=$work/state")
# Unaligned runs log every completed checkpoint: the check at the end
# counts those that persisted in-flight data.
if [[ ${UNALIGNED:-} == 1 ]]; then
	args+=(--log-level info)
else
	args+=(--log-level warn)
fi
if [[ -n ${SINK_DELAY:-} ]]; then
	args+=(--sink-delay "$SINK_DELAY")
fi
if [[ ${UNALIGNED:-} == 1 ]]; then
	args+=(--set execution.checkpointing.unaligned.enabled=true)
fi
# shellcheck disable=SC2206
extra=(${EXTRA:-})

# The parallelism of run i: PARALLELISM for the first, then the next of
# RESUME_PARALLELISMS for each run after a kill.
parallelism_of() {
	if (($1 == 1)); then
		echo "$parallelism"
	else
		echo "${resume_parallelisms[($1 - 2) % ${#resume_parallelisms[@]}]}"
	fi
}

from=()
for ((i = 1; i <= kills; i++)); do
	p=$(parallelism_of "$i")
	"$weir" "${args[@]}" --parallelism "$p" "${from[@]}" "${extra[@]}" 2>>"$work/log" &
	pid=$!
	# Kill between 0.3 and 1.5 seconds in: before, during and after
	# checkpoints, uploads and commits.
	sleep "$(awk -v r=$RANDOM 'BEGIN { printf "%.2f", 0.3 + 1.2 * r / 32768 }')"
	kill -9 "$pid" 2>/dev/null || true
	rc=0
	wait "$pid" || rc=$?
	case $rc in
	137) echo "run $i (parallelism $p${from[*]:+, ${from[*]}}): killed with SIGKILL" ;;
	0) echo "run $i (parallelism $p${from[*]:+, ${from[*]}}): finished before the kill" ;;
	*)
		cat "$work/log" >&2
		echo "FAIL: run $i (parallelism $p${from[*]:+, ${from[*]}}) exited with code $rc before the kill"
		exit 1
		;;
	esac
	if compgen -G "$work/chk/counter/chk-*/_metadata" >/dev/null; then
		from=(--from latest)
	fi
done
p=$(parallelism_of $((kills + 1)))
echo "final run (parallelism $p${from[*]:+, ${from[*]}})"
if ! "$weir" "${args[@]}" --parallelism "$p" "${from[@]}" "${extra[@]}" 2>>"$work/log"; then
	cat "$work/log" >&2
	exit 1
fi

# The job lock dies with its process: no resume may have been refused for a
# killed run's lock, and the last run released it (no _lock left).
if grep -q "is in use by" "$work/log"; then
	echo "FAIL: a resumed run was refused the job lock of a killed run:"
	grep "is in use by" "$work/log"
	exit 1
fi
if [[ -e $work/chk/counter/_lock ]]; then
	echo "FAIL: the job lock file is left after the last run"
	exit 1
fi

# The killed runs' local state directories must be gone: each run deletes
# those of dead runs when it starts, and its own when it ends.
if [[ -d $work/state ]] && [[ -n $(ls -A "$work/state") ]]; then
	echo "FAIL: local state left behind: $(ls -A "$work/state")"
	exit 1
fi

# Incremental and changelog checkpoints: every file under shared/ is
# referenced by a retained checkpoint, every referenced file exists, and no
# temporary file of a killed upload is left.
if [[ -d $work/chk/counter/shared ]]; then
	referenced=$("$weir" checkpoints inspect "$work/chk/counter" --json | grep -o '"path":"shared/[^"]*"' | sed 's/"path":"//; s/"$//' | sort -u)
	present=$(cd "$work/chk/counter" && find shared -type f | sort)
	if [[ "$referenced" != "$present" ]]; then
		echo "FAIL: shared files and references differ:"
		diff <(echo "$referenced") <(echo "$present") || true
		exit 1
	fi
	echo "shared/: $(echo "$present" | grep -c .) files, all referenced"
fi

# Committed files only: in-progress and pending files are hidden (.part-*).
if [[ ${UNALIGNED:-} == 1 ]]; then
	# Unaligned checkpoints prove nothing unless some persisted in-flight data.
	persisted=$(grep -c 'persisted in-flight data' "$work/log" || true)
	if [[ $persisted -eq 0 ]]; then
		echo "FAIL: no completed checkpoint persisted in-flight data; is the sink slow enough (SINK_DELAY)?"
		exit 1
	fi
	echo "$persisted completed checkpoints persisted in-flight data"
fi

bash "$(dirname "$0")/check-counter-output.sh" "$work/out" "$records" "$keys"
