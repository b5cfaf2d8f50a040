#!/usr/bin/env bash
# slurm_scripts.sh - docs/cluster/'s Slurm recipe without a cluster: regress-submit.sh and the
# three batch scripts parse (bash -n); every #SBATCH line stands before the first command (sbatch
# ignores the later ones) and names an option sbatch has (its --help, read with a throwaway
# slurm.conf); the scripts run what the recipe says (regress --shard auto with the task's
# partial, from the journals of the first array, regress --merge over the folder's partials, each
# step after the one before with afterany).
# Then the same checks must fail on copies each broken in one way.  tests/cli/regress_slurm.sh
# runs the recipe on a real cluster.  Skips (77) without sbatch, after the checks that need none.
set -u
src=${LD_SOURCE_DIR:-$(dirname "$0")/../../..}
docs=$src/docs/cluster
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
SCRIPTS="regress-submit.sh regress-journal.sbatch regress-shard.sbatch regress-merge.sbatch"

# sbatch_options: sbatch's long and short option names, one a line (empty without sbatch)
sbatch_options() {
    command -v sbatch >/dev/null 2>&1 || return 0
    printf 'ClusterName=check\nSlurmctldHost=localhost\nNodeName=n CPUs=1\nPartitionName=p Nodes=n\n' >"$tmp/slurm.conf"
    SLURM_CONF=$tmp/slurm.conf sbatch --help 2>/dev/null | grep -oE '(^|[ ,])--?[A-Za-z][A-Za-z-]*' | sed 's/^[ ,]*//' | sort -u
}
OPTIONS=$(sbatch_options)

# sbatch_lines FILE: problems with FILE's #SBATCH lines, one a line
sbatch_lines() {
    local f=$1 n=0 body=0 line opt
    while IFS= read -r line || [ -n "$line" ]; do
        n=$((n + 1))
        case $line in
        '#SBATCH'*)
            [ $body = 1 ] && echo "$(basename "$f"):$n: #SBATCH after the first command: sbatch ignores it"
            opt=${line#\#SBATCH}; opt=${opt# }; opt=${opt%%=*}; opt=${opt%% *}
            case $opt in -*) ;; *) echo "$(basename "$f"):$n: not an option: $line"; continue ;; esac
            if [ -n "$OPTIONS" ] && ! printf '%s\n' "$OPTIONS" | grep -qxF -- "$opt"; then
                echo "$(basename "$f"):$n: sbatch has no option $opt"
            fi ;;
        '#'* | '') ;;
        *) body=1 ;;
        esac
    done <"$f"
}

# needs FILE TEXT WHY: TEXT (fixed) must be in FILE
needs() { grep -qF -- "$2" "$1" || echo "$(basename "$1"): lacks $2 ($3)"; }

