#!/usr/bin/env bash
# logdiff replay --tp N --tp-rank R --tp-rendezvous FILE: the split replay with each rank a process
# of its own, as over several machines (one process a GPU), the processes meeting at FILE.
#   - every mode (plain, --check, --check-layers, --batch-with, --compare-kernels; qwen3, DeepSeek-V3
#     and V4): rank 0's report is byte for byte the one-process --tp N report, the other ranks print
#     nothing, all exit alike (the ordered sum does not depend on the transport); the check side
#     on rank 0 alone;
#   - the rank and rendezvous from the environment (LD_TP_RANK, a launcher's RANK or SLURM_PROCID,
#     LD_TP_RENDEZVOUS; a launcher's variables ignored without a rendezvous);
#   - a rank that never comes, a rank out of step, a leftover rendezvous file: clear errors, no hang;
#     the usage errors;
#   - --backend cuda (where the build has CUDA and a device: the CUDA emulator's two in CI, its NCCL
#     joining processes through the same file; a GPU machine's in tools/gpu-check.sh): both
#     processes on one GPU over --tp-transport shm; with NCCL, rank 0 alone ending at --tp-timeout,
#     a rank past the machine's GPUs refused saying what to give, and with two GPUs the processes
#     on GPU R (on the emulator also each on its own device 0, as on two machines); each byte for
#     byte the one-process --backend cuda --tp 2 report;
#   - --tp-transport's usage errors (nccl for cpu ranks, an unknown one, without a rank).
. "$(dirname "$0")/lib.bash"
RL="$LD_SOURCE_DIR/testdata/replay/replaylog/server.log"
SV="$LD_SOURCE_DIR/testdata/replay/smallvocab/server.log"
MD="$LD_SOURCE_DIR/testdata/models"

# procs N TAG ARGS...: N processes of `logdiff replay ARGS --tp N --tp-rank R`, meeting at a fresh
# rendezvous; rank R's stdout, stderr and exit status in $WORK/TAG.R.{out,err,rc}
procs() {
    local n=$1 tag=$2 r
    shift 2
    for ((r = 0; r < n; r++)); do
        ("$LOGDIFF" replay "$@" --tp "$n" --tp-rank "$r" --tp-rendezvous "$WORK/rdv-$tag" \
            >"$WORK/$tag.$r.out" 2>"$WORK/$tag.$r.err"
         echo $? >"$WORK/$tag.$r.rc") &
    done
    wait
}

# same_as_threads NAME EXIT N ARGS...: the one-process --tp N report, then N processes: rank 0's
# report the same bytes, the others' empty, every exit status EXIT
same_as_threads() {
    local name=$1 want=$2 n=$3 tag r ok=1
    shift 3
    tag=$(echo "$name" | tr -c 'a-zA-Z0-9\n' '_')
    run "$name: one process" "$want" "$LOGDIFF" replay "$@" --tp "$n"
    cp "$WORK/out" "$WORK/$tag.threads"
    procs "$n" "$tag" "$@"
    for ((r = 0; r < n; r++)); do
        [ "$(cat "$WORK/$tag.$r.rc")" = "$want" ] || { ok=0; echo "  rank $r exit $(cat "$WORK/$tag.$r.rc"): $(head -c 300 "$WORK/$tag.$r.err")"; }
        [ "$r" = 0 ] || [ ! -s "$WORK/$tag.$r.out" ] || { ok=0; echo "  rank $r printed a report"; }
    done
    check "$name: $n processes, every exit $want, rank 0's report the one-process bytes, the others quiet" \
        bash -c "[ $ok = 1 ] && [ -s '$WORK/$tag.threads' ] && cmp -s '$WORK/$tag.threads' '$WORK/$tag.0.out'"
    check "$name: the rendezvous file is gone" test ! -e "$WORK/rdv-$tag"
}

same_as_threads "qwen3 --json" 0 2 --model "$MD/qwen3" --rid rp-greedy --threads 2 --json "$RL"
same_as_threads "qwen3 text, ref" 0 2 --model "$MD/qwen3" --rid rp-greedy --backend ref "$RL"
same_as_threads "qwen3 --check ref" 0 2 --model "$MD/qwen3" --rid rp-greedy --check ref --json "$RL"
same_as_threads "qwen3 --batch-with" 0 2 --model "$MD/qwen3" --rid rp-greedy --batch-with rp-altered,rp-no-output \
    --json "$RL"
