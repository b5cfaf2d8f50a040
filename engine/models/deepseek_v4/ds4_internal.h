/* ds4_internal.h - what the DeepSeek-V4 session's files share:
 * the session, its layers, compressors and batch parts, and the functions
 * one file calls in another (ds4_session.c makes sessions,
 * ds4_attention.c runs the attention, ds4_forward.c the
 * rest of a layer, the evals and batches).  Included by those files only. */
#ifndef LD_DS4_INTERNAL_H
#define LD_DS4_INTERNAL_H

#include "ds4_forward.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend/host_tensor.h"
#include "kernels/ref/ref_ds.h"
#include "kernels/ref/ref_ds4.h"
#include "kernels/ref/ref_ds_variants.h"
#include "kernels/ref/ref_ops.h"
#include "kernels/ref/ref_variants.h"
#include "engine/models/batch.h"
#include "engine/models/session_args.h"

/* an MLP's gate, up and down weights: the moe entry's expert */
typedef ld_moe_expert ds4_mlp;

/* a compressor's weights and state */
typedef struct ds4_comp {
    ld_weight *wkv, *wgate;
    float *ape, *norm;       /* [r][width], [dim] fp32 host copies */
    int width, dim, ratio, overlap;
    float *kv, *gate;        /* [2 ratio][width]: the last positions' projections
                                (position p in row p % (2 ratio)) */
    float *skv, *sgate;      /* [2 ratio][width]: one entry's slots, in order */
    float *entries;          /* [max_seq / ratio][dim]: normalised, rotated */
    /* attention on the backend (entries): the rings and entries above in
       backend buffers, ape and norm copies */
    ld_buf *bkv, *bgate, *bent, *bape, *bnorm;
} ds4_comp;

typedef struct ds4_layer {
    ld_weight *attn_norm, *ffn_norm, *wq_a, *q_norm, *wq_b, *wkv, *kv_norm, *wo_b, *router;
    ld_weight **wo_a;        /* [G]: views of wo_a's blocks of rows */
    float *hc_attn[3], *hc_ffn[3];  /* fn, base, scale */
    ld_buf *hc_fn[2];        /* attention's and the MoE's fn for hc_pre */
    float *sinks, *router_bias;
    ds4_mlp shared, *experts;
    float *kvc;              /* [kv_rows][hd] rotated kv, position p in row
                                p % kv_rows */
    int has_comp, has_index;
    ds4_comp comp, icomp;
    ld_weight *iwq_b, *iweights;
    /* the projections that share an input, as matmul_fanout takes them:
       {wq_a, wkv} of the block's input; {wq_b, iwq_b} of the q latent */
    ld_weight *down[2], *up[2], *down_norm[2]; /* down_norm: {q_norm, kv_norm} */
    /* the attention input's other projections, as matmul_fanout takes them:
       the compressor's kv and gate, the indexer's compressor's, its weights */
    ld_weight *xw[5];
    int nxw;
    /* attention on the backend (entries): the kv ring, the sinks */
    ld_buf *bkvc, *bsinks;
} ds4_layer;

/* a sequence's rows in a batch's chunk (ld_ds4_session_eval_batch): its
 * session (its position, rings and entries), rows [row, row + n) of the
 * lead's buffers */
typedef struct ds4_part {
    ld_ds4_session *s;
    int row, n;
} ds4_part;

