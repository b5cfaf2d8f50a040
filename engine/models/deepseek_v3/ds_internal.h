/* ds_internal.h - what the DeepSeek-V3 / V3.2 session's files share: the
 * session's state (ld_ds_session: weights, caches, buffers, host scratch)
 * and its layers' weights.  ds_session.c makes, loads and frees it;
 * ds_attention.c runs MLA (naive, absorbed or split-K; V3.2's indexer);
 * ds_forward.c runs the rest of a layer (router, experts), chunks and
 * batches.  Internal to engine/models/deepseek_v3/. */
#ifndef LD_DS_INTERNAL_H
#define LD_DS_INTERNAL_H

#include "ds_forward.h"
#include "engine/models/batch.h"
#include "engine/models/session_args.h"
#include "kernels/ref/ref_ds.h"
#include "kernels/ref/ref_ds_variants.h"
#include "kernels/ref/ref_ops.h"
#include "kernels/ref/ref_variants.h"

/* an MLP's three projections, as the backend's moe entry takes them */
typedef ld_moe_expert ds_mlp;

typedef struct ds_layer {
    ld_weight *attn_norm, *q_a, *q_a_bias, *q_a_norm, *q_b, *q, *kv_a, *kv_a_bias, *kv_a_norm, *kv_b, *o, *o_bias;
    ld_weight *ffn_norm, *router;
    ds_mlp mlp;          /* dense MLP or the shared experts */
    ds_mlp *experts;     /* [E] (MoE layers) */
    float *router_bias;  /* [E] fp32 host copy */
    ld_buf *ckv, *kpe;   /* the latent cache: [max_seq][c], [max_seq][dr] */
    /* V3.2: the indexer's weights, its LayerNorm (fp32 host copies), its
     * key cache [max_seq][di] */
    ld_weight *idx_wq_b, *idx_wk, *idx_weights;
    float *idx_norm_w, *idx_norm_b;
    ld_buf *ik;
} ds_layer;

/* a sequence's rows in a batch's chunk (ld_ds_session_eval_batch): its
 * session (its position and caches), rows [row, row + n) of the lead's
 * buffers */
typedef struct ds_part {
    ld_ds_session *s;
    int row, n;
} ds_part;

struct ld_ds_session {
    const ld_ds_model *m;
    ld_backend *be;
    int max_seq, max_batch, pos;
    ld_ds_attn attn;
    ld_cpu_kernels k; /* the session-level variants (mla, router, combine, indexer, rope) */
    float *inv_freq;
    float scale, attn_factor;
    ld_weight *embed, *norm, *lm_head;
    ds_layer *layers;
    /* backend buffers (B = max_batch rows, S = max_seq) */
    ld_buf *x, *xb, *qa, *q, *kva, *ckv_raw, *ckvn, *kvb, *att, *g, *u, *y, *xe, *rl, *logits;
    ld_buf *bqabs, *bolat; /* the backend's q_abs, o_lat [B][H][c] (absorbed forms) */
    /* host scratch */
    float *hq, *hkva, *hckv, *hkpe, *hkvb, *hcache, *hatt, *scores, *hx, *hy, *hxe, *hrl, *wts, *sel_w, *qabs, *olat;
    float *part; /* mla=splitk: one split's partial output [c] */
    int32_t *idx;
    int *sel_t;
    /* V3.2: kc = min(index_topk, max_seq) selected positions per query */
    int kc;
    ld_buf *iq, *ikn, *iw;                   /* [B][Hi*di], [B][di], [B][Hi] */
    float *hiq, *hikn, *hiw, *hik, *iscores; /* host copies; keys [S][di]; [S] */
    int32_t *sel, *heap;                     /* [B][kc], [kc] */
    int moe_host; /* 1: the MoE on the host loop (no moe entry, or a combine it lacks) */
    ld_ds_reduce_fn reduce;                  /* tensor parallelism: NULL = none */
    void *reduce_ctx;
    /* a batch's chunk, this session leading (its weights and scratch): the
       sequences whose attention runs on their rows, and the round's rows
       (batch.h: where each part's rows and hidden planes go); NULL outside one */
    const struct ds_part *parts;
    const ld_batch_rows *rows;
    int nparts;
    int borrowed; /* 1: the weights are a lead's (ld_ds_session_create_sibling) */
    int first, last; /* the layers it runs: all, or a slice's (ld_ds_session_create_slice) */
    int slice;       /* 1: a slice's session (no embeddings, final norm or head) */
};

#define OPS(s) ((s)->be->ops)

/* ds_attention.c: layer l's attention on the session's n rows (alone), or
 * on each part's rows of a batch's chunk (s->parts) */
ld_status ld_ds_attention(ld_ds_session *s, int l, int n, ld_error *err);
ld_status ld_ds_attention_parts(ld_ds_session *s, int l, int n, ld_error *err);

#endif /* LD_DS_INTERNAL_H */
