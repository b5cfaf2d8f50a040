/* lm.c - the model interface of engine.h (ld_lm_*): opens a model of any
 * family and dispatches each session call to the family's own session, or
 * to tp/tp_forward.c's for a split one. */
#include "engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/backend/backend.h"
#include "engine/backend/cpu_kernels.h"
#include "engine/formats/config_json.h"
#include "engine/models/deepseek_v3/ds_config.h"
#include "engine/models/deepseek_v3/ds_forward.h"
#include "engine/models/deepseek_v3/ds_model.h"
#include "engine/models/deepseek_v4/ds4_config.h"
#include "engine/models/deepseek_v4/ds4_forward.h"
#include "engine/models/deepseek_v4/ds4_model.h"
#include "engine/models/dense/forward.h"
#include "engine/models/dense/model.h"
#include "engine/models/finite.h"
#include "engine/tp/tp_ds_shard.h"
#include "engine/tp/tp_ds4_shard.h"
#include "engine/tp/tp_forward.h"
#include "engine/tp/tp_shard.h"

struct ld_lm {
    ld_model *dense;   /* one of the three */
    ld_ds_model *ds;
    ld_ds4_model *ds4;
    ld_lm_info info;
};

struct ld_lm_session {
    const ld_lm_info *info; /* its model's */
    int max_batch;          /* tokens a chunk, at most (ld_lm_eval_checked's chunks) */
    ld_session *dense;
    ld_tp_session *tp;
    ld_ds_session *ds;
    ld_ds4_session *ds4;
};

enum { FAMILY_DENSE = 0, FAMILY_DS = 1, FAMILY_DS4 = 2 };

/* Which family `dir`/config.json names (a file that cannot be read is
 * dense: the dense loader then says what is wrong with it) */
static int family_of_dir(const char *dir)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s/config.json", dir) >= (int)sizeof path) return 0;
    char *text = NULL;
    size_t len = 0;
    if (ld_cfg_read_file(path, &text, &len, NULL) != LD_OK) return FAMILY_DENSE;
    int fam = ld_ds4_config_detect(text, len) ? FAMILY_DS4 : ld_ds_config_detect(text, len) ? FAMILY_DS : FAMILY_DENSE;
    free(text);
    return fam;
}

ld_status ld_lm_open(const char *path, ld_lm **out, ld_error *err)
{
    *out = NULL;
    ld_lm *lm = calloc(1, sizeof *lm);
    if (!lm) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    char *gguf = NULL;
    ld_status st = ld_model_find_gguf(path, &gguf, err);
    int fam = st == LD_OK && !gguf ? family_of_dir(path) : FAMILY_DENSE;
    if (st == LD_OK && fam == FAMILY_DS4) st = ld_ds4_model_open(path, &lm->ds4, err);
    else if (st == LD_OK && fam == FAMILY_DS) st = ld_ds_model_open(path, &lm->ds, err);
    else if (st == LD_OK) st = gguf ? ld_model_open_gguf(gguf, &lm->dense, err) : ld_model_open(path, &lm->dense, err);
    if (st != LD_OK) {
        if (gguf && err && err->path == gguf) err->path = path;
        free(gguf);
        free(lm);
        return st;
    }
    free(gguf);
    if (lm->ds4) {
        const ld_ds4_config *c = &lm->ds4->cfg;
        unsigned f = LD_KF_DEEPSEEK | LD_KF_MHC;
        for (int l = 0; l < c->n_layers; l++)
            if (c->layer_type[l] == LD_DS4_CSA) f |= LD_KF_INDEXER;
        lm->info = (ld_lm_info){"DeepseekV4ForCausalLM", c->vocab, c->max_pos, c->n_layers, c->hidden, f,
                                c->hc_mult * c->hidden};
    } else if (lm->ds) {
        const ld_ds_config *c = &lm->ds->cfg;
        const char *arch = c->v32 ? "DeepseekV32ForCausalLM" : "DeepseekV3ForCausalLM";
        unsigned f = LD_KF_DEEPSEEK | LD_KF_MLA | (c->v32 ? LD_KF_INDEXER : 0u);
        lm->info = (ld_lm_info){arch, c->vocab, c->max_pos, c->n_layers, c->hidden, f, c->hidden};
    } else {
        const ld_model_config *c = &lm->dense->cfg;
        lm->info = (ld_lm_info){c->arch_name, c->vocab, c->max_pos, c->n_layers, c->hidden, 0, c->hidden};
    }
    *out = lm;
    return LD_OK;
}

