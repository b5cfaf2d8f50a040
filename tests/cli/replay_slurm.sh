#!/usr/bin/env bash
# logdiff replay --tp N with its ranks started by a real srun (issue 33): on a single-node Slurm
# cluster started by the test (tests/support/slurm_cluster.bash), `srun -n 2 logdiff replay
# --tp 2` with nothing else: each task takes its rank from SLURM_PROCID and the tasks meet at a
# rendezvous named after the job and step in the submit directory.  Rank 0's report is the
# one-process report; a step whose task count is not --tp's is refused.  Skips (77), saying why,
# where the cluster cannot start.
. "$(dirname "$0")/../support/slurm_cluster.bash"
slurm_own_network "$0" "$@"   # the cluster on a loopback of its own
. "$(dirname "$0")/lib.bash"
RL="$LD_SOURCE_DIR/testdata/replay/replaylog/server.log"
MD="$LD_SOURCE_DIR/testdata/models"

slurm_cluster_start
echo "cluster: $(sinfo -h -N -o '%N %t %c CPUs %m MB')"
cd "$WORK" || exit 1
run "one process, --tp 2" 0 "$LOGDIFF" replay --model "$MD/qwen3" --rid rp-greedy --threads 1 --json --tp 2 "$RL"
cp "$WORK/out" "$WORK/one.json"

run "srun -n 2 logdiff replay --tp 2" 0 srun -N 1 -n 2 --overcommit --time=2 "$LOGDIFF" replay --model "$MD/qwen3" \
    --rid rp-greedy --threads 1 --json --tp 2 "$RL"
check "  rank 0's report is the one-process report (rank 1 prints nothing)" cmp -s "$WORK/out" "$WORK/one.json"
check "  the rendezvous in the submit directory is gone" bash -c "! ls -A '$WORK' | grep -q '^.logdiff-tp-'"

run "srun -n 3 for --tp 2: refused (exit 2)" 2 srun -N 1 -n 3 --overcommit --time=2 "$LOGDIFF" replay --model "$MD/qwen3" \
    --rid rp-greedy --tp 2 "$RL"
check "  it says why" grep -q "srun started 3 tasks" "$WORK/err"
[ "$failed" -eq 0 ] || slurm_logs_tail
finish
