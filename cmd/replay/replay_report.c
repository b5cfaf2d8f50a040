/* replay.c - `logdiff replay --model DIR --rid RID LOG...`: run a logged
 * request's prompt through the reference engine, teacher-force its logged
 * output and say where (if anywhere) the output leaves what the model would
 * produce (replay/run/replay.h). */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "parse/pylit/pylit_json.h"
#include "cmd/common/logread.h"
#include "cmd/common/options.h"
#include "replay/run/replay.h"
#include "replay/run/replay_compare.h"
#include "cmd/replay/replay_batched.h"
#include "cmd/replay/replay_kernels.h"

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
    "--tp-rendezvous /shared/rdv-$SLURM_JOB_ID.",
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

#define PFX "logdiff replay: "

/* this process as one rank of a group of processes (--tp-rank) */
typedef struct tp_proc {
    long rank, device, timeout;
    const char *rendezvous;
    const char *transport; /* NULL: the default (replay.h) */
} tp_proc;

/* *v from the environment variable `name` when set; a problem when it is
 * not an integer from 0 to 1023 */
static const char *env_int(const char *name, long *v)
{
    const char *s = getenv(name);
    if (!s || !*s) return NULL;
    char *end = NULL;
    errno = 0;
    long x = strtol(s, &end, 10);
    if (*end || errno || x < 0 || x > 1023) return name;
    *v = x;
    return NULL;
}

/* the first of `names` set in the environment into *v (left as it is when
 * none is); a problem naming the variable when it is not an integer */
static const char *env_first(const char *const *names, long *v)
{
    const char *bad = NULL;
    for (int i = 0; names[i] && *v < 0 && !bad; i++) bad = env_int(names[i], v);
    return bad;
}

/* The options of --tp-rank completed from the environment and checked;
 * a problem to report, or NULL.  Besides our own variables, the rank and
 * the local rank as launchers set them: torchrun-style (RANK, LOCAL_RANK),
 * Slurm's srun, Open MPI's mpirun; those only with a rendezvous given. */
static const char *tp_proc_resolve(tp_proc *p, long tp, char *msg, size_t cap)
{
    static const char *const own_rank[] = {"LD_TP_RANK", NULL}, *const own_device[] = {"LD_TP_DEVICE", NULL};
    static const char *const launcher_rank[] = {"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", NULL};
    static const char *const launcher_device[] = {"LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", NULL};
    if (!p->rendezvous) p->rendezvous = getenv("LD_TP_RENDEZVOUS");
    if (p->rendezvous && !*p->rendezvous) p->rendezvous = NULL;
    int given = p->device >= 0 || p->transport; /* --tp-device or --tp-transport itself, not the environment's */
    if (!p->transport) p->transport = getenv("LD_TP_TRANSPORT");
    if (p->transport && !*p->transport) p->transport = NULL;
    const char *bad = env_first(own_rank, &p->rank);
    if (!bad) bad = env_first(own_device, &p->device);
    if (!bad && p->rendezvous) bad = env_first(launcher_rank, &p->rank);
    if (!bad && p->rendezvous) bad = env_first(launcher_device, &p->device);
    if (bad) {
        snprintf(msg, cap, "%s: give an integer from 0 to 1023", bad);
        return msg;
    }
    if (p->rank < 0 && !p->rendezvous) /* not a group of processes */
        return given ? "--tp-device, --tp-transport: give them with --tp-rank and --tp-rendezvous" : NULL;
    if (p->rank < 0 || !p->rendezvous) return "--tp-rank and --tp-rendezvous go together";
    if (tp < 1) return "--tp-rank: give --tp N too (the group's size)";
    if (p->rank >= tp) {
        snprintf(msg, cap, "--tp-rank: give 0 to %ld", tp - 1);
        return msg;
    }
    if (p->timeout < 1 || p->timeout > 86400) return "--tp-timeout: give 1 to 86400 seconds";
    return NULL; /* a device still < 0: the transport's default (replay.h) */
}

typedef struct pick {
    const char *rid;
    ld_request *exact;      /* first record with this rid */
    ld_request *sub;        /* first sub-request of a batch with this parent rid */
    size_t n_exact, n_sub;
    int oom;
    const char **with;      /* --batch-with: the rids [n_with] */
    ld_request **with_r;    /* the first record of each (NULL: not seen) */
    size_t n_with;
} pick;

static int on_request(void *ctx, ld_request *r)
{
    pick *s = ctx;
    for (size_t i = 0; r->rid && i < s->n_with; i++)
        if (!s->with_r[i] && !strcmp(r->rid, s->with[i])) {
            s->with_r[i] = r;
            return LD_PAIR_TAKE;
        }
    if (r->rid && !strcmp(r->rid, s->rid)) {
        if (s->n_exact++ == 0) {
            s->exact = r;
            return LD_PAIR_TAKE;
        }
    } else if (r->parent_rid && !strcmp(r->parent_rid, s->rid)) {
        if (s->n_sub++ == 0) {
            s->sub = r;
            return LD_PAIR_TAKE;
        }
    }
    return 0;
}