const ld_lm_info *ld_lm_info_of(const ld_lm *lm)
{
    return &lm->info;
}

void ld_lm_close(ld_lm *lm)
{
    if (!lm) return;
    ld_model_close(lm->dense);
    ld_ds_model_close(lm->ds);
    ld_ds4_model_close(lm->ds4);
    free(lm);
}

/* an empty session of the model of `info`, chunks of max_batch tokens
 * (NULL: out of memory) */
static ld_lm_session *session_new(const ld_lm_info *info, int max_batch)
{
    ld_lm_session *s = calloc(1, sizeof *s);
    if (s) s->info = info, s->max_batch = max_batch > 0 ? max_batch : 1;
    return s;
}

/* the MLA form `k` asks for (NULL: the naive one) */
static ld_ds_attn mla_form(const ld_cpu_kernels *k)
{
    ld_kvar mla = k ? k->v[LD_KOP_MLA] : LD_KV_REF;
    return mla == LD_KV_ABSORBED ? LD_DS_ATTN_ABSORBED : mla == LD_KV_SPLITK ? LD_DS_ATTN_SPLITK : LD_DS_ATTN_NAIVE;
}

ld_status ld_lm_session_create(const ld_lm *lm, ld_backend *be, const ld_cpu_kernels *k, int max_seq,
                               int max_batch, ld_lm_session **out, ld_error *err)
{
    ld_ds_attn form = mla_form(k);
    *out = NULL;
    ld_lm_session *s = session_new(&lm->info, max_batch);
    if (!s) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    ld_status st = lm->ds4 ? ld_ds4_session_create(lm->ds4, be, max_seq, max_batch, &s->ds4, err)
                   : lm->ds ? ld_ds_session_create(lm->ds, be, max_seq, max_batch, form, &s->ds, err)
                            : ld_session_create(lm->dense, be, max_seq, max_batch, &s->dense, err);
    if (st != LD_OK) {
        free(s);
        return st;
    }
    if (s->ds4 && k) ld_ds4_session_set_kernels(s->ds4, k);
    if (s->ds && k) ld_ds_session_set_kernels(s->ds, k);
    *out = s;
    return LD_OK;
}

ld_status ld_lm_tp_check(const ld_lm *lm, int n, ld_error *err)
{
    if (lm->ds4) return ld_tp_ds4_check(lm->ds4, n, err);
    if (lm->ds) return ld_tp_ds_check(lm->ds, n, err);
    return ld_tp_check_config(&lm->dense->cfg, n, err);
}

/* DeepSeek's MLA form and session-level variants from the ranks' kernel
 * spec (what ld_lm_session_create reads from `k`; V4 uses the variants
 * only); the CUDA backend's spec has another syntax and leaves the
 * defaults */
static ld_status ds_kernels_of(const ld_tp_opts *tp, ld_cpu_kernels *k, ld_ds_attn *form, ld_error *err)
{
    *k = ld_cpu_kernels_default(0);
    if (!tp->backend || strcmp(tp->backend, "cuda") != 0) LD_TRY(ld_cpu_kernels_parse(tp->kernels, k, err));
    ld_kvar mla = k->v[LD_KOP_MLA];
    *form = mla == LD_KV_ABSORBED ? LD_DS_ATTN_ABSORBED : mla == LD_KV_SPLITK ? LD_DS_ATTN_SPLITK : LD_DS_ATTN_NAIVE;
    return LD_OK;
}

