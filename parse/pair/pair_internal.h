/* pair_internal.h - internal state of the pairer, shared by pair_table.c
 * (the open records), pair_openai.c (joining `Receive OpenAI` lines),
 * pair_pd.c (one request's prefill and decode records), pair.c (completion,
 * lifecycle) and pair_feed.c (per-line handling), each calling only the
 * ones before it.  Not public. */
#ifndef LD_PAIR_INTERNAL_H
#define LD_PAIR_INTERNAL_H

#include "pair.h"
#include "parse/request/request_fill.h"

/* An open record.  Owned by the pairer (calloc); `r` too until emitted. */
typedef struct ld_open {
    ld_request *r;
    struct ld_open *hnext;        /* hash chain */
    struct ld_open *prev, *next;  /* age list, oldest first */
    struct ld_pending_openai *q;  /* OpenAI line tentatively joined at Receive (FIFO),
                                     not yet applied to r; owned here */
    int checked;                  /* a prompt text was compared with an OpenAI line */
    int confirmed;                /* the joined OpenAI line's last user message is in it */
    int ambiguous;                /* several OpenAI lines would fit */
    char *queue;                  /* the OpenAI queue its Receive line was logged in
                                     (pair_feed.c's queue_key), malloc'd; NULL before */
    uint64_t born;                /* the pairer's clock when it was opened */
} ld_open;

/* A `Receive OpenAI` line waiting for its request.  Owned by the pending
 * list, or by an ld_open (q) once tentatively joined. */
typedef struct ld_pending_openai {
    char *member;                 /* its queue (pair_feed.c's queue_key: the member, and
                                     the writer where the capture names one), malloc'd */
    ld_request *r;                /* OpenAI-only record, filled from the payload; its
                                     openai_obj is kept when the values are, with only_rid,
                                     or when filling failed (!filled) */
    int filled;                   /* r holds what filling a request from the payload gives:
                                     ld_pair_apply_openai copies it (ld_request_copy_openai)
                                     or takes it (ld_request_move_openai) */
    unsigned fill_flags;          /* the LD_REQ_* flags that filling set on r */
    const char *user_text;        /* identifying text (see note_user_text), in r->arena */
    size_t user_len;
    int anchored;                 /* user_text is the final message: it must end near
                                     the end of the prompt */
    const char *earlier_user;     /* anchored: the last user message before the final
                                     one (in r->arena), for the fallback join of a
                                     prompt that lost its final message; NULL if none */
    size_t earlier_user_len;
    int n_messages;
    uint64_t born;                /* the pairer's clock when the line was fed */
    struct ld_pending_openai *next;
} ld_pending_openai;

typedef struct ld_pd_held ld_pd_held; /* pair_pd.c */

/* An open record's key is its rid, or for a line of the PD router that
 * names its writer, rid LD_PAIR_KEY_SEP writer (pair_feed.c's record_key). */
#define LD_PAIR_KEY_SEP '\x1f'

struct ld_pairer {
    ld_pair_options opts;
    ld_pair_emit_fn emit;
    void *ctx;
    ld_pair_stats stats;
    ld_arena line_arena;          /* parsed values of the current line + scratch */
    ld_decode_memo memo;          /* last long string decoded on this line */
    ld_open **buckets;
    size_t n_buckets;             /* power of two */
    ld_open *oldest, *newest;
    ld_pending_openai *pending;
    int seen_vllm_generated;
    const char *body;             /* ld_logline.body of the line being fed (fill contexts) */
    ld_pd_held **pd_buckets;      /* pair_pd.c: records of the PD router held by room */
    ld_pd_held *pd_oldest, *pd_newest;
    size_t pd_held, pd_held_bytes;
    uint64_t clock;               /* ld_pairer_set_clock(): what new records are stamped with */
};

/* pair_table.c: the open records and what every step shares. */
ld_status ld_pair_table_grow(ld_pairer *p);
ld_open *ld_pair_lookup(ld_pairer *p, const char *rid);
/* Takes o out of the table and the age list (o itself is the caller's). */
void ld_pair_unlink(ld_pairer *p, ld_open *o);
/* The fill context of a line of request `rid` (child of `parent`): kept
 * text and values as the options say, for the selected rid only. */
ld_fill_ctx ld_pair_fill_ctx(ld_pairer *p, const char *rid, const char *parent);
/* *dst = a copy of v in r's arena when the context keeps values. */
ld_status ld_pair_keep_value(ld_request *r, const ld_fill_ctx *c, const ld_py_value *v,
                             const ld_py_value **dst, ld_error *err);
ld_status ld_pair_create(ld_pairer *p, const char *rid, ld_open **out, ld_error *err);
void ld_pair_emit(ld_pairer *p, ld_request *r);

/* pair_pd.c: one request, two servers (prefill and decode). */
/* Hands r out, or holds it for the other server's record of its room and
 * hands out the two as one; `queue` is the writer r came from. */
void ld_pair_pd_offer(ld_pairer *p, ld_request *r, const char *queue);
/* Hands out every held record alone. */
void ld_pair_pd_flush(ld_pairer *p);
/* Hands out alone every held record stamped before `before`; how many. */
size_t ld_pair_pd_expire(ld_pairer *p, uint64_t before);
/* Calls fn for every held record. */
void ld_pair_pd_each(const ld_pairer *p, void (*fn)(void *ctx, const ld_request *r), void *ctx);
/* Frees the held records without handing them out. */
void ld_pair_pd_free(ld_pairer *p);

/* pair.c: a record handed out (its OpenAI join settled), the oldest ones
 * past max_open. */
void ld_pair_complete(ld_pairer *p, ld_open *o);
void ld_pair_evict(ld_pairer *p);

/* pair_openai.c: joining `Receive OpenAI` lines (see the comment there). */
ld_status ld_pair_add_openai(ld_pairer *p, ld_pending_openai *q);
ld_pending_openai *ld_pair_take_oldest_openai(ld_pairer *p, const char *member);
void ld_pair_free_openai(ld_pending_openai *q);
/* A line of record o carried prompt text `text` (head h, tail t when cut). */
ld_status ld_pair_openai_check(ld_pairer *p, ld_open *o, const char *h, size_t hn,
                               const char *t, size_t tn, ld_error *err);
/* 1 when q's last user message occurs in the prompt (for batch joins). */
int ld_pair_openai_fits(const ld_pending_openai *q, const char *h, size_t hn,
                        const char *t, size_t tn);
/* Emits the first pending OpenAI line as an OpenAI-only record. */
void ld_pair_flush_first(ld_pairer *p);
/* Emits every pending OpenAI line fed before `before` (the pairer's clock)
 * as an OpenAI-only record; how many. */
size_t ld_pair_expire_openai(ld_pairer *p, uint64_t before);
/* Emits every pending OpenAI line as an OpenAI-only record. */
void ld_pair_flush_openai(ld_pairer *p);
/* Before emitting o: apply its tentative OpenAI line when nothing contradicts it. */
ld_status ld_pair_openai_settle(ld_pairer *p, ld_open *o, ld_error *err);
/* Copies an OpenAI line's fields into record r; last_use: q is freed next,
 * so r may take q's memory instead of copies (ld_request_move_openai). */
ld_status ld_pair_apply_openai(ld_pairer *p, ld_pending_openai *q, ld_request *r, int last_use,
                               ld_error *err);

#endif
