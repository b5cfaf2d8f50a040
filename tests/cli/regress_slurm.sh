#!/usr/bin/env bash
# logdiff regress sharded over a real Slurm cluster (issue 33): a single-node cluster started by
# the test (tests/support/slurm_cluster.bash), docs/cluster/regress-submit.sh run as a user would:
# a job array of 4 tasks writing each share's conversation journal, an array of 4 `regress
# --shard auto` tasks from those journals over the CI story's archives and a conversation split
# between two shares, then the merge job (each step afterany).  The merged text, --json, --junit
# and --html reports are the bytes of one `logdiff regress` over the same inputs, its exit
# status too (the split conversation's stale assistant turn found as one process finds it).  Then a task is killed while it
# runs: the merge job still runs, fails (exit 2) and names the missing share.  Skips (77), saying
# why, where the cluster cannot start.
. "$(dirname "$0")/../support/slurm_cluster.bash"
slurm_own_network "$0" "$@"   # the cluster on a loopback of its own
. "$(dirname "$0")/lib.bash"
. "$(dirname "$0")/regress_lib.bash"
RECIPE=$LD_SOURCE_DIR/docs/cluster
TASKS=4
KILLED=2   # the task killed in the second run: its share is I/N = $KILLED/$TASKS

slurm_cluster_start
echo "cluster: $(sinfo -h -N -o '%N %t %c CPUs %m MB') (in $SLURM_DIR${_SLURM_OWN_NETWORK:+, a network namespace with loopback alone})"

make_archives "$WORK"
B="$WORK/baseline.json"
# the inputs of regress.sh's --jobs check: archives of every kind, a directory, a plain log; and
# the demo's interrupted conversation (its rids renamed) cut in two: its first turn the last
# input of share 2, the turn that sends the interrupted answer back the first of share 3
sed 's/demo-/split-/g' "$DEMO/server-0.log" | head -n 9 >"$WORK/turn-1.log"
sed 's/demo-/split-/g' "$DEMO/server-0.log" | tail -n +10 >"$WORK/turn-2.log"
INPUTS=("$WORK/server-0.tar.xz" "$WORK/after.zip" "$WORK/before.tar.gz" "$DEMO" "$LD_SOURCE_DIR/testdata/replay/rerender/server.log" "$WORK/turn-1.log" "$WORK/turn-2.log" "$WORK/server-1-after.tar")

# one process: the baseline, then the reports the merge must reproduce
run "one process: baseline of the before archive" 0 "$LOGDIFF" regress --baseline "$B" --update-baseline "$WORK/before.tar.gz"
"$LOGDIFF" regress --baseline "$B" --junit "$WORK/one.xml" --html "$WORK/one.html" "${INPUTS[@]}" >"$WORK/one.txt" 2>/dev/null
one_rc=$?
check "one process: the lost tool result regressed (exit 1)" [ "$one_rc" -eq 1 ]
"$LOGDIFF" regress --baseline "$B" --json "${INPUTS[@]}" >"$WORK/one.jsonl" 2>/dev/null
check "one process: the split conversation's stale assistant turn" grep -q '"rid":"split-empty-assistant-2".*harness.stale_assistant' "$WORK/one.jsonl"

# the batch scripts' #SBATCH lines as this cluster's sbatch reads them
run "sbatch --test-only regress-shard.sbatch" 0 sbatch --test-only --array=0-$((TASKS - 1)) "$RECIPE/regress-shard.sbatch"
check "sbatch --test-only regress-shard.sbatch: it would start" grep -q 'to start at' "$WORK/err"
run "sbatch --test-only regress-journal.sbatch" 0 sbatch --test-only --array=0-$((TASKS - 1)) "$RECIPE/regress-journal.sbatch"
check "sbatch --test-only regress-journal.sbatch: it would start" grep -q 'to start at' "$WORK/err"
run "sbatch --test-only regress-merge.sbatch" 0 sbatch --test-only "$RECIPE/regress-merge.sbatch"
check "sbatch --test-only regress-merge.sbatch: it would start" grep -q 'to start at' "$WORK/err"

# submit RUN [LOGDIFF]: the recipe's submit script into $WORK/RUN; sets journal_job, array_job and
# merge_job
submit() {
    local out=$WORK/$1 bin=${2:-$LOGDIFF} ids
    ids=$(cd "$WORK" && LOGDIFF=$bin LOGDIFF_OUT=$out LOGDIFF_BASELINE=$B LOGDIFF_TASKS=$TASKS \
        "$RECIPE/regress-submit.sh" "${INPUTS[@]}" 2>"$WORK/submit.err")
    journal_job=$(printf '%s\n' "$ids" | sed -n 's/^journal_job=\([0-9]*\)$/\1/p')
    array_job=$(printf '%s\n' "$ids" | sed -n 's/^array_job=\([0-9]*\)$/\1/p')
    merge_job=$(printf '%s\n' "$ids" | sed -n 's/^merge_job=\([0-9]*\)$/\1/p')
    if [ -n "$journal_job" ] && [ -n "$array_job" ] && [ -n "$merge_job" ]; then
        ok "$1: submitted journals $journal_job, array $array_job, merge $merge_job"
    else not_ok "$1: submit" "printed: $ids" "stderr: $(cat "$WORK/submit.err")"; return 1; fi
}

# task_states ARRAY: "task state exit" a line, by task
task_states() {
    scontrol show job -o "$1" 2>/dev/null | awk '{
        for (i = 1; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = substr($i, length(kv[1]) + 2) }
        print f["ArrayTaskId"], f["JobState"], f["ExitCode"] }' | sort -n
}

