#!/usr/bin/env bash
# regress-submit.sh - `logdiff regress` over a Slurm cluster: submits regress-journal.sbatch as a
# job array of LOGDIFF_TASKS tasks (each share's conversation journal), regress-shard.sbatch as a
# second array after it (each share judged from the journals of the shares before it), then
# regress-merge.sbatch to run after every task has ended.  Each step depends on the one before
# with --dependency=afterany: it also runs when a task failed, and then names what is missing.
# LOGDIFF_ONE_PASS=1 leaves out the journals (a router that keeps each conversation on one
# server, whose archives go to one share, needs none; the merge notes any conversation that
# crossed shares).
#
#   LOGDIFF_OUT=/shared/run LOGDIFF_BASELINE=/shared/baseline.json \
#       docs/cluster/regress-submit.sh [JUDGING OPTIONS] INPUT...
#
# JUDGING OPTIONS are regress's (--template SRC, --model DIR, --no-conversations, --capture NAME,
# ...), given to every task.  Environment:
#   LOGDIFF_OUT       folder for the partials, the reports and the jobs' output; every node must
#                     see it at the same path (made if missing; it must hold no partial yet)
#   LOGDIFF_BASELINE  the baseline file (LOGDIFF_UPDATE_BASELINE=1: the merge writes it)
#   LOGDIFF_TASKS     number of array tasks (default 4)
#   LOGDIFF_CPUS      CPUs per array task (default 1), each task's regress reading with as many
#                     threads
#   LOGDIFF           the logdiff binary (default: logdiff on PATH), as the nodes see it
#   LOGDIFF_ONE_PASS  1: no journal array (see above)
#   SBATCH_PARTITION, SBATCH_ACCOUNT, SBATCH_TIMELIMIT, ...: read by sbatch itself
# Prints journal_job=ID (unless LOGDIFF_ONE_PASS=1), array_job=ID and merge_job=ID.  The jobs'
# environment is this one (--export=ALL).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
usage() { echo "usage: LOGDIFF_OUT=DIR LOGDIFF_BASELINE=FILE $0 [JUDGING OPTIONS] INPUT..." >&2; exit 2; }
[ $# -gt 0 ] || usage
[ -n "${LOGDIFF_OUT:-}" ] && [ -n "${LOGDIFF_BASELINE:-}" ] || usage
tasks=${LOGDIFF_TASKS:-4}
cpus=${LOGDIFF_CPUS:-1}
for n in "$tasks" "$cpus"; do
    case $n in '' | *[!0-9]* | 0*) echo "$0: LOGDIFF_TASKS and LOGDIFF_CPUS must be positive numbers, not '$n'" >&2; exit 2 ;; esac
done

# absolute paths, whatever folder the jobs run in
mkdir -p "$LOGDIFF_OUT"
LOGDIFF_OUT=$(cd "$LOGDIFF_OUT" && pwd)
case $LOGDIFF_BASELINE in /*) ;; *) LOGDIFF_BASELINE=$PWD/$LOGDIFF_BASELINE ;; esac
LOGDIFF=${LOGDIFF:-$(command -v logdiff || echo logdiff)}
case $LOGDIFF in */*) LOGDIFF=$(cd "$(dirname "$LOGDIFF")" && pwd)/$(basename "$LOGDIFF") ;; esac
export LOGDIFF LOGDIFF_OUT LOGDIFF_BASELINE

# the merge takes every partial-*.json of the folder, the shards every journal of journals/: one
# left from another run would be taken
shopt -s nullglob
old=("$LOGDIFF_OUT"/partial-*.json "$LOGDIFF_OUT"/journal[s])
if [ ${#old[@]} -gt 0 ]; then
    echo "$0: $LOGDIFF_OUT already holds partials or journals (${old[0]}, ...): use a new folder" >&2
    exit 2
fi

after=()
if [ "${LOGDIFF_ONE_PASS:-0}" != 1 ]; then
    mkdir "$LOGDIFF_OUT/journals"
    journal=$(sbatch --parsable --export=ALL --array="0-$((tasks - 1))" --cpus-per-task="$cpus" \
        --output="$LOGDIFF_OUT/journal-%A_%a.out" "$here/regress-journal.sbatch" "$@")
    journal=${journal%%;*}   # "ID;cluster" on a federation
    after=(--dependency="afterany:$journal")
    echo "journal_job=$journal"
fi
array=$(sbatch --parsable --export=ALL --array="0-$((tasks - 1))" --cpus-per-task="$cpus" "${after[@]}" \
    --output="$LOGDIFF_OUT/shard-%A_%a.out" "$here/regress-shard.sbatch" "$@")
array=${array%%;*}
merge=$(sbatch --parsable --export=ALL --dependency="afterany:$array" \
    --output="$LOGDIFF_OUT/merge-%j.out" "$here/regress-merge.sbatch")
merge=${merge%%;*}
echo "array_job=$array"
echo "merge_job=$merge"