/* Length of the valid UTF-8 sequence at s[0..n) (n >= 1), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    size_t k = s[0] >= 0xf0 && s[0] <= 0xf4 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc2 && s[0] < 0xe0 ? 2 : 0;
    if (!k || k > n) return 0;
    for (size_t i = 1; i < k; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    if (k == 3 && ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0))) return 0;
    if (k == 4 && ((s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90))) return 0;
    return k;
}

/* Bytes as people read them, into buf (NUL-terminated): \n \t \" \\, other
 * control bytes and bytes that are not valid UTF-8 as \xNN; at most `max`
 * source bytes, then "...". */
static void escape(char *buf, size_t cap, const char *text, size_t len, size_t max)
{
    size_t o = 0;
    const unsigned char *t = (const unsigned char *)text;
    for (size_t i = 0; i < len && i < max && o + 8 < cap;) {
        unsigned char c = t[i];
        size_t k = c >= 0x80 ? utf8_len(t + i, len - i) : 1;
        if (c == '\n') o += (size_t)snprintf(buf + o, cap - o, "\\n");
        else if (c == '\t') o += (size_t)snprintf(buf + o, cap - o, "\\t");
        else if (c == '"' || c == '\\') o += (size_t)snprintf(buf + o, cap - o, "\\%c", c);
        else if (c < 0x20 || c == 0x7f || k == 0) o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", c);
        else {
            memcpy(buf + o, t + i, k);
            o += k;
            i += k;
            continue;
        }
        i++;
    }
    if (len > max && o + 4 < cap) o += (size_t)snprintf(buf + o, cap - o, "...");
    buf[o < cap ? o : cap - 1] = 0;
}

/* A token as people read it: the id, and its bytes quoted and escaped when a
 * tokenizer is there. */
static const char *tok_show(const ld_tok *tok, int32_t id, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "%ld", (long)id);
    char *text = NULL;
    size_t len = 0;
    if (!tok || n < 0 || (size_t)n + 8 >= cap || ld_tok_decode(tok, &id, 1, &text, &len, NULL) != LD_OK)
        return buf;
    char esc[80];
    escape(esc, sizeof esc, text, len, 18);
    snprintf(buf + n, cap - (size_t)n, " \"%s\"", esc);
    free(text);
    return buf;
}

static cJSON *tok_json(const ld_tok *tok, int32_t id)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "id", ld_json_int(id));
    char *text = NULL;
    size_t len = 0;
    if (tok && ld_tok_decode(tok, &id, 1, &text, &len, NULL) == LD_OK)
        cJSON_AddItemToObject(o, "text", ld_json_text(text, len));
    else
        cJSON_AddItemToObject(o, "text", cJSON_CreateNull());
    free(text);
    return o;
}

static cJSON *ids_json(const int32_t *ids, size_t n)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++) cJSON_AddItemToArray(a, ld_json_int(ids[i]));
    return a;
}

static cJSON *text_json(const ld_tok *tok, const int32_t *ids, size_t n)
{
    char *text = NULL;
    size_t len = 0;
    cJSON *j = tok && ld_tok_decode(tok, ids, n, &text, &len, NULL) == LD_OK ? ld_json_text(text, len)
                                                                            : cJSON_CreateNull();
    free(text);
    return j;
}

/* The `dump` object of --json: where the files went and which rows. */
static cJSON *dump_json(const char *dir, const ld_replay_dump *d)
{
    if (!dir) return cJSON_CreateNull();
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "dir", ld_json_cstr(dir));
    cJSON_AddItemToObject(o, "sequence_length", ld_json_int((int64_t)d->seq_len));
    cJSON *pos = cJSON_CreateArray();
    for (size_t i = 0; i < d->n_pos; i++) cJSON_AddItemToArray(pos, ld_json_int(d->pos[i]));
    cJSON_AddItemToObject(o, "positions", pos);
    cJSON_AddItemToObject(o, "n_layers", ld_json_int(d->n_layers));
    cJSON_AddItemToObject(o, "hidden", ld_json_int(d->hidden));
    cJSON *files = cJSON_CreateArray();
    char name[48];
    for (int k = 0; k < d->n_layers + 2; k++)
        cJSON_AddItemToArray(files, cJSON_CreateString(ld_replay_dump_file(k, d->n_layers, name, sizeof name)));
    cJSON_AddItemToArray(files, cJSON_CreateString("positions.npy"));
    cJSON_AddItemToArray(files, cJSON_CreateString("tokens.npy"));
    cJSON_AddItemToArray(files, cJSON_CreateString("manifest.json"));
    cJSON_AddItemToObject(o, "files", files);
    return o;
}

