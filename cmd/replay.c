/* replay.c - `logdiff replay --model DIR --rid RID LOG...`: run a logged
 * request's prompt through logdiff's engine, teacher-force its logged
 * output and say where (if anywhere) the output leaves what the model would
 * produce (replay/run/replay.h).  Its pieces are in cmd/replay/
 * (replay_cli.h): the options checked, the request read, the modes, the
 * report. */
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "cmd/common/logread.h"
#include "cmd/common/options.h"
#include "cmd/replay/replay_cli.h"

static const char *const replay_usage[] = {
    "logdiff replay --model DIR --rid RID [--json] [--threads N] [--backend cpu|ref|cuda]",
    "               [--top-k K] [--max-tokens N] [--seed N] [--tp N]",
    "               [--tp-rank R --tp-rendezvous FILE [--tp-device D] [--tp-transport T]",
    "                [--tp-timeout S]]",
    "               [--dump-layers DIR [--positions LIST]] [--kernels SPEC]",
    "               [--compare-kernels] [--batch-with RID,...] LOG...",
    "",
    "Replays one logged request on logdiff's own CPU engine (fp32, a fixed",
    "summation order, the same bits whatever --threads): --backend cpu (the",
    "default) sums dot products in eight lanes with fma, SIMD where the machine",
    "has it; --backend ref is the plain reference, one accumulator in index",
    "order, several times slower; the two agree to rounding; --backend cuda",
    "runs on GPU 0 (builds with CUDA).  --check BACKEND replays on both and",
    "reports per layer the largest normalised error and difference, and",
    "the position of the worst row (JSON worst_position);",
    "--check-layers A-B runs only layers A to B on BACKEND (their weights",
    "alone: a few layers of a model too large for it), fed --backend's",
    "residual state entering layer A (DeepSeek V4: its hc_mult streams) and",
    "the tokens; only the planes compared are kept.  --kernels applies to",
    "--backend, BACKEND runs its defaults (e.g. --backend cuda --kernels",
    "graphs=on --check cpu).  The prompt ids",
    "of the log (input_ids; else the prompt text tokenized with DIR's",
    "tokenizer.json or GGUF vocabulary, special tokens parsed) run through the model",
    "(Llama, Qwen2, Qwen3, Mistral; safetensors or GGUF with F32/F16/BF16,",
    "Q8_0, Q4_0, Q4_1, Q4_K, Q6_K weights; DeepSeek-V3 safetensors, FP8",
    "block-scaled too), then the logged output ids (out['output_ids'], vLLM's",
    "output_token_ids) are teacher-forced.  For each output position: the",
    "logged token's rank and log-probability under the replay, the replay's",
    "top-1 and the margin between its two best logits.  The divergence is the",
    "first position whose logged token is outside the replay's top K and more",
    "than --near-tie nats below its top-1 (closer is a near-tie: a flat",
    "distribution that rounding can reorder; reported, not a divergence); the",
    "replay's greedy continuation from there is shown.  Without a logged",
    "output, the greedy continuation of the prompt is shown.  With --seed N the",
    "continuation is sampled instead, reproducibly, with the request's logged",
    "sampling parameters applied as SGLang does (temperature, top_k, top_p,",
    "min_p) and a counter-based generator keyed by (N, output position); greedy",
    "all the same when the logged temperature is 0 or absent.  Verdicts:",
    "replay.consistent, replay.divergent, replay.no_output.  Exit status:",
    "0 consistent (or no output), 1 divergent, 2 usage, I/O or model error, an",
    "id outside the vocabulary or past the context.",
    "",
    "--tp N splits the model over N tensor-parallel ranks: query/KV heads and",
    "MLP rows divided, o_proj and down_proj summed across ranks in rank",
    "order, so a run gives the same bits every time; N must divide the heads,",
    "the KV heads and the intermediate size.  DeepSeek V3/V3.2: MLA's heads and",
    "every expert's rows divided (the latent cache, indexer and router on",
    "every rank); V4: its query heads with their output groups, and the",
    "experts' rows (N also divides o_groups).  On cpu/ref the",
    "ranks are threads of this process (--threads divided among them); on",
    "cuda, GPUs 0..N-1 over NCCL, or where the machine has fewer GPUs than",
    "ranks (or the build no NCCL) rank k on GPU k mod G and the sums through",
    "host memory: the same bits, so one card replays a split N ways (said",
    "in the header: tp N on G GPUs).  With --check BACKEND",
    "the split replay is compared with BACKEND unsplit (--check-layers: a",
    "slice fed the split replay's state: --backend cuda --tp 8 --check cpu",
    "--check-layers 10-12 for a model that needs eight GPUs).",
    "",
    "--tp-rank R --tp-rendezvous FILE makes this process rank R alone of N",
    "processes, one a rank, as on a deployment over several machines: each",
    "process is started with the same arguments but its rank, and they meet",
    "at FILE (a new name; rank 0 creates it and removes it once all are in,",
    "and refuses one that exists, a run's leftover).  On cuda they join",
    "through NCCL's bootstrap (FILE on storage every machine sees; the rank",
    "on GPU --tp-device D, default LD_TP_DEVICE, LOCAL_RANK, else R); on",
    "cpu/ref, with --tp-transport shm or in a build without NCCL, through a",
    "mapping of FILE shared by the processes of one machine (best under",
    "/dev/shm): there CUDA ranks sum through host memory and may share GPUs",
    "(rank R on GPU R mod G by default; NCCL refuses two ranks on one GPU),",
    "with the same bits.  Rank 0 prints the report; the others compute the",
    "same and print nothing; all exit alike.  A rank that fails or dies",
    "ends the others with an error; so does one alive but stalled:",
    "--tp-timeout S (default 600) bounds the wait for the others to join and",
    "each collective's wait for the slowest rank (the first one also waits",
    "for every rank's weights to load).  From the environment: LD_TP_RANK,",
    "LD_TP_DEVICE, LD_TP_TRANSPORT, LD_TP_RENDEZVOUS, or with a rendezvous a",
    "launcher's rank and local rank (RANK/LOCAL_RANK, Slurm's",
    "SLURM_PROCID/SLURM_LOCALID, Open MPI's OMPI_COMM_WORLD_RANK/_LOCAL_RANK):",
    "e.g. srun -N2",
    "--ntasks-per-node=8 logdiff replay ... --backend cuda --tp 16",
    "--tp-rendezvous /shared/rdv-$SLURM_JOB_ID.  In a step srun started",
    "with N tasks, --tp N alone is enough: the tasks are the group (srun's",
    "task count must be N) and meet, unless told otherwise, at",
    "$SLURM_SUBMIT_DIR/.logdiff-tp-$SLURM_JOB_ID.$SLURM_STEP_ID.",
    "",
    "--dump-layers DIR writes the hidden states of the replayed sequence (the",
    "prompt ids, then the logged output ids; position p holds token p) as NumPy",
    "files for comparison with another engine: DIR/embed.npy, DIR/layer_00.npy",
    "... (the residual stream after each decoder layer), DIR/final_norm.npy, each",
    "float32 [positions, hidden]; DIR/positions.npy and DIR/tokens.npy (int64);",
    "DIR/manifest.json saying what each is.  DIR is created if missing.",
    "--positions LIST picks the rows: positions and ranges A-B, inclusive,",
    "comma-separated, negative from the end (-1: the last), e.g. 0,5,10-20,-1;",
    "default every position.",
    "",
    "--kernels OP=VARIANT,... swaps ops of the backend for production-style",
    "kernels: matmul=ref|fast|bf16|splitk|fp8act (bf16 operands with fp32",
    "accumulation; split-K in fixed splits of 256; activations quantized to",
    "FP8 e4m3 in 1x128 blocks first), attention=ref|fast,",
    "rmsnorm=ref|bf16, swiglu=ref|bf16 (outputs rounded to bf16), and for",
    "DeepSeek's MLA mla=ref|absorbed|splitk (the naive form; kv_b_proj",
    "absorbed into q and the output as decode kernels do; absorbed with",
    "flash-decoding's split-KV in fixed splits of 64 positions),",
    "router=ref|bf16 and combine=ref|bf16|fused (the gate and the expert sum",
    "in bf16, as DeepSeek's official V3 code; fused: routed_scaling_factor on",
    "the routed sum, as SGLang), indexer=ref|bf16|fp8 (V3.2's and V4's",
    "indexer scores from bf16 operands, or from q and k Hadamard-rotated and",
    "quantized to FP8 e4m3 in 1x128 blocks as DeepSeek's V3.2 code),",
    "rope=ref|bf16 (the cos/sin table in bf16, as SGLang's cache), and for",
    "DeepSeek-V4 mhc=ref|bf16|sinkhorn-bf16 (the mHC mixing matrices cast to",
    "bf16, or every Sinkhorn iterate rounded to bf16).  With --backend cuda",
    "the ops are embed, rmsnorm, matmul, rope, kv_store, attention, swiglu,",
    "add, softmax, mla, absorb, route, index, hc or all, each =ref|custom",
    "(the CUDA reference kernel or the fast one, the default), and",
    "matmul=tc: BF16 weights on tensor cores (activations rounded to bf16,",
    "fp32 sums; other weight types run the custom kernel); graphs=on|N",
    "captures the launches in CUDA graphs of 64 (or N) operations, each",
    "launched as it fills and updated in place from step to step (fewer",
    "microseconds a launch; the same numbers; with --tp on every rank).",
    "--batch-with RID,... replays the request twice, alone and batched with",
    "the requests named (their logged prompt and output ids), as a server",
    "batches requests: each step the request's next 4 ids and 3 of each other",
    "request's in one batch, every op but attention run on all the rows at",
    "once.  logdiff's engine computes a token's row the same way whatever",
    "else is in its batch, so the logits and every layer's hidden state of",
    "every position must be bitwise the same: the evidence that the replay's",
    "verdict does not depend on the load, and that an answer that changed",
    "with the server's load points at the server's kernels.  Verdicts",
    "batch.identical (exit 0), batch.differs (exit 1: a fault of logdiff's",
    "engine; the first position and layer that differ).  With --tp N both",
    "runs are split, each rank batching its share: the same evidence for a",
    "split server.",
    "",
    "--compare-kernels replays the request on the reference backend and then",
    "once per variant, and reports for each the first layer and position whose",
    "hidden row departs from the reference's beyond 1e-5 normalised error, the",
    "largest change of a logged token's log-probability, how many ranks",
    "changed, and the verdict it would give.  With --backend cuda it runs",
    "every op on its CUDA reference kernel, then each op's custom kernel alone",
    "among reference ones, then all custom kernels, and compares each with",
    "the first.  With --tp N every replay is split over the N ranks (a model",
    "that needs several GPUs); a variant the split cannot run is reported as",
    "refused, with the reason.",
    NULL
};

