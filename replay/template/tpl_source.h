/* tpl_source.h - where a chat template comes from: a .jinja file, a
 * tokenizer_config.json, a GGUF file, or a model directory holding one of
 * them; or one of the built-in encoders of code-defined formats (dsenc.h),
 * by name
 * ("deepseek-v3.2", "deepseek-v4") or from a model directory's config.json
 * (`model_type` deepseek_v32 / deepseek_v4) when it has no chat template.
 *
 * The rules follow HF transformers:
 * - a file that is not a JSON object is the template source itself;
 * - tokenizer_config.json: `chat_template` is a string, or a list of
 *   {"name": ..., "template": ...} from which the one named "default" is
 *   taken unless a name is asked for; `bos_token` / `eos_token` are a string,
 *   an AddedToken-like dict {"content": ...}, or null (Python None);
 * - a GGUF file (recognised by its magic "GGUF", whatever its name), as
 *   llama.cpp reads it: `tokenizer.chat_template`, or
 *   `tokenizer.chat_template.NAME` when a name other than "default" is asked
 *   for; bos_token / eos_token are `tokenizer.ggml.tokens` at
 *   `tokenizer.ggml.bos_token_id` / `eos_token_id` (None when the id is
 *   absent);
 * - a directory: chat_template.jinja when present (transformers prefers it),
 *   else the chat_template of tokenizer_config.json; the special tokens come
 *   from tokenizer_config.json when it exists.  A directory with neither
 *   (and no built-in encoder by config.json) uses its single *.gguf file.
 *
 * Ownership: an ld_tpl_source is owned by the caller of ld_tpl_source_load
 * and released with ld_tpl_source_free; it owns its compiled template and
 * token strings.  Read-only after loading (its template may be rendered by
 * several threads at once, see tpl.h).
 */
#ifndef LD_TPL_SOURCE_H
#define LD_TPL_SOURCE_H

#include "ld_error.h"
#include "replay/template/jinja/tpl.h"

typedef enum ld_tpl_kind {
    LD_TPL_JINJA = 0,       /* a Jinja2 chat template: `tpl` */
    LD_TPL_DEEPSEEK_V32,    /* built-in DeepSeek-V3.2 encoder (dsenc.h) */
    LD_TPL_DEEPSEEK_V4      /* built-in DeepSeek-V4 encoder (dsenc.h) */
} ld_tpl_kind;

typedef struct ld_tpl_source {
    ld_tpl_kind kind;
    ld_tpl *tpl;         /* compiled template (owned); NULL for built-ins */
    char *bos_token;     /* owned; NULL = absent or null (Python None) */
    char *eos_token;     /* owned; NULL = absent or null (Python None) */
    char *template_path; /* owned: the file the template text came from, or
                            "builtin:NAME" */
    char *text;          /* owned: the template's source text (NUL-terminated);
                            NULL for built-ins */
    size_t text_len;
} ld_tpl_source;

/* Loads the chat template at `path` (a .jinja or other non-JSON file, a
 * tokenizer_config.json, a GGUF file, or a directory), or, when no file
 * `path` exists and it names a built-in encoder, that encoder (its special
 * tokens DeepSeek's BOS and EOS unless a tokenizer_config.json says
 * otherwise).  `name` picks one of a list of
 * named templates (NULL = "default"); asking for a name other than
 * "default" of a single template is an error.  Returns LD_OK and a new
 * source in *out (caller frees with ld_tpl_source_free), or: LD_ERR_IO (a
 * file cannot be read; err->path = `path`), LD_ERR_SYNTAX (bad JSON, or a
 * template that does not compile: err->line is the template's line),
 * LD_ERR_MISMATCH (no chat_template, no such name, a token of the wrong
 * type, a token id outside the GGUF vocabulary, several .gguf files in a
 * directory), the errors of ld_gguf_open for a malformed GGUF file
 * (LD_ERR_SYNTAX / TRUNCATED / LIMIT / UNSUPPORTED, err->offset its byte),
 * LD_ERR_NOMEM.  err->msg names the file and what is missing.
 * err->path is borrowed from `path`.  Thread-safe. */
ld_status ld_tpl_source_load(const char *path, const char *name,
                             ld_tpl_source **out, ld_error *err);

/* The built-in encoder called `name` ("deepseek-v3.2"/"dsv32",
 * "deepseek-v4"/"dsv4", any case); LD_TPL_JINJA when there is none. */
ld_tpl_kind ld_tpl_builtin_by_name(const char *name);

/* Frees a source and everything it owns (NULL allowed). */
void ld_tpl_source_free(ld_tpl_source *src);

#endif