# problems DIR: every problem of the recipe in DIR, one a line
problems() {
    local d=$1 f
    for f in $SCRIPTS; do
        [ -f "$d/$f" ] || { echo "$f: missing"; continue; }
        bash -n "$d/$f" 2>&1 | sed "s|^|$f: bash -n: |"
    done
    for f in "$d"/*.sbatch; do
        sbatch_lines "$f"
        head -n 1 "$f" | grep -q '^#!/bin/bash' || echo "$(basename "$f"): no #!/bin/bash first line"
    done
    needs "$d/regress-shard.sbatch" 'regress --shard auto' "I and N from the job array"
    needs "$d/regress-shard.sbatch" '--partial "$LOGDIFF_OUT/partial-$SLURM_ARRAY_TASK_ID.json"' "a partial per task"
    needs "$d/regress-journal.sbatch" '--conv-journal "$LOGDIFF_OUT/journals/journal-$SLURM_ARRAY_TASK_ID.jsonl"' "a journal per task"
    needs "$d/regress-shard.sbatch" '(--conv-from "$LOGDIFF_OUT/journals")' "each task from the journals"
    needs "$d/regress-submit.sh" '"$here/regress-journal.sbatch" "$@"' "the first array writes the journals"
    needs "$d/regress-submit.sh" 'after=(--dependency="afterany:$journal")' "the shards run when a journal task failed"
    needs "$d/regress-merge.sbatch" 'regress --merge --baseline "$LOGDIFF_BASELINE"' "the merge"
    needs "$d/regress-merge.sbatch" '"$LOGDIFF_OUT"/partial-*.json' "every task's partial"
    needs "$d/regress-submit.sh" '--array="0-$((tasks - 1))"' "the array of LOGDIFF_TASKS tasks"
    needs "$d/regress-submit.sh" '--dependency="afterany:$array"' "the merge runs when a task failed"
    needs "$d/regress-submit.sh" '"$here/regress-shard.sbatch" "$@"' "the array runs the shard script"
    needs "$d/regress-submit.sh" '"$here/regress-merge.sbatch"' "the merge runs the merge script"
}

report() { # report NAME PROBLEMS-TEXT WANT(pass|fail)
    if { [ -z "$2" ] && [ "$3" = pass ]; } || { [ -n "$2" ] && [ "$3" = fail ]; }; then
        passed=$((passed + 1)); echo "ok   $1${2:+ ($(printf '%s' "$2" | head -n 1))}"
    else
        failed=$((failed + 1)); echo "FAIL $1"; [ -n "$2" ] && printf '     %s\n' "$2"
    fi
}

report "docs/cluster's Slurm scripts" "$(problems "$docs")" pass

# broken copies: FILE|TEXT|REPLACEMENT|WHAT[|sbatch] (no | in the texts; \n in REPLACEMENT a
# newline; sbatch: a case only sbatch's option list catches)
while IFS='|' read -r file old new what needs_sbatch; do
    [ -n "$file" ] || continue
    [ -n "$needs_sbatch" ] && [ -z "$OPTIONS" ] && continue
    rm -rf "$tmp/copy"; mkdir "$tmp/copy"
    for f in $SCRIPTS; do cp "$docs/$f" "$tmp/copy/"; done
    if ! grep -qF -- "$old" "$tmp/copy/$file"; then
        report "broken copy '$what': $file no longer has $old" "" fail; continue
    fi
    python3 -c 'import sys; p, a, b = sys.argv[1:]; t = open(p).read(); open(p, "w").write(t.replace(a, b.replace("\\n", "\n"), 1))' \
        "$tmp/copy/$file" "$old" "$new"
    report "broken copy fails: $what" "$(problems "$tmp/copy")" fail
done <<'EOF'
regress-submit.sh|-gt 0 ]; then|-gt 0 ]; than|a syntax error
regress-shard.sbatch|--cpus-per-task=1|--cpus-per-tsk=1|a misspelt option|sbatch
regress-merge.sbatch|#SBATCH --time=00:30:00|#SBATCH time=00:30:00|an #SBATCH line without an option
regress-merge.sbatch|set -uo pipefail|set -uo pipefail\n#SBATCH --mem=1G|an #SBATCH line after a command
regress-submit.sh|--dependency="afterany:$array"|--dependency="afterok:$array"|the merge skipped when a task failed
regress-shard.sbatch|partial-$SLURM_ARRAY_TASK_ID.json" "$@"|partial.json" "$@"|every task writing one partial
regress-submit.sh|after=(--dependency="afterany:$journal")|after=(--dependency="afterok:$journal")|the shards skipped when a journal task failed
regress-shard.sbatch|(--conv-from "$LOGDIFF_OUT/journals")|()|the shards not starting from the journals
regress-journal.sbatch|#SBATCH --ntasks=1|#SBATCH --ntask=1|a misspelt option in the journal script|sbatch
EOF

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] || exit 1
if [ -z "$OPTIONS" ]; then
    echo "skipped: the #SBATCH option names were not checked: sbatch not found (Debian: apt-get install slurm-client)"
    exit 77
fi