static void print_json(struct ld_cli *cli, const ld_request *r, const ld_replay_engine *e,
                       const ld_replay_result *res, const char *dump_dir, const ld_replay_dump *dump)
{
    const ld_tok *tok = ld_replay_engine_tok(e);
    char where[512];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "rid", ld_json_cstr(r->rid));
    cJSON_AddItemToObject(o, "where", ld_json_cstr(ld_request_where(r, where, sizeof where, NULL)));
    cJSON_AddItemToObject(o, "verdict", cJSON_CreateString(ld_replay_verdict_kind(res->verdict)));
    cJSON_AddItemToObject(o, "model", ld_json_cstr(ld_replay_engine_arch(e)));
    cJSON_AddItemToObject(o, "backend", ld_json_cstr(ld_replay_engine_backend(e)));
    if (ld_replay_engine_tp(e)) cJSON_AddItemToObject(o, "tp", ld_json_int(ld_replay_engine_tp(e)));
    int gpus = ld_replay_engine_tp_gpus(e); /* said only when the ranks share GPUs */
    if (gpus && gpus < ld_replay_engine_tp(e)) cJSON_AddItemToObject(o, "tp_gpus", ld_json_int(gpus));
    cJSON_AddItemToObject(o, "tokenizer", cJSON_CreateBool(tok != NULL));
    cJSON_AddItemToObject(o, "prompt_source", cJSON_CreateString(res->prompt_source == LD_REPLAY_PROMPT_IDS
                                                                     ? "input_ids" : "tokenized_text"));
    cJSON_AddItemToObject(o, "prompt_tokens", ld_json_int((int64_t)res->n_prompt));
    cJSON_AddItemToObject(o, "output_tokens", ld_json_int((int64_t)res->n_output));
    cJSON_AddItemToObject(o, "temperature", ld_json_double(r->temperature));
    cJSON_AddItemToObject(o, "top_k", ld_json_int(res->top_k));
    cJSON_AddItemToObject(o, "near_tie", ld_json_double(res->near_tie));
    cJSON *cut = cJSON_CreateNull();
    if (res->output_cut) {
        cJSON_Delete(cut);
        cut = cJSON_CreateObject();
        cJSON_AddItemToObject(cut, "replayed", ld_json_int((int64_t)res->n_output));
        cJSON_AddItemToObject(cut, "logged", res->n_output_logged >= 0 ? ld_json_int(res->n_output_logged)
                                                                       : cJSON_CreateNull());
    }
    cJSON_AddItemToObject(o, "output_cut", cut);
    cJSON_AddItemToObject(o, "no_output_reason",
                          res->no_output_reason[0] ? cJSON_CreateString(res->no_output_reason) : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "first_outside_top_k", res->first_outside >= 0 ? ld_json_int(res->first_outside)
                                                                            : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "first_not_top1", res->first_not_top1 >= 0 ? ld_json_int(res->first_not_top1)
                                                                        : cJSON_CreateNull());
    cJSON *nt = cJSON_CreateArray();
    for (size_t i = 0; i < res->n_output; i++)
        if (res->pos[i].near_tie) cJSON_AddItemToArray(nt, ld_json_int((int64_t)i));
    cJSON_AddItemToObject(o, "near_ties", nt);
    if (res->divergence >= 0) {
        const ld_replay_pos *p = &res->pos[res->divergence];
        cJSON *d = cJSON_CreateObject();
        cJSON_AddItemToObject(d, "position", ld_json_int(res->divergence));
        cJSON *lg = tok_json(tok, p->id);
        cJSON_AddItemToObject(lg, "rank", ld_json_int(p->rank));
        cJSON_AddItemToObject(lg, "logprob", ld_json_double(p->logprob));
        cJSON_AddItemToObject(d, "logged", lg);
        cJSON *rp = tok_json(tok, p->top1);
        cJSON_AddItemToObject(rp, "logprob", ld_json_double(p->top1_logprob));
        cJSON_AddItemToObject(d, "replay", rp);
        cJSON_AddItemToObject(d, "margin", ld_json_double(p->margin));
        cJSON_AddItemToObject(d, "gap", ld_json_double(p->gap));
        cJSON *top = cJSON_CreateArray();
        for (size_t i = 0; i < res->n_top; i++) {
            cJSON *t = tok_json(tok, res->top[i].id);
            cJSON_AddItemToObject(t, "logprob", ld_json_double(res->top[i].logprob));
            cJSON_AddItemToArray(top, t);
        }
        cJSON_AddItemToObject(d, "top_k", top);
        cJSON_AddItemToObject(o, "divergence", d);
    } else {
        cJSON_AddItemToObject(o, "divergence", cJSON_CreateNull());
    }
    if (res->greedy_from >= 0) {
        cJSON *g = cJSON_CreateObject();
        cJSON_AddItemToObject(g, "from", ld_json_int(res->greedy_from));
        if (res->sampled) {
            char seed[24];
            snprintf(seed, sizeof seed, "%llu", (unsigned long long)res->seed);
            cJSON_AddItemToObject(g, "seed", cJSON_CreateString(seed));
            cJSON_AddItemToObject(g, "temperature", ld_json_double(res->params.temperature));
            cJSON_AddItemToObject(g, "top_k", ld_json_int(res->params.top_k));
            cJSON_AddItemToObject(g, "top_p", ld_json_double(res->params.top_p));
            cJSON_AddItemToObject(g, "min_p", ld_json_double(res->params.min_p));
        }
        cJSON_AddItemToObject(g, "ids", ids_json(res->greedy, res->n_greedy));
        cJSON_AddItemToObject(g, "text", text_json(tok, res->greedy, res->n_greedy));
        cJSON_AddItemToObject(o, res->sampled ? "sampled" : "greedy", g);
        cJSON_AddItemToObject(o, res->sampled ? "greedy" : "sampled", cJSON_CreateNull());
    } else {
        cJSON_AddItemToObject(o, "greedy", cJSON_CreateNull());
        cJSON_AddItemToObject(o, "sampled", cJSON_CreateNull());
    }
    cJSON *rows = cJSON_CreateArray();
    for (size_t i = 0; i < res->n_output; i++) {
        const ld_replay_pos *p = &res->pos[i];
        cJSON *row = cJSON_CreateObject();
        cJSON_AddItemToObject(row, "position", ld_json_int((int64_t)i));
        cJSON_AddItemToObject(row, "logged", tok_json(tok, p->id));
        cJSON_AddItemToObject(row, "rank", ld_json_int(p->rank));
        cJSON_AddItemToObject(row, "logprob", ld_json_double(p->logprob));
        cJSON_AddItemToObject(row, "top1", tok_json(tok, p->top1));
        cJSON_AddItemToObject(row, "top1_logprob", ld_json_double(p->top1_logprob));
        cJSON_AddItemToObject(row, "margin", ld_json_double(p->margin));
        cJSON_AddItemToObject(row, "near_tie", cJSON_CreateBool(p->near_tie));
        cJSON_AddItemToArray(rows, row);
    }
    cJSON_AddItemToObject(o, "positions", rows);
    if (dump_dir) cJSON_AddItemToObject(o, "dump", dump_json(dump_dir, dump));
    ld_json_print_line(cli->out, o);
}