same_as_threads "deepseek-v3 sv-forced" 1 2 --model "$MD/deepseek-v3" --rid sv-forced --json "$SV"
same_as_threads "deepseek-v3 --compare-kernels" 0 2 --model "$MD/deepseek-v3" --rid sv-forced --compare-kernels \
    --json "$SV"
same_as_threads "deepseek-v4 sv-forced" 1 2 --model "$MD/deepseek-v4" --rid sv-forced --json "$SV"
same_as_threads "deepseek-v4 --check-layers 1-2" 0 2 --model "$MD/deepseek-v4" --rid rp-greedy --check ref \
    --check-layers 1-2 --json "$RL"
check "the split is real: the one-process report says tp 2" grep -q '"tp":2' "$WORK/qwen3___json.threads"

# the check side runs on rank 0 alone (the others' reports go nowhere), after the split replay (a
# slice's, and the whole model's: the others do not wait at a collective while rank 0 checks): with
# a check backend this build cannot open, rank 0 fails after the split replay and rank 1, which
# never opens it, does not
for layers in "--check-layers 0-1" ""; do
    # shellcheck disable=SC2086 # $layers: no option, or an option and its value
    procs 2 side --model "$MD/qwen3" --rid rp-greedy --check cuda $layers --json "$RL"
    if grep -qE "CUDA|cuda" "$WORK/side.0.err"; then
        check "--check cuda ${layers:-(whole)} without a GPU: rank 0 fails naming CUDA, rank 1 never opens it" \
            bash -c "[ \$(cat '$WORK/side.0.rc') = 2 ] && [ \$(cat '$WORK/side.1.rc') = 0 ] && [ ! -s '$WORK/side.1.err' ]"
    else
        check "--check cuda ${layers:-(whole)} on a build with a device: both ranks exit 0" bash -c \
            "[ \$(cat '$WORK/side.0.rc') = 0 ] && [ \$(cat '$WORK/side.1.rc') = 0 ]"
    fi
done

# from the environment, launcher style: RANK with LD_TP_RENDEZVOUS
for r in 0 1; do
    (RANK=$r LD_TP_RENDEZVOUS="$WORK/rdv-env" "$LOGDIFF" replay --model "$MD/qwen3" --rid rp-greedy --threads 2 \
        --json --tp 2 "$RL" >"$WORK/env.$r.out" 2>"$WORK/env.$r.err"; echo $? >"$WORK/env.$r.rc") &
done
wait
check "RANK + LD_TP_RENDEZVOUS: both exit 0, rank 0 the same report" bash -c \
    "[ \$(cat '$WORK/env.0.rc') = 0 ] && [ \$(cat '$WORK/env.1.rc') = 0 ] && [ ! -s '$WORK/env.1.out' ] &&
     cmp -s '$WORK/env.0.out' '$WORK/qwen3___json.threads'"

# Slurm's srun: SLURM_PROCID for the rank (LD_TP_RANK would win over it)
for r in 0 1; do
    (SLURM_PROCID=$r SLURM_LOCALID=0 "$LOGDIFF" replay --model "$MD/qwen3" --rid rp-greedy --threads 2 --json --tp 2 \
        --tp-rendezvous "$WORK/rdv-slurm" "$RL" >"$WORK/slurm.$r.out" 2>"$WORK/slurm.$r.err"
     echo $? >"$WORK/slurm.$r.rc") &
done
wait
check "SLURM_PROCID: both exit 0, rank 0 the same report" bash -c \
    "[ \$(cat '$WORK/slurm.0.rc') = 0 ] && [ \$(cat '$WORK/slurm.1.rc') = 0 ] && [ ! -s '$WORK/slurm.1.out' ] &&
     cmp -s '$WORK/slurm.0.out' '$WORK/qwen3___json.threads'"
