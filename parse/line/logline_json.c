/* logline_json.c - SGLang JSON-mode request lines (`--log-requests-format
 * json`): the JSON object read by the Python-literal parser's JSON mode
 * (ld_pylit_parse_json: the same values, the same fast paths, SGLang's
 * JSON-mode truncation turned into the same markers as in text mode,
 * log-formats.md 3.2), then its fields picked. */
#include <string.h>

#include "logline.h"

/* The timestamp field's text, copied into the arena (NULL when absent). */
static ld_status take_ts(const ld_py_value *root, ld_arena *arena, ld_logline *out, ld_error *err)
{
    const ld_py_value *ts = ld_py_dict_get(root, "timestamp");
    if (!ts || ts->kind != LD_PY_STR) return LD_OK;
    const char *s;
    size_t n;
    if (ld_py_str_decode(ts, arena, &s, &n, NULL) != LD_OK) return LD_OK; /* not a time then */
    out->ts = ld_arena_memdup(arena, s, n);
    if (!out->ts) return LD_FAIL(err, LD_ERR_NOMEM, ts->off, "out of memory for the timestamp");
    out->ts_len = n;
    return LD_OK;
}

ld_status ld_logline_parse_json(const char *data, size_t len, size_t start,
                                uint32_t json_half, unsigned pylit_flags, ld_arena *arena,
                                ld_logline *out, ld_error *err)
{
    ld_pylit_limits lim = { 0, 0, pylit_flags & LD_PYLIT_SKIM_INT_LISTS };
    ld_py_value *root = NULL;
    ld_status st = ld_pylit_parse_json(data + start, len - start, json_half, &lim, arena, &root, NULL,
                                       err);
    if (st != LD_OK) {
        if (err) {
            err->offset += start;
            ld_logline_rebase_msg(err, start);
        }
        return st;
    }
    if (root->kind != LD_PY_DICT)
        return LD_FAIL(err, LD_ERR_SYNTAX, start, "JSON request line that is not an object");
    LD_TRY(take_ts(root, arena, out, err));
    out->rid = ld_py_dict_get(root, "rid");
    out->obj = ld_py_dict_get(root, "obj");
    out->headers = ld_py_dict_get(root, "headers");
    out->out = ld_py_dict_get(root, "out");
    if (!out->obj) return LD_FAIL(err, LD_ERR_SYNTAX, start, "JSON request line without 'obj'");
    return LD_OK;
}