/* Rows shown: the first few, those around the divergence, every one whose
 * logged token is not the replay's top-1, the last; the others (the logged
 * token is the top-1 there) are counted on one line. */
static int shown(const ld_replay_result *res, size_t i)
{
    int64_t P = res->divergence;
    return i < 8 || i + 2 >= res->n_output || res->pos[i].rank > 1 ||
           (P >= 0 && (int64_t)i + 6 >= P && (int64_t)i <= P + 3);
}

static void print_text(struct ld_cli *cli, const ld_request *r, const ld_replay_engine *e,
                       const ld_replay_result *res)
{
    FILE *f = cli->out;
    const ld_tok *tok = ld_replay_engine_tok(e);
    char where[512], a[96], b[96];
    char tpn[96] = "";
    int tp = ld_replay_engine_tp(e), gpus = ld_replay_engine_tp_gpus(e);
    if (tp && gpus && gpus < tp)
        snprintf(tpn, sizeof tpn, ", tp %d on %d GPU%s (the collectives through host memory)", tp, gpus,
                 gpus > 1 ? "s" : "");
    else if (tp) snprintf(tpn, sizeof tpn, ", tp %d", tp);
    fprintf(f, "%s  %s  %s, %zu prompt ids (%s), %zu output ids, top-k %d, backend %s%s\n", r->rid ? r->rid : "-",
            ld_request_where(r, where, sizeof where, NULL), ld_replay_engine_arch(e), res->n_prompt,
            res->prompt_source == LD_REPLAY_PROMPT_IDS ? "logged input_ids" : "the logged text, tokenized",
            res->n_output, res->top_k, ld_replay_engine_backend(e), tpn);
    if (res->n_output) {
        fprintf(f, "     pos  %-26s %6s %9s  %-26s %9s %8s\n", "logged", "rank", "logprob", "replay top-1",
                "logprob", "margin");
        size_t hidden = 0;
        for (size_t i = 0; i < res->n_output; i++) {
            const ld_replay_pos *p = &res->pos[i];
            if (!shown(res, i)) {
                hidden++;
                continue;
            }
            if (hidden) fprintf(f, "     ...  (%zu positions where the logged token is the top-1)\n", hidden);
            hidden = 0;
            const char *mark = (int64_t)i == res->divergence ? ">>" : p->near_tie ? "~ " : p->outside ? "! " : "  ";
            fprintf(f, "  %s%4zu  %-26s %6lld %9.4f  %-26s %9.4f %8.4f%s\n", mark, i, tok_show(tok, p->id, a, sizeof a),
                    (long long)p->rank, p->logprob, tok_show(tok, p->top1, b, sizeof b), p->top1_logprob, p->margin,
                    (int64_t)i == res->divergence ? "  divergence"
                    : p->near_tie                 ? "  near-tie"
                                                  : "");
        }
        if (hidden) fprintf(f, "     ...  (%zu positions where the logged token is the top-1)\n", hidden);
    }
    if (res->greedy_from >= 0) {
        if (res->sampled)
            fprintf(f, "sampled (seed %llu, temperature %g, top-k %lld, top-p %g, min-p %g) from position %lld:",
                    (unsigned long long)res->seed, res->params.temperature,
                    (long long)(res->params.top_k > 0 ? res->params.top_k : -1),
                    isnan(res->params.top_p) ? 1.0 : res->params.top_p,
                    isnan(res->params.min_p) ? 0.0 : res->params.min_p, (long long)res->greedy_from);
        else
            fprintf(f, "greedy from position %lld:", (long long)res->greedy_from);
        for (size_t i = 0; i < res->n_greedy; i++) fprintf(f, " %ld", (long)res->greedy[i]);
        char *text = NULL;
        size_t len = 0;
        if (tok && ld_tok_decode(tok, res->greedy, res->n_greedy, &text, &len, NULL) == LD_OK) {
            char esc[512];
            escape(esc, sizeof esc, text, len, 120);
            fprintf(f, "  \"%s\"", esc);
        }
        free(text);
        fputc('\n', f);
    }
    const char *kind = ld_replay_verdict_kind(res->verdict);
    if (res->verdict == LD_REPLAY_DIVERGENT) {
        const ld_replay_pos *p = &res->pos[res->divergence];
        fprintf(f, "%s at position %lld: logged %s (rank %lld, logprob %.4f), the replay's top-1 %s (logprob %.4f); "
                   "%.4f nats apart, top-two margin %.4f\n",
                kind, (long long)res->divergence, tok_show(tok, p->id, a, sizeof a), (long long)p->rank, p->logprob,
                tok_show(tok, p->top1, b, sizeof b), p->top1_logprob, p->gap, p->margin);
    } else if (res->verdict == LD_REPLAY_CONSISTENT) {
        fprintf(f, "%s: all %zu logged tokens within the replay's top %d", kind, res->n_output, res->top_k);
        if (res->n_near_ties) fprintf(f, " or near-ties (%zu, within %g nats of the top-1)", res->n_near_ties,
                                      res->near_tie);
        if (res->first_not_top1 >= 0)
            fprintf(f, "; first token other than the top-1 at position %lld (margin %.4f)\n",
                    (long long)res->first_not_top1, res->pos[res->first_not_top1].margin);
        else
            fprintf(f, "; each is the replay's top-1\n");
    } else {
        fprintf(f, "%s: %s; the greedy continuation of the prompt is shown\n", kind, res->no_output_reason);
    }
}