# a step srun started with 2 tasks, --tp 2 alone: the tasks meet in the submit directory under
# the job's and step's ids (the variables as srun sets them for each task)
mkdir -p "$WORK/submit"
for r in 0 1; do
    (SLURM_JOB_ID=4242 SLURM_STEP_ID=0 SLURM_STEP_NUM_TASKS=2 SLURM_NTASKS=2 SLURM_PROCID=$r SLURM_LOCALID=$r \
        SLURM_SUBMIT_DIR="$WORK/submit" "$LOGDIFF" replay --model "$MD/qwen3" --rid rp-greedy --threads 2 --json \
        --tp 2 "$RL" >"$WORK/srun.$r.out" 2>"$WORK/srun.$r.err"
     echo $? >"$WORK/srun.$r.rc") &
done
wait
check "srun step, --tp 2 alone: both exit 0, rank 0 the same report" bash -c \
    "[ \$(cat '$WORK/srun.0.rc') = 0 ] && [ \$(cat '$WORK/srun.1.rc') = 0 ] && [ ! -s '$WORK/srun.1.out' ] &&
     cmp -s '$WORK/srun.0.out' '$WORK/qwen3___json.threads'"
check "  (rank 0 removed the rendezvous once both were in)" bash -c "[ -z \"\$(ls -A '$WORK/submit')\" ]"
run "srun started 3 tasks for --tp 2: exit 2" 2 env SLURM_JOB_ID=4242 SLURM_STEP_ID=1 SLURM_STEP_NUM_TASKS=3 \
    SLURM_PROCID=0 "$LOGDIFF" replay --model "$MD/qwen3" --rid rp-greedy --tp 2 "$RL"
check "  it says so" grep -q "srun started 3 tasks" "$WORK/err"
run "rank 0 alone in a step of 2 (the other never comes): exit 2, naming the submit directory's file" 2 \
    env SLURM_JOB_ID=4242 SLURM_STEP_ID=2 SLURM_STEP_NUM_TASKS=2 SLURM_PROCID=0 SLURM_SUBMIT_DIR="$WORK/submit" \
    "$LOGDIFF" replay --model "$MD/qwen3" --rid rp-greedy --tp 2 --tp-timeout 1 "$RL"
check "  it names the rendezvous" grep -q "logdiff-tp-4242.2" "$WORK/err"
run "a launcher's RANK without a rendezvous: no group" 0 env RANK=1 "$LOGDIFF" replay --model "$MD/qwen3" \
    --rid rp-greedy --threads 2 --json --tp 2 "$RL"
check "  (the one-process report)" cmp -s "$WORK/out" "$WORK/qwen3___json.threads"

# failures end every rank with an error, no hang
run "rank 1 never comes" 2 "$LOGDIFF" replay --model "$MD/qwen3" --rid rp-greedy --tp 2 --tp-rank 0 \
    --tp-rendezvous "$WORK/rdv-alone" --tp-timeout 1 "$RL"
check "says who is missing" grep -q "1 of 2 ranks joined in time" "$WORK/err"
check "rank 0 removed the name" test ! -e "$WORK/rdv-alone"
echo leftover >"$WORK/rdv-left"
run "a leftover rendezvous file" 2 "$LOGDIFF" replay --model "$MD/qwen3" --rid rp-greedy --tp 2 --tp-rank 0 \
    --tp-rendezvous "$WORK/rdv-left" --tp-timeout 1 "$RL"
check "refused, not joined" grep -q "rendezvous .*rdv-left exists" "$WORK/err"
check "and left alone" grep -qx leftover "$WORK/rdv-left"
# rank 1 replays another request: the ranks' collectives differ in size
("$LOGDIFF" replay --model "$MD/qwen3" --rid rp-altered --tp 2 --tp-rank 1 --tp-rendezvous "$WORK/rdv-step" "$RL" \
    >"$WORK/step.1.out" 2>"$WORK/step.1.err"; echo $? >"$WORK/step.1.rc") &
run "ranks out of step" 2 "$LOGDIFF" replay --model "$MD/qwen3" --rid rp-greedy --tp 2 --tp-rank 0 \
    --tp-rendezvous "$WORK/rdv-step" "$RL"
wait
check "rank 0 names the mismatch" grep -q "tensor-parallel rank 0: collective: rank 0 passed" "$WORK/err"
check "rank 1 fails too" bash -c "[ \$(cat '$WORK/step.1.rc') = 2 ] && grep -q 'collective' '$WORK/step.1.err'"