# --- the whole array: the merge is the one-process run
t0=$SECONDS
if submit run; then
    why=$(slurm_wait_gone "$journal_job" "$array_job" "$merge_job" --timeout 120) || not_ok "run: the jobs did not end" "$why"
    want=$(for i in $(seq 0 $((TASKS - 1))); do echo "$i COMPLETED 0:0"; done)
    check "run: every journal task completed with exit 0" [ "$(task_states "$journal_job")" = "$want" ]
    check "run: each wrote its journal" [ "$(ls "$WORK"/run/journals/journal-*.jsonl | wc -l)" = "$TASKS" ]
    got=$(task_states "$array_job")
    check "run: every array task completed with exit 0" [ "$got" = "$want" ]
    [ "$got" = "$want" ] || { echo "     got: $got"; tail -n 5 "$WORK"/run/shard-*.out; }
    for i in $(seq 0 $((TASKS - 1))); do
        check "run: task $i wrote partial-$i.json" [ -s "$WORK/run/partial-$i.json" ]
    done
    check "run: the merge job exited as the one process did ($one_rc)" [ "$(slurm_job_field "$merge_job" ExitCode)" = "$one_rc:0" ]
    check "run: text report, byte for byte" cmp "$WORK/one.txt" "$WORK/run/report.txt"
    check "run: --json, byte for byte" cmp "$WORK/one.jsonl" "$WORK/run/report.jsonl"
    check "run: --junit, byte for byte" cmp "$WORK/one.xml" "$WORK/run/junit.xml"
    check "run: --html, byte for byte" cmp "$WORK/one.html" "$WORK/run/report.html"
    # the job's output: the text report and, from stderr, the merge's notes
    grep -v '^logdiff regress: note: ' "$WORK/run/merge-$merge_job.out" >"$WORK/merge-out.txt"
    check "run: the merge job's output is the text report (and notes)" cmp "$WORK/one.txt" "$WORK/merge-out.txt"
    check "run: the reports name the regressed request" grep -q '^REGRESSED *demo-tool-result-lost' "$WORK/run/report.txt"
    check "run: the stale assistant turn across shares found" grep -q '"rid":"split-empty-assistant-2".*harness.stale_assistant' "$WORK/run/report.jsonl"
    # the merge script's other mode, run on these partials outside Slurm: the baseline itself
    "$LOGDIFF" regress --baseline "$WORK/one-all.json" --update-baseline "${INPUTS[@]}" >/dev/null 2>&1
    run "run: regress-merge.sbatch with LOGDIFF_UPDATE_BASELINE=1" 0 env LOGDIFF_OUT="$WORK/run" \
        LOGDIFF_BASELINE="$WORK/merged-all.json" LOGDIFF_UPDATE_BASELINE=1 bash "$RECIPE/regress-merge.sbatch"
    check "run: the baseline from the partials, byte for byte" cmp "$WORK/one-all.json" "$WORK/merged-all.json"
fi
echo "first run: $((SECONDS - t0))s"

# --- task $KILLED killed while it runs: the merge runs all the same (afterany), exits 2 naming
# the missing share.  Its logdiff is a wrapper that, in that task of the judging array alone,
# writes its process id (the task's batch script, exec'd into it) and waits; that process is then killed with SIGKILL,
# as the OOM killer would end it.
cat >"$WORK/logdiff-wait" <<EOF
#!/bin/bash
case " \$* " in *" --partial "*) judging=1 ;; *) judging=0 ;; esac   # not the journal pass
if [ "\${SLURM_ARRAY_TASK_ID:-}" = $KILLED ] && [ \$judging = 1 ]; then
    echo \$\$ >"$WORK/task-$KILLED.pid.tmp" && mv "$WORK/task-$KILLED.pid.tmp" "$WORK/task-$KILLED.pid"
    exec sleep 300
fi
exec "$LOGDIFF" "\$@"
EOF
chmod +x "$WORK/logdiff-wait"
t0=$SECONDS
if submit killed "$WORK/logdiff-wait"; then
    if slurm_wait_file "$WORK/task-$KILLED.pid" 60; then
        ok "killed: task $KILLED is running"
        run "killed: kill -KILL task $KILLED's process" 0 kill -KILL "$(cat "$WORK/task-$KILLED.pid")"
    else
        not_ok "killed: task $KILLED did not start in 60s" "$(squeue)"
    fi
    why=$(slurm_wait_gone "$journal_job" "$array_job" "$merge_job" --timeout 120) || not_ok "killed: the jobs did not end" "$why"
    got=$(task_states "$array_job")
    check "killed: the other tasks completed" \
        [ "$(printf '%s\n' "$got" | grep -v "^$KILLED ")" = "$(for i in $(seq 0 $((TASKS - 1))); do [ "$i" = $KILLED ] || echo "$i COMPLETED 0:0"; done)" ]
    check "killed: task $KILLED failed, by signal 9" [ "$(printf '%s\n' "$got" | grep "^$KILLED ")" = "$KILLED FAILED 0:9" ]
    check "killed: no partial-$KILLED.json" [ ! -e "$WORK/killed/partial-$KILLED.json" ]
    check "killed: the merge job ran and failed" [ "$(slurm_job_field "$merge_job" JobState)" = FAILED ]
    check "killed: the merge job exited 2" [ "$(slurm_job_field "$merge_job" ExitCode)" = "2:0" ]
    check "killed: the merge names the missing share $KILLED/$TASKS" grep -q "share $KILLED/$TASKS" "$WORK/killed/merge-$merge_job.out"
    grep -q "share $KILLED/$TASKS" "$WORK/killed/merge-$merge_job.out" || sed 's/^/     /' "$WORK/killed/merge-$merge_job.out"
fi
echo "second run: $((SECONDS - t0))s"
[ "$failed" -eq 0 ] || slurm_logs_tail
finish
