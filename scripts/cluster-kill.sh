#!/usr/bin/env bash
# cluster-kill.sh: exactly-once across task-manager crashes in cluster mode.
#
# Runs the counter job with `weir cluster local` (a job manager and
# TASKMANAGERS task-manager processes of SLOTS slots), kills a random
# task-manager process with SIGKILL at random moments, KILLS times; the local
# cluster starts a replacement each time and the job restarts from its latest
# checkpoint. Then it checks the committed output: every key k has the running
# counts 1..n_k exactly once.
#
# Usage: scripts/cluster-kill.sh [hashmap|pebble] [kills]
# Environment: WEIR (a built weir binary; default: go build one),
# RECORDS (300000), KEYS (1000), RATE (records/s, 40000), TASKMANAGERS (3),
# SLOTS (2), PARALLELISM (6), CHK_DIR (the checkpoint directory or URL,
# e.g. s3://bucket/prefix?endpoint=...; default a local directory),
# EXTRA (more flags, e.g. --incremental), SEED (seeds the kill times and
# victims; logged, so a failing run can be repeated).
#
# The cluster has a token (security.cluster.token): the task managers must
# prove it to register, and `weir cluster local` must hand it to them
# outside their command lines (checked with the process list).
set -euo pipefail

seed=${SEED:-$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')}
RANDOM=$seed
echo "seed $seed (SEED=$seed repeats the kill times and victims)"

backend=${1:-hashmap}
kills=${2:-3}
records=${RECORDS:-300000}
keys=${KEYS:-1000}
rate=${RATE:-40000}
tms=${TASKMANAGERS:-3}
slots=${SLOTS:-2}
parallelism=${PARALLELISM:-6}

work=$(mktemp -d)
jm=
cleanup() {
	if [[ -n $jm ]] && kill -0 "$jm" 2>/dev/null; then
		kill -9 "$jm" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT
weir=${WEIR:-}
if [[ -z $weir ]]; then
	weir=$work/weir
	go build -o "$weir" "$(dirname "$0")/../cmd/weir"
fi
chk=${CHK_DIR:-$work/chk}
# shellcheck disable=SC2206
extra=(${EXTRA:-})
token=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')

"$weir" cluster local counter --taskmanagers "$tms" --slots "$slots" -p "$parallelism" \
	--records "$records" --keys "$keys" --rate "$rate" --output "$work/out" \
	--set execution.checkpointing.interval=200ms \
	--set "execution.checkpointing.dir=$chk" \
	--set "state.backend.type=$backend" \
	--set "state.backend.local-dir=$work/state" \
	--set restart-strategy.type=fixed-delay \
	--set restart-strategy.fixed-delay.attempts=100 \
	--set restart-strategy.fixed-delay.delay=200ms \
	--set rest.port=0 \
	--set "security.cluster.token=$token" \
	--log-level info "${extra[@]}" >"$work/log" 2>&1 &
jm=$!

# The task managers are the job manager's child processes.
task_managers() { pgrep -P "$jm" -f ' taskmanager ' || true; }

for ((i = 1; i <= kills; i++)); do
	# 0.5 to 2.5 s between kills.
	sleep "$((RANDOM % 3)).$((RANDOM % 10))5"
	if ! kill -0 "$jm" 2>/dev/null; then
		echo "the job ended before kill $i; raise RECORDS or lower RATE" >&2
		tail -20 "$work/log" >&2
		exit 1
	fi
	mapfile -t pids < <(task_managers)
	if ((${#pids[@]} == 0)); then
		echo "kill $i: no task manager running" >&2
		exit 1
	fi
	for p in "${pids[@]}"; do
		if tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q "$token"; then
			echo "FAIL: the cluster token is on task manager $p's command line" >&2
			exit 1
		fi
	done
	victim=${pids[RANDOM % ${#pids[@]}]}
	echo "kill $i: SIGKILL task manager pid $victim (of ${#pids[@]})"
	kill -9 "$victim" 2>/dev/null || true
done

rc=0
wait "$jm" || rc=$?
jm=
if ((rc != 0)); then
	echo "the job failed (exit $rc):" >&2
	grep -v '^\[taskmanager' "$work/log" | tail -30 >&2
	exit 1
fi
replaced=$(grep -c 'task manager exited; starting a replacement' "$work/log" || true)
attempts=$(grep -c 'msg="deploying the job"' "$work/log" || true)
echo "task managers replaced: $replaced, attempts deployed: $attempts"
if ((replaced < kills)); then
	echo "FAIL: $kills task managers killed, $replaced replaced" >&2
	exit 1
fi
if ((attempts < 2)); then
	echo "FAIL: the kills failed no attempt ($attempts deployed)" >&2
	exit 1
fi
"$(dirname "$0")/check-counter-output.sh" "$work/out" "$records" "$keys"