# usage
run "--tp-rank without a rendezvous" 2 "$LOGDIFF" replay --model "$MD/qwen3" --rid rp-greedy --tp 2 --tp-rank 0 "$RL"
check "says they go together" grep -q -- "--tp-rank and --tp-rendezvous go together" "$WORK/err"
run "--tp-rank past the group" 2 "$LOGDIFF" replay --model "$MD/qwen3" --rid rp-greedy --tp 2 --tp-rank 2 \
    --tp-rendezvous "$WORK/x" "$RL"
check "gives the range" grep -q -- "--tp-rank: give 0 to 1" "$WORK/err"
run "--tp-rank without --tp" 2 "$LOGDIFF" replay --model "$MD/qwen3" --rid rp-greedy --tp-rank 0 \
    --tp-rendezvous "$WORK/x" "$RL"
check "asks for --tp" grep -q -- "give --tp N too" "$WORK/err"
run "--tp-device alone" 2 "$LOGDIFF" replay --model "$MD/qwen3" --rid rp-greedy --tp 2 --tp-device 1 "$RL"
check "says what it goes with" grep -q -- "--tp-device, --tp-transport: give them with --tp-rank and --tp-rendezvous" \
    "$WORK/err"
run "--tp-transport alone" 2 "$LOGDIFF" replay --model "$MD/qwen3" --rid rp-greedy --tp 2 --tp-transport shm "$RL"
check "  the same" grep -q -- "--tp-transport: give them with --tp-rank and --tp-rendezvous" "$WORK/err"
run "--tp-transport nccl on cpu" 2 "$LOGDIFF" replay --model "$MD/qwen3" --rid rp-greedy --tp 2 --tp-rank 0 \
    --tp-rendezvous "$WORK/x" --tp-transport nccl "$RL"
check "says NCCL is for CUDA ranks" grep -q "NCCL carries CUDA ranks" "$WORK/err"
check "  and made no rendezvous" test ! -e "$WORK/x"
run "an unknown LD_TP_TRANSPORT" 2 env LD_TP_TRANSPORT=mpi "$LOGDIFF" replay --model "$MD/qwen3" --rid rp-greedy \
    --tp 2 --tp-rank 0 --tp-rendezvous "$WORK/x" "$RL"
check "names the transports" grep -q "unknown transport 'mpi' (shm, nccl)" "$WORK/err"
run "a bad LD_TP_RANK" 2 env LD_TP_RANK=one "$LOGDIFF" replay --model "$MD/qwen3" --rid rp-greedy --tp 2 "$RL"
check "names the variable" grep -q "LD_TP_RANK: give an integer" "$WORK/err"
run "--help" 0 "$LOGDIFF" replay --help
check "--help documents it" grep -q -- "--tp-rendezvous FILE" "$WORK/out"

# nccl_pairs: two processes over NCCL on a machine with two GPUs, rank 0's report the one-process
# bytes; on the emulator also each on its own device 0, as on two machines (on one machine's GPUs NCCL
# would refuse the two ranks on one device)
nccl_pairs() {
    if [ -n "${LD_CUDA_EMU_DEVICES:-}" ]; then
        procs 2 cudadev0 --model "$MD/qwen3" --rid rp-greedy --backend cuda --tp-device 0 --json "$RL"
        check "cuda, 2 processes each on its device 0 (two machines): rank 0's report the one-process bytes" \
            bash -c "[ \$(cat '$WORK/cudadev0.0.rc') = 0 ] && [ \$(cat '$WORK/cudadev0.1.rc') = 0 ] &&
             cmp -s '$WORK/cuda.threads' '$WORK/cudadev0.0.out' && [ ! -s '$WORK/cudadev0.1.out' ]"
    fi
    procs 2 cudadevr --model "$MD/qwen3" --rid rp-greedy --backend cuda --json "$RL"
    check "cuda, 2 processes on GPUs 0 and 1 (one machine): the same bytes" bash -c \
        "[ \$(cat '$WORK/cudadevr.0.rc') = 0 ] && [ \$(cat '$WORK/cudadevr.1.rc') = 0 ] &&
         cmp -s '$WORK/cuda.threads' '$WORK/cudadevr.0.out'"
    procs 2 cudagraphs --model "$MD/qwen3" --rid rp-greedy --backend cuda --kernels graphs=on --json "$RL"
    check "cuda graphs, 2 processes: the same bytes" bash -c \
        "[ \$(cat '$WORK/cudagraphs.0.rc') = 0 ] && [ \$(cat '$WORK/cudagraphs.1.rc') = 0 ] &&
         cmp -s '$WORK/cuda.threads' '$WORK/cudagraphs.0.out'"
    same_as_threads "cuda deepseek-v4 --check ref" 0 2 --model "$MD/deepseek-v4" --rid sv-forced --backend cuda \
        --check ref --json "$SV"
}