/* the mode the options ask for, on the request found */
static int run_mode(struct ld_cli *cli, const ld_cli_replay_args *a, ld_replay_engine *e, const ld_request *r,
                    const ld_cli_replay_pick *s)
{
    if (a->batch_with) return ld_cli_replay_batch(cli, a, e, r, s);
    if (a->check) return ld_cli_replay_check_backends(cli, a, e, r);
    if (a->compare) return ld_cli_replay_compare(cli, a, e, r);
    return ld_cli_replay_one(cli, a, e, r);
}

int cmd_replay(int argc, char **argv, struct ld_cli *cli)
{
    ld_cli_replay_args a = { .backend = "cpu", .top_k = LD_REPLAY_TOP_K, .max_tokens = LD_REPLAY_MAX_TOKENS,
                             .proc = { .rank = -1, .device = -1, .timeout = 600 } };
    const ld_cli_option options[] = {
        { LD_OPT_STRING, 0, "model", &a.model, "DIR", "HF model directory (config.json, *.safetensors) or a GGUF file (required)" },
        { LD_OPT_STRING, 0, "rid", &a.rid, "RID", "the request to replay (required)" },
        { LD_OPT_BOOL, 0, "json", &a.json, NULL, "one JSON object" },
        { LD_OPT_INT, 0, "threads", &a.threads, "N", "threads of the engine (default: the cores)" },
        { LD_OPT_STRING, 0, "backend", &a.backend, "NAME", "cpu (fast, the default), ref (the plain reference) or cuda (GPU 0)" },
        { LD_OPT_INT, 0, "top-k", &a.top_k, "K", "a logged token ranked at most K is within reach (default 5, max 64)" },
        { LD_OPT_INT, 0, "max-tokens", &a.max_tokens, "N", "length of the greedy continuation (default 8; 0: none)" },
        { LD_OPT_STRING, 0, "near-tie", &a.near_tie, "X", "nats under which a gap is a near-tie (default 0.1; 0: none)" },
        { LD_OPT_STRING, 0, "seed", &a.seed, "N", "sample the continuation with the logged parameters, seed N (0 to 2^64-1)" },
        { LD_OPT_STRING, 0, "dump-layers", &a.dump_dir, "DIR", "write the per-layer hidden states as .npy files into DIR" },
        { LD_OPT_STRING, 0, "positions", &a.positions, "LIST", "with --dump-layers: the positions, e.g. 0,5,10-20,-1 (default all)" },
        { LD_OPT_STRING, 0, "kernels", &a.kernels, "SPEC", "swap ops for variants: matmul=bf16,rmsnorm=bf16,..." },
        { LD_OPT_BOOL, 0, "compare-kernels", &a.compare, NULL, "replay once per kernel variant and compare with the reference" },
        { LD_OPT_STRING, 0, "check", &a.check, "BACKEND", "replay on --backend and on BACKEND too; compare layer by layer" },
        { LD_OPT_STRING, 0, "check-layers", &a.check_layers, "A-B", "with --check: only layers A to B on BACKEND, fed --backend's rows" },
        { LD_OPT_INT, 0, "tp", &a.tp, "N", "tensor-parallel ranks (default: no split)" },
        { LD_OPT_INT, 0, "tp-rank", &a.proc.rank, "R", "with --tp N: this process is rank R of N processes" },
        { LD_OPT_STRING, 0, "tp-rendezvous", &a.proc.rendezvous, "FILE", "where the processes of the group meet" },
        { LD_OPT_INT, 0, "tp-device", &a.proc.device, "D", "cuda: this rank's GPU (default LOCAL_RANK, else R; over shm R mod the GPUs)" },
        { LD_OPT_STRING, 0, "tp-transport", &a.proc.transport, "T", "nccl (cuda's default) or shm (one machine)" },
        { LD_OPT_INT, 0, "tp-timeout", &a.proc.timeout, "S", "seconds to wait for the group: to join, at each collective (default 600)" },
        { LD_OPT_STRING, 0, "batch-with", &a.batch_with, "RID,...", "replay alone and batched with these requests; compare the logits and hidden states" },
        LD_CLI_CAPTURE_OPTIONS(a.capture),
        LD_OPTION_END
    };
    int n_logs = 0;
    int rc = ld_cli_parse_options(argc, argv, replay_usage, options, &n_logs, cli->out, cli->err);
    if (rc != LD_PARSE_OK) return rc == LD_PARSE_HELP ? LD_EXIT_SAME : LD_EXIT_TROUBLE;
    int status = LD_EXIT_TROUBLE;
    ld_cli_replay_pick s = { 0 };
    const ld_request *r = NULL;
    ld_replay_engine *e = NULL;
    FILE *quiet = NULL, *report = cli->out;
    if (ld_cli_replay_check(cli, &a, n_logs) == 0 && ld_cli_replay_read(cli, &a, argv + 1, n_logs, &s, &r) == 0 &&
        ld_cli_replay_engine(cli, &a, &e, &quiet) == 0) {
        if (quiet) cli->out = quiet; /* rank 0 reports; the other ranks compute the same, quietly */
        status = run_mode(cli, &a, e, r, &s);
    }
    cli->out = report;
    if (quiet) fclose(quiet);
    ld_replay_engine_close(e);
    ld_cli_replay_pick_free(&s);
    ld_replay_positions_free(&a.want);
    return status;
}