struct ld_ds4_session {
    ld_cpu_kernels k; /* the session-level variants (combine, mhc, indexer, rope) */
    const ld_ds4_model *m;
    ld_backend *be;
    int max_seq, max_batch, pos, kv_rows;
    float *inv_main, *inv_comp, af_main, af_comp;
    ld_weight *embed, *norm, *lm_head;
    float *hc_head[3];
    ds4_layer *layers;
    /* backend buffers (B = max_batch rows) */
    ld_buf *x, *xb, *qa, *q, *kv, *ckv, *cg, *iq, *iw, *att, *og, *ogall, *ao, *rl, *g, *u, *xe, *logits;
    /* the mHC ops' buffers (backends with hc_pre / hc_post): streams in and
       out, post, comb, the block's output */
    ld_buf *bst, *bnst, *bpost, *bcomb, *bf;
    int hc_host; /* 1: the mHC mixing on the host (no entries, or a variant
                    the backend lacks) */
    /* where the current streams are (at least one): s->bst on the backend,
       which the entries keep from site to site without a copy to the host,
       and / or the host's s->streams (the host path, the hidden planes) */
    int st_dev, st_host;
    /* MoE on the backend (entry) */
    ld_buf *bmoe; /* the MoE block's output [B][D] (backends with moe) */
    int moe_host; /* 1: the host loop (no entry, or a variant it refuses) */
    int want_route; /* 1: this chunk's experts are recorded (s->idx read after each layer) */
    /* host scratch */
    float *streams, *nstreams, *post, *comb, *hu, *hf, *hq, *hkv, *hatt, *hgrp, *hog, *hiq, *hiw, *hrl, *hx, *hy,
        *hxe, *hg, *hup, *wts, *sel_w, *scores, *hcs, *ent, *hck, *hcg;
    const float **keys;
    int32_t *idx, *pick, *hrows; /* hrows: ds4_route's hash rows [B][K] */
    int32_t *rep;                /* a chunk's tokens, each hc_mult times [B][N] */
    int *sel_t;
    /* attention on the backend (entries) */
    int att_entries; /* 1: the backend has every V4 attention entry (and the buffers exist) */
    int att_be;      /* 1: the KV rings and entries live in the backend buffers (else the host arrays) */
    ld_buf *bao;     /* [B][H*hd] the attention's output (de-rotated) */
    ld_buf *ickv, *icg; /* [B][2 ih] the indexer's compressor's projections (the
                           main one's: ckv, cg; all of a layer's L->xw at once) */
    ld_buf *bfreq[2]; /* inv_main, inv_comp [rope_dim/2] */
    ld_buf *bhfn, *bhx; /* ds4_hc_head's fn [N][N*D] and streams [B][N][D] */
    int32_t *isel;   /* [B][ksel] the indexer's picks */
    int ksel;        /* index_topk, at most max_seq (no more entries exist) */
    ld_ds4_reduce_fn reduce; /* tensor parallelism: NULL = none */
    void *reduce_ctx;
    /* a batch's chunk, this session leading (its weights and scratch): the
       sequences whose attention runs on their rows, and the round's rows
       (batch.h: where each part's rows and hidden planes go); NULL outside one */
    const ds4_part *parts;
    const ld_batch_rows *rows;
    int nparts;
    int borrowed; /* 1: the weights are a lead's (ld_ds4_session_create_sibling) */
    int first, last; /* the layers it runs: all, or a slice's (ld_ds4_session_create_slice) */
    int slice;       /* 1: a slice's session (no embeddings, head collapse, final norm or lm head) */
    /* ld_ds4_session_eval_streams: the streams entering layer tap_layer
       (n_layers: after the last) copied to tap [T][N][D]; NULL: none */
    float *tap;
    int tap_layer;
};

#define OPS(s) ((s)->be->ops)

static inline size_t max2(size_t a, size_t b)
{
    return a > b ? a : b;
}

/* ---- ds4_attention.c */

/* attention of the n rows of s->xb (positions s->pos...) into s->ao: on
 * the backend's entries, or the host leaves (where the state is decided
 * once a chunk, at layer 0); picks (NULL: none) the indexer's */
ld_status ld_ds4_attention(ld_ds4_session *s, int l, int n, int32_t *picks, ld_error *err);

/* a batch's attention of layer l (s leading the chunk, s->parts its
 * sequences) */
ld_status ld_ds4_attention_parts(ld_ds4_session *s, int l, int n, ld_error *err);

#endif /* LD_DS4_INTERNAL_H */