static void print_error(struct ld_cli *cli, const char *what, const ld_error *e)
{
    if (e->path) fprintf(cli->err, PFX "%s: %s: %s\n", what, e->path, e->msg);
    else fprintf(cli->err, PFX "%s: %s\n", what, e->msg);
}

/* --batch-with: r alone and batched with the requests picked; the exit
 * status (0 identical, 1 differs, 2 trouble) */
static int batch_mode(struct ld_cli *cli, ld_replay_engine *e, const ld_request *r, const char *rid, const pick *s,
                      int json)
{
    for (size_t i = 0; i < s->n_with; i++)
        if (!s->with_r[i]) {
            fprintf(cli->err, PFX "--batch-with: no request with rid '%s' in the logs given\n", s->with[i]);
            return LD_EXIT_TROUBLE;
        }
    ld_replay_batch_report rep;
    ld_error err;
    ld_error_clear(&err);
    if (ld_replay_batch_check(e, r, (const ld_request *const *)s->with_r, s->n_with, &rep, &err) != LD_OK) {
        print_error(cli, rid, &err);
        return LD_EXIT_TROUBLE;
    }
    ld_print_batch_report(cli->out, r->rid ? r->rid : rid, s->with, s->n_with, &rep, json);
    return rep.first_diff < 0 ? LD_EXIT_SAME : LD_EXIT_DIFF;
}

/* "A-B" or "A" (layer numbers from 0, A <= B): the slice [A, B + 1); 0 or -1 */
static int parse_layers(const char *s, int *first, int *last)
{
    char *end = NULL;
    errno = 0;
    long a = strtol(s, &end, 10), b = a;
    if (end == s || errno || a < 0 || a > 100000 || !isdigit((unsigned char)s[0])) return -1;
    if (*end == '-') {
        const char *t = end + 1;
        if (!isdigit((unsigned char)*t)) return -1;
        b = strtol(t, &end, 10);
        if (errno || b < a || b > 100000) return -1;
    }
    if (*end) return -1;
    *first = (int)a;
    *last = (int)b + 1;
    return 0;
}