ld_status ld_lm_session_create_tp(const ld_lm *lm, const ld_tp_opts *tp, int max_seq, int max_batch,
                                  ld_lm_session **out, ld_error *err)
{
    *out = NULL;
    LD_TRY(ld_lm_tp_check(lm, tp->n, err));
    ld_cpu_kernels k = ld_cpu_kernels_default(0);
    ld_ds_attn form = LD_DS_ATTN_NAIVE;
    if (lm->ds || lm->ds4) LD_TRY(ds_kernels_of(tp, &k, &form, err));
    ld_lm_session *s = session_new(&lm->info, max_batch);
    if (!s) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    ld_status st = lm->ds4 ? ld_tp_ds4_session_create(lm->ds4, tp, &k, max_seq, max_batch, &s->tp, err)
                   : lm->ds ? ld_tp_ds_session_create(lm->ds, tp, form, &k, max_seq, max_batch, &s->tp, err)
                            : ld_tp_session_create(lm->dense, tp, max_seq, max_batch, &s->tp, err);
    if (st != LD_OK) {
        free(s);
        return st;
    }
    *out = s;
    return LD_OK;
}

ld_status ld_lm_session_create_slice(const ld_lm *lm, ld_backend *be, const ld_cpu_kernels *k, int first, int last,
                                     int max_seq, int max_batch, ld_lm_session **out, ld_error *err)
{
    *out = NULL;
    ld_lm_session *s = session_new(&lm->info, max_batch);
    if (!s) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    ld_status st = lm->ds4 ? ld_ds4_session_create_slice(lm->ds4, be, first, last, max_seq, max_batch, &s->ds4, err)
                   : lm->ds ? ld_ds_session_create_slice(lm->ds, be, first, last, max_seq, max_batch, mla_form(k),
                                                         &s->ds, err)
                            : ld_session_create_slice(lm->dense, be, first, last, max_seq, max_batch, &s->dense, err);
    if (st == LD_OK && s->ds4 && k) ld_ds4_session_set_kernels(s->ds4, k);
    if (st == LD_OK && s->ds && k) ld_ds_session_set_kernels(s->ds, k);
    if (st != LD_OK) {
        free(s);
        return st;
    }
    *out = s;
    return LD_OK;
}

ld_status ld_lm_eval_slice(ld_lm_session *s, const int32_t *tokens, const float *x, int T, float *out,
                           ld_error *err)
{
    if (s->ds4) return ld_ds4_session_eval_slice(s->ds4, tokens, x, T, out, err);
    if (s->ds) return ld_ds_session_eval_slice(s->ds, x, T, out, err);
    if (!s->dense) return LD_FAIL(err, LD_ERR_USAGE, 0, "not a layer slice's session (ld_lm_session_create_slice)");
    return ld_session_eval_slice(s->dense, x, T, out, err);
}

ld_status ld_lm_eval(ld_lm_session *s, const int32_t *tokens, int T, float *logits, float *hidden, ld_error *err)
{
    if (s->ds4) return ld_ds4_session_eval(s->ds4, tokens, T, logits, hidden, NULL, err);
    if (s->ds) return ld_ds_session_eval(s->ds, tokens, T, logits, hidden, NULL, err);
    if (s->tp) return ld_tp_session_eval(s->tp, tokens, T, logits, hidden, err);
    return ld_session_eval(s->dense, tokens, T, logits, hidden, err);
}

/* the one-stream families' state: hidden [n_layers + 2][T][D] (NULL: made
 * here for the copy) plane `layer` into state [T][D] */
static ld_status eval_plane(ld_lm_session *s, const int32_t *tokens, int T, float *logits, float *hidden, int layer,
                            float *state, ld_error *err)
{
    const ld_lm_info *c = s->info;
    if (layer < 0 || layer > c->n_layers)
        return LD_FAIL(err, LD_ERR_USAGE, 0, "the state entering layer %d: the model has %d layers", layer,
                       c->n_layers);
    size_t plane = (size_t)T * (size_t)c->hidden;
    float *h = hidden ? hidden : malloc(((size_t)c->n_layers + 2) * plane * sizeof *h);
    if (!h) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    ld_status st = ld_lm_eval(s, tokens, T, logits, h, err);
    if (st == LD_OK) memcpy(state, h + (size_t)layer * plane, plane * sizeof *state);
    if (h != hidden) free(h);
    return st;
}