# cuda: where the build has CUDA and a device (the emulator's two in CI; tools/gpu-check.sh runs it on
# a GPU machine's, one or more)
"$LOGDIFF" replay --model "$MD/qwen3" --rid rp-greedy --backend cuda --tp 2 --json "$RL" >"$WORK/cuda.threads" \
    2>"$WORK/err"
rc=$?
if [ $rc = 2 ] && grep -qE 'CUDA|NCCL|cuda' "$WORK/err"; then
    echo "skipped the cuda cases: no GPU here: $(head -c 200 "$WORK/err")"
else
    check "cuda, one process: runs (exit $rc)" test $rc = 0
    # a group of processes says nothing of GPUs shared (tp_gpus: one process's ranks sharing a GPU)
    sed 's/"tp_gpus":[0-9]*,//' "$WORK/cuda.threads" >"$WORK/cuda.procs"
    # the ranks sharing one GPU: NCCL refuses two ranks on a device, so over shm (host memory)
    CUDA_VISIBLE_DEVICES=0 LD_CUDA_EMU_DEVICES=1 procs 2 cudashm --model "$MD/qwen3" --rid rp-greedy --backend cuda \
        --tp-transport shm --json "$RL"
    check "cuda over shm, 2 processes sharing one GPU: rank 0's report the bytes of ranks on GPUs of their own" \
        bash -c "[ \$(cat '$WORK/cudashm.0.rc') = 0 ] && [ \$(cat '$WORK/cudashm.1.rc') = 0 ] &&
         cmp -s '$WORK/cuda.procs' '$WORK/cudashm.0.out' && [ ! -s '$WORK/cudashm.1.out' ]"
    # NCCL's bootstrap waits for ever for a rank that never comes: bounded by --tp-timeout (and where
    # the build has no NCCL, or its NCCL cannot drive this CUDA, as over the mock, the NCCL cases stop)
    run "cuda over NCCL, rank 1 never comes" 2 "$LOGDIFF" replay --model "$MD/qwen3" --rid rp-greedy --backend cuda \
        --tp 2 --tp-rank 0 --tp-rendezvous "$WORK/rdv-nccl-alone" --tp-timeout 1 --tp-transport nccl "$RL"
    if grep -qE "no NCCL|NCCL ncclCommInitRankConfig: unhandled cuda error" "$WORK/err"; then
        echo "skipped the NCCL cases: $(head -c 200 "$WORK/err")"
    else
        check "  rank 0 gives up at the timeout, saying so" grep -q "the group of 2 was not made within 1 s" "$WORK/err"
        check "  and removed the name" test ! -e "$WORK/rdv-nccl-alone"
        run "cuda over NCCL, rank 1 on a one-GPU machine" 2 env CUDA_VISIBLE_DEVICES=0 LD_CUDA_EMU_DEVICES=1 \
            "$LOGDIFF" replay --model "$MD/qwen3" --rid rp-greedy --backend cuda --tp 2 --tp-rank 1 \
            --tp-rendezvous "$WORK/rdv-1gpu" --tp-timeout 1 "$RL"
        check "  says what to give instead" grep -q "rank 1 over NCCL takes GPU 1, and this machine has 1: give its" \
            "$WORK/err"
        if grep -q '"tp_gpus"' "$WORK/cuda.threads"; then # the one-process split shared a GPU: one here
            echo "skipped the NCCL pairs: one GPU here"
        else
            nccl_pairs
        fi
    fi
fi
finish