int cmd_replay(int argc, char **argv, struct ld_cli *cli)
{
    const char *model = NULL, *rid = NULL, *near_tie = NULL, *seed_arg = NULL, *backend = "cpu";
    const char *dump_dir = NULL, *positions = NULL, *kernels = NULL, *check = NULL, *batch_with = NULL;
    const char *check_layers = NULL;
    int json = 0, compare = 0;
    long threads = 0, top_k = LD_REPLAY_TOP_K, max_tokens = LD_REPLAY_MAX_TOKENS, tp = 0;
    tp_proc proc = { -1, -1, 600, NULL, NULL };
    const ld_option options[] = {
        { LD_OPT_STRING, 0, "model", &model, "DIR", "HF model directory (config.json, *.safetensors) or a GGUF file (required)" },
        { LD_OPT_STRING, 0, "rid", &rid, "RID", "the request to replay (required)" },
        { LD_OPT_BOOL, 0, "json", &json, NULL, "one JSON object" },
        { LD_OPT_INT, 0, "threads", &threads, "N", "threads of the engine (default: the cores)" },
        { LD_OPT_STRING, 0, "backend", &backend, "NAME", "cpu (fast, the default), ref (the plain reference) or cuda (GPU 0)" },
        { LD_OPT_INT, 0, "top-k", &top_k, "K", "a logged token ranked at most K is within reach (default 5, max 64)" },
        { LD_OPT_INT, 0, "max-tokens", &max_tokens, "N", "length of the greedy continuation (default 8; 0: none)" },
        { LD_OPT_STRING, 0, "near-tie", &near_tie, "X", "nats under which a gap is a near-tie (default 0.1; 0: none)" },
        { LD_OPT_STRING, 0, "seed", &seed_arg, "N", "sample the continuation with the logged parameters, seed N (0 to 2^64-1)" },
        { LD_OPT_STRING, 0, "dump-layers", &dump_dir, "DIR", "write the per-layer hidden states as .npy files into DIR" },
        { LD_OPT_STRING, 0, "positions", &positions, "LIST", "with --dump-layers: the positions, e.g. 0,5,10-20,-1 (default all)" },
        { LD_OPT_STRING, 0, "kernels", &kernels, "SPEC", "swap ops for variants: matmul=bf16,rmsnorm=bf16,..." },
        { LD_OPT_BOOL, 0, "compare-kernels", &compare, NULL, "replay once per kernel variant and compare with the reference" },
        { LD_OPT_STRING, 0, "check", &check, "BACKEND", "replay on --backend and on BACKEND too; compare layer by layer" },
        { LD_OPT_STRING, 0, "check-layers", &check_layers, "A-B", "with --check: only layers A to B on BACKEND, fed --backend's rows" },
        { LD_OPT_INT, 0, "tp", &tp, "N", "tensor-parallel ranks (default: no split)" },
        { LD_OPT_INT, 0, "tp-rank", &proc.rank, "R", "with --tp N: this process is rank R of N processes" },
        { LD_OPT_STRING, 0, "tp-rendezvous", &proc.rendezvous, "FILE", "where the processes of the group meet" },
        { LD_OPT_INT, 0, "tp-device", &proc.device, "D", "cuda: this rank's GPU (default LOCAL_RANK, else R; over shm R mod the GPUs)" },
        { LD_OPT_STRING, 0, "tp-transport", &proc.transport, "T", "nccl (cuda's default) or shm (one machine)" },
        { LD_OPT_INT, 0, "tp-timeout", &proc.timeout, "S", "seconds to wait for the group: to join, at each collective (default 600)" },
        { LD_OPT_STRING, 0, "batch-with", &batch_with, "RID,...", "replay alone and batched with these requests; compare the logits and hidden states" },
        LD_OPTION_END
    };
    int n_args = 0;
    int rc = ld_parse_options(argc, argv, replay_usage, options, &n_args, cli->out, cli->err);
    if (rc != LD_PARSE_OK) return rc == LD_PARSE_HELP ? LD_EXIT_SAME : LD_EXIT_TROUBLE;
    double nt = LD_REPLAY_NEAR_TIE;
    char *end = NULL;
    if (near_tie) nt = strtod(near_tie, &end);
    ld_replay_sampling sampling = { 0, { NAN, 0, NAN, NAN } };
    char *send = NULL;
    int bad_seed = 0;
    if (seed_arg) {
        errno = 0;
        unsigned long long v = strtoull(seed_arg, &send, 10);
        bad_seed = send == seed_arg || *send || errno || seed_arg[0] == '-' || seed_arg[0] == '+' ||
                   seed_arg[0] == ' ';
        sampling.seed = (uint64_t)v;
    }
    int first = 0, last = 0;
    int bad_layers = check_layers && parse_layers(check_layers, &first, &last) != 0;
    const char *problem = !model ? "--model DIR is required"
                        : !rid ? "--rid RID is required"
                        : n_args == 0 ? "no log given"
                        : top_k < 1 || top_k > LD_REPLAY_MAX_TOP_K ? "--top-k: give 1 to 64"
                        : max_tokens < 0 || max_tokens > 4096 ? "--max-tokens: give 0 to 4096"
                        : threads < 0 || threads > 1024 ? "--threads: give 1 to 1024"
                        : strcmp(backend, "cpu") && strcmp(backend, "ref") && strcmp(backend, "cuda")
                            ? "--backend: give cpu, ref or cuda"
                        : check && strcmp(check, "cpu") && strcmp(check, "ref") && strcmp(check, "cuda")
                            ? "--check: give cpu, ref or cuda"
                        : check && (compare || dump_dir || seed_arg)
                            ? "--check: not with --compare-kernels, --dump-layers or --seed"
                        : check_layers && !check ? "--check-layers: give it with --check BACKEND"
                        : bad_layers ? "--check-layers: give A-B (0 <= A <= B) or A, layer numbers from 0"
                        : near_tie && (end == near_tie || *end || !(nt >= 0) || isinf(nt))
                            ? "--near-tie: give a number of nats >= 0"
                        : bad_seed ? "--seed: give an integer from 0 to 18446744073709551615"
                        : positions && !dump_dir ? "--positions: give it with --dump-layers DIR"
                        : compare && (dump_dir || kernels || seed_arg)
                            ? "--compare-kernels: not with --dump-layers, --kernels or --seed"
                        : dump_dir && !dump_dir[0] ? "--dump-layers: give a directory"
                        : tp < 0 || tp > 64 ? "--tp: give 1 to 64"
                        : batch_with && (check || compare || dump_dir || seed_arg)
                            ? "--batch-with: not with --check, --compare-kernels, --dump-layers or --seed"
                            : NULL;
    char tp_msg[96];
    if (!problem) problem = tp_proc_resolve(&proc, tp, tp_msg, sizeof tp_msg);
    if (problem) {
        fprintf(cli->err, PFX "%s\n", problem);
        return LD_EXIT_TROUBLE;
    }
    ld_replay_positions want = { NULL, 0 };
    ld_error perr;
    ld_error_clear(&perr);
    if (kernels && ld_replay_kernels_check(backend, kernels, &perr) != LD_OK) {
        fprintf(cli->err, PFX "--kernels: %s\n", perr.msg);
        return LD_EXIT_TROUBLE;
    }
    if (positions && ld_replay_positions_parse(positions, &want, &perr) != LD_OK) {
        fprintf(cli->err, PFX "--positions: %s\n", perr.msg);
        return LD_EXIT_TROUBLE;
    }
    if (threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        threads = n < 1 ? 1 : n > 64 ? 64 : n;
    }

    pick s = { rid, NULL, NULL, 0, 0, 0, NULL, NULL, 0 };
    char *with_buf = NULL;
    if (batch_with) {
        char msg[256];
        if (ld_batch_rids_parse(batch_with, rid, &with_buf, &s.with, &s.n_with, msg, sizeof msg) != 0 ||
            !(s.with_r = calloc(s.n_with, sizeof *s.with_r))) {
            fprintf(cli->err, PFX "%s\n", s.with ? msg : "out of memory");
            free(with_buf);
            free(s.with);
            return LD_EXIT_TROUBLE;
        }
    }
    ld_pair_options popts = { 0 };
    popts.flags = LD_PAIR_KEEP_TEXT | LD_PAIR_KEEP_VALUES | LD_PAIR_KEEP_INTERNAL;
    popts.only_rid = batch_with ? NULL : rid; /* several requests kept: every record's values */
    ld_logread lr = { cli, 0, 0, { 0 }, { 0 } };
    int status = LD_EXIT_TROUBLE;
    FILE *quiet = NULL, *report = cli->out;
    ld_replay_engine *e = NULL;
    ld_replay_result res = { 0 };
    ld_replay_dump dump = { .want = &want };
    ld_error err;
    ld_error_clear(&err);
    if (ld_logread_run(&lr, argv + 1, n_args, &popts, on_request, &s) != 0 || lr.stats.io_errors) goto out;
    ld_request *r = s.exact;
    if (!r && s.n_sub == 1) r = s.sub;
    if (!r) {
        if (s.n_sub > 1)
            fprintf(cli->err, PFX "'%s' is a batch of %zu requests: give the rid of one of them\n", rid, s.n_sub);
        else
            fprintf(cli->err, PFX "no request with rid '%s' in the logs given\n", rid);
        goto out;
    }
    if (s.n_exact > 1)
        fprintf(cli->err, PFX "warning: %zu requests have rid '%s'; replaying the first\n", s.n_exact, rid);
    if (dump_dir && ld_replay_dump_mkdir(dump_dir, &err) != LD_OK) {
        fprintf(cli->err, PFX "--dump-layers: %s\n", err.msg);
        goto out;
    }
    /* with --tp the engine's own backend is made by the split (replay.h), once a process's GPU is known */
    if (ld_replay_engine_open(model, tp ? "cpu" : backend, (int)threads, &e, &err) != LD_OK) {
        print_error(cli, model, &err);
        goto out;
    }
    if (kernels && !tp && ld_replay_engine_set_backend(e, backend, kernels, (int)threads, &err) != LD_OK) {
        fprintf(cli->err, PFX "%s\n", err.msg);
        goto out;
    }
    if (tp && ld_replay_engine_set_tp(e, (int)tp, 1, backend, kernels, (int)threads, &err) != LD_OK) {
        fprintf(cli->err, PFX "--tp %ld: %s\n", tp, err.msg);
        goto out;
    }
    if (proc.rendezvous) {
        ld_replay_tp_rank tr = { (int)proc.rank, proc.rendezvous, (int)proc.device, (double)proc.timeout,
                                 proc.transport };
        if (ld_replay_engine_join_tp(e, &tr, &err) != LD_OK) {
            fprintf(cli->err, PFX "--tp-rank %ld: %s\n", proc.rank, err.msg);
            goto out;
        }
        if (proc.rank > 0 && !(quiet = fopen("/dev/null", "w"))) {
            fprintf(cli->err, PFX "/dev/null: %s\n", strerror(errno));
            goto out;
        }
    }
    if (quiet) cli->out = quiet; /* rank 0 reports; the other ranks compute the same, quietly */
    ld_replay_opts ro = { (int)top_k, max_tokens == 0 ? -1 : (int)max_tokens, nt };
    if (batch_with) {
        status = batch_mode(cli, e, r, rid, &s, json);
        goto out;
    }
    if (check) {
        ld_backend_cmp cmp;
        if (ld_replay_check_backends(e, r, &ro, backend, kernels, check, first, last, (int)threads, &cmp, &err) !=
            LD_OK) {
            print_error(cli, check, &err);
            goto out;
        }
        ld_print_backend_cmp(cli->out, r->rid ? r->rid : rid, &cmp, json);
        ld_backend_cmp_free(&cmp);
        status = LD_EXIT_SAME;
        goto out;
    }
    if (compare) {
        ld_kernel_cmp_report rep;
        if (ld_replay_compare_kernels(e, r, &ro, backend, (int)threads, &rep, &err) != LD_OK) {
            print_error(cli, rid, &err);
            goto out;
        }
        ld_print_kernel_cmp(cli->out, r->rid ? r->rid : rid, &rep, json);
        ld_kernel_cmp_report_free(&rep);
        status = LD_EXIT_SAME;
        goto out;
    }
    if (seed_arg) sampling.params = ld_sample_params_of(r);
    if (ld_replay_request_dump(e, r, &ro, seed_arg ? &sampling : NULL, dump_dir ? &dump : NULL, &res, &err) !=
        LD_OK) {
        if (err.code == LD_ERR_USAGE && dump_dir) fprintf(cli->err, PFX "--positions: %s\n", err.msg);
        else print_error(cli, rid, &err);
        goto out;
    }
    if (dump_dir && ld_replay_dump_write(dump_dir, &dump, e, r->rid, &err) != LD_OK) {
        fprintf(cli->err, PFX "--dump-layers: %s\n", err.msg);
        goto out;
    }
    if (!json && res.prompt_source == LD_REPLAY_PROMPT_TOKENIZED)
        fprintf(cli->err, PFX "note: the log holds no complete input_ids for '%s': its prompt text was tokenized with "
                          "%s/tokenizer.json, special tokens parsed, nothing added\n", rid, model);
    if (!json && res.output_cut) {
        char total[32] = "?";
        if (res.n_output_logged >= 0) snprintf(total, sizeof total, "%lld", (long long)res.n_output_logged);
        fprintf(cli->err, PFX "note: the logger cut the output_ids of '%s': the %zu it kept from the start (of %s) "
                          "were teacher-forced; the verdict covers those\n", rid, res.n_output, total);
    }
    if (!json && seed_arg && !res.sampled && res.greedy_from >= 0)
        fprintf(cli->err, PFX "note: --seed: '%s' logged temperature %g: the continuation is greedy\n", rid,
                r->temperature);
    if (!json && dump_dir)
        fprintf(cli->err, PFX "note: hidden states of %zu of the %zu positions, %d planes of %d floats, written to "
                          "%s (manifest.json)\n", dump.n_pos, dump.seq_len, dump.n_layers + 2, dump.hidden, dump_dir);
    if (json) print_json(cli, r, e, &res, dump_dir, &dump);
    else print_text(cli, r, e, &res);
    status = res.verdict == LD_REPLAY_DIVERGENT ? LD_EXIT_DIFF : LD_EXIT_SAME;
out:
    cli->out = report;
    if (quiet) fclose(quiet);
    ld_replay_dump_free(&dump);
    ld_replay_positions_free(&want);
    ld_replay_result_free(&res);
    ld_replay_engine_close(e);
    ld_request_free(s.exact);
    ld_request_free(s.sub);
    for (size_t i = 0; s.with_r && i < s.n_with; i++) ld_request_free(s.with_r[i]);
    free(s.with_r);
    free(s.with);
    free(with_buf);
    return status;
}