ld_status ld_lm_eval_state(ld_lm_session *s, const int32_t *tokens, int T, float *logits, float *hidden, int layer,
                           float *state, ld_error *err)
{
    if (!state) return ld_lm_eval(s, tokens, T, logits, hidden, err);
    /* V4's streams: its sessions (a TP one before any rank runs) check the layer */
    if (s->ds4) return ld_ds4_session_eval_streams(s->ds4, tokens, T, logits, hidden, layer, state, err);
    if (s->tp && s->info->state_width != s->info->hidden)
        return ld_tp_session_eval_streams(s->tp, tokens, T, logits, hidden, layer, state, err);
    return eval_plane(s, tokens, T, logits, hidden, layer, state, err);
}

ld_status ld_lm_session_create_sibling(const ld_lm_session *lead, int max_seq, ld_lm_session **out, ld_error *err)
{
    *out = NULL;
    ld_lm_session *s = session_new(lead->info, lead->max_batch);
    if (!s) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    ld_status st = lead->tp    ? ld_tp_session_create_sibling(lead->tp, max_seq, &s->tp, err)
                   : lead->ds4 ? ld_ds4_session_create_sibling(lead->ds4, max_seq, &s->ds4, err)
                   : lead->ds ? ld_ds_session_create_sibling(lead->ds, max_seq, &s->ds, err)
                              : ld_session_create_sibling(lead->dense, max_seq, &s->dense, err);
    if (st != LD_OK) {
        free(s);
        return st;
    }
    *out = s;
    return LD_OK;
}

/* the parts as family f's, then its eval_batch */
static ld_status batch_family(const ld_lm_part *parts, int n, int f, ld_error *err)
{
    ld_session_part *dp = f == FAMILY_DENSE ? calloc((size_t)n, sizeof *dp) : NULL;
    ld_ds_session_part *sp = f == FAMILY_DS ? calloc((size_t)n, sizeof *sp) : NULL;
    ld_ds4_session_part *vp = f == FAMILY_DS4 ? calloc((size_t)n, sizeof *vp) : NULL;
    if (!dp && !sp && !vp) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    ld_status st = LD_OK;
    for (int i = 0; i < n && st == LD_OK; i++) {
        const ld_lm_part *p = &parts[i];
        int same = p->s && (f == FAMILY_DS4 ? p->s->ds4 != NULL : f == FAMILY_DS ? p->s->ds != NULL
                                                                               : p->s->dense != NULL);
        if (!same)
            st = LD_FAIL(err, LD_ERR_USAGE, 0, "batch part %d: not a session of the first part's model family", i);
        else if (vp) vp[i] = (ld_ds4_session_part){p->s->ds4, p->tokens, p->T, p->logits, p->hidden};
        else if (sp) sp[i] = (ld_ds_session_part){p->s->ds, p->tokens, p->T, p->logits, p->hidden};
        else dp[i] = (ld_session_part){p->s->dense, p->tokens, p->T, p->logits, p->hidden};
    }
    if (st == LD_OK)
        st = vp ? ld_ds4_session_eval_batch(vp, n, err)
             : sp ? ld_ds_session_eval_batch(sp, n, err) : ld_session_eval_batch(dp, n, err);
    free(dp);
    free(sp);
    free(vp);
    return st;
}

/* the parts as a tensor-parallel group's (tp_forward.h) */
static ld_status batch_tp(const ld_lm_part *parts, int n, ld_error *err)
{
    ld_tp_session_part *tp = calloc((size_t)n, sizeof *tp);
    if (!tp) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    ld_status st = LD_OK;
    for (int i = 0; i < n && st == LD_OK; i++) {
        if (!parts[i].s || !parts[i].s->tp)
            st = LD_FAIL(err, LD_ERR_USAGE, 0, "batch part %d: not a tensor-parallel session like the first", i);
        else tp[i] = (ld_tp_session_part){parts[i].s->tp, parts[i].tokens, parts[i].T, parts[i].logits,
                                          parts[i].hidden};
    }
    if (st == LD_OK) st = ld_tp_session_eval_batch(tp, n, err);
    free(tp);
    return st;
}

