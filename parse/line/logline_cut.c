/* logline_cut.c - an SGLang text line cut for good (rsyslog keeps its first
 * 8 KiB, a poster pasted a part, a capture lost its last piece): its
 * payload ends inside the record's literal.  What came before the cut is
 * still the server's: the payload is closed after its last whole field
 * (the last comma at the first level inside the outermost call or dict),
 * and parsed, so the request's rid, time and earlier fields are read and
 * the line is flagged cut (ld_logline.cut_at) rather than lost.  A line cut
 * before its rid stays a parse error: nothing tells its request apart. */
#include <string.h>

#include "logline.h"
#include "logline_scan.h"

/* Where the payload s[0..n) can be closed: after its last whole field (the
 * last comma at depth 1, inside the outermost bracket of the kwarg being
 * cut), with that bracket's closer in *closer; else before the kwarg (the
 * `, out=` of a Finish line cut before out's first field), *closer 0; 0
 * when neither is there. */
static size_t last_whole_field(const char *s, size_t n, char *closer)
{
    ld_literal_scan o;
    ld_literal_start(&o);
    ld_literal_feed(&o, s, n);
    if (!o.active || !o.depth) return 0;
    *closer = o.field_end ? o.outer : 0;
    return (size_t)(o.field_end ? o.field_end : o.value_end);
}

ld_status ld_logline_parse_cut(const char *data, size_t len, unsigned pylit_flags, ld_arena *arena,
                               ld_logline *out, ld_error *err)
{
    ld_logline_classify(data, len, out);
    if (out->json || out->kind < LD_LOGLINE_SG_OPENAI || out->kind > LD_LOGLINE_SG_INOUT || out->body_off >= len)
        return LD_FAIL(err, LD_ERR_TRUNCATED, len, "a cut line that is not an SGLang text request line");
    char closer = 0;
    size_t body = out->body_off, at = last_whole_field(data + body, len - body, &closer);
    if (!at)
        return LD_FAIL(err, LD_ERR_TRUNCATED, len,
                       "the line was cut before its first whole field: nothing of the request can be read");
    size_t k = body + at + (closer != 0);
    char *fixed = ld_arena_alloc(arena, k + 1);
    if (!fixed) return LD_FAIL(err, LD_ERR_NOMEM, 0, "out of memory for a cut line");
    memcpy(fixed, data, body + at);
    fixed[body + at] = closer;
    fixed[k] = 0;
    ld_status st = ld_logline_parse_ex(fixed, k, 0, pylit_flags | LD_LOGLINE_CUT_OK, arena, out, err);
    if (st != LD_OK) return st;
    /* A Receive or Finish is told apart by its rid: cut before it (older
     * SGLang logs it after text and input_ids), nothing safe is left */
    if (out->kind != LD_LOGLINE_SG_OPENAI && !(out->obj && out->obj->kind == LD_PY_CALL && ld_py_call_get(out->obj, "rid")))
        return LD_FAIL(err, LD_ERR_TRUNCATED, len, "the line was cut for good before its rid");
    out->cut_at = len;
    out->cut_field = data + body + at + 1;
    out->cut_field_len = len - body - at - 1;
    return LD_OK;
}