ld_status ld_lm_eval_batch(const ld_lm_part *parts, int n, ld_error *err)
{
    if (n < 1 || !parts[0].s) return LD_FAIL(err, LD_ERR_USAGE, 0, "a batch needs at least one session");
    if (n == 1) return ld_lm_eval(parts[0].s, parts[0].tokens, parts[0].T, parts[0].logits, parts[0].hidden, err);
    const ld_lm_session *lead = parts[0].s;
    if (lead->tp) return batch_tp(parts, n, err);
    return batch_family(parts, n, lead->ds4 ? FAMILY_DS4 : lead->ds ? FAMILY_DS : FAMILY_DENSE, err);
}

/* ---------------------------------------------------------------- non-finite values */

/* one chunk of a dense session, every op's output checked (forward.h) */
static ld_status chunk_checked_dense(ld_lm_session *s, const int32_t *tokens, int k, float *logits, ld_error *err)
{
    ld_session_set_check(s->dense, 1);
    ld_status st = ld_session_eval(s->dense, tokens, k, logits, NULL, err);
    ld_session_set_check(s->dense, 0);
    return st;
}

/* one chunk of another family's session, or a split one: its hidden planes
 * (the embeddings, each layer's output, the final norm) and its logits
 * checked in that order, the ops within a layer not one by one */
static ld_status chunk_checked_planes(ld_lm_session *s, const int32_t *tokens, int k, float *logits, float *hidden,
                                      ld_error *err)
{
    const ld_lm_info *c = s->info;
    int pos0 = ld_lm_pos(s);
    LD_TRY(ld_lm_eval(s, tokens, k, logits, hidden, err));
    size_t plane = (size_t)k * (size_t)c->hidden;
    for (int p = 0; p < c->n_layers + 2; p++) {
        ld_finite_site at = {p - 1, c->n_layers, p == 0 ? "embed" : p <= c->n_layers ? NULL : "final_norm", pos0};
        LD_TRY(ld_finite_check_host(hidden + (size_t)p * plane, k, (size_t)c->hidden, &at, err));
    }
    ld_finite_site at = {c->n_layers, c->n_layers, "logits", pos0};
    return ld_finite_check_host(logits, k, (size_t)c->vocab, &at, err);
}

ld_status ld_lm_eval_checked(ld_lm_session *s, const int32_t *tokens, int T, ld_error *err)
{
    const ld_lm_info *c = s->info;
    size_t B = (size_t)s->max_batch, planes = s->dense ? 0 : (size_t)c->n_layers + 2;
    float *logits = malloc(B * (size_t)c->vocab * sizeof *logits);
    float *hidden = planes ? malloc(planes * B * (size_t)c->hidden * sizeof *hidden) : NULL;
    ld_status st = logits && (!planes || hidden) ? LD_OK : LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory");
    for (int t0 = 0; st == LD_OK && t0 < T; t0 += s->max_batch) {
        int k = T - t0 < s->max_batch ? T - t0 : s->max_batch;
        st = s->dense ? chunk_checked_dense(s, tokens + t0, k, logits, err)
                      : chunk_checked_planes(s, tokens + t0, k, logits, hidden, err);
    }
    free(logits);
    free(hidden);
    return st;
}

int ld_lm_pos(const ld_lm_session *s)
{
    return s->ds4 ? ld_ds4_session_pos(s->ds4) : s->ds ? ld_ds_session_pos(s->ds)
                   : s->tp ? ld_tp_session_pos(s->tp) : ld_session_pos(s->dense);
}

void ld_lm_reset(ld_lm_session *s)
{
    if (s->ds4) ld_ds4_session_reset(s->ds4);
    else if (s->ds) ld_ds_session_reset(s->ds);
    else if (s->tp) ld_tp_session_reset(s->tp);
    else ld_session_reset(s->dense);
}

void ld_lm_session_destroy(ld_lm_session *s)
{
    if (!s) return;
    ld_ds_session_destroy(s->ds);
    ld_ds4_session_destroy(s->ds4);
    ld_session_destroy(s->dense);
    ld_tp_session_destroy(s->tp);
    free(s);
}
