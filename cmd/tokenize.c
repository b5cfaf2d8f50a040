/* tokenize.c - `logdiff tokenize`: text on standard input to token ids (or
 * ids back to text with --decode), through a HF tokenizer.json, as HF
 * `tokenizers` encodes. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "cmd/common/options.h"
#include "parse/input/slurp.h"
#include "replay/tokenizer/tok.h"

static const char *const tokenize_usage[] = {
    "logdiff tokenize --tokenizer SRC [--add-special] [--parse-special] [-z] < TEXT",
    "logdiff tokenize --tokenizer SRC --decode < IDS",
    "",
    "Encodes standard input, exact bytes, with a byte-level BPE tokenizer and",
    "writes the token ids separated by single spaces and a newline.  SRC is a",
    "tokenizer.json or a model directory holding one.  By default nothing is",
    "added (no BOS) and special tokens written in the text are plain text, as",
    "HF tokenizers' encode(add_special_tokens=False) with encode_special_tokens.",
    "With --decode, standard input holds ids (separated by white space) and their",
    "bytes are written exactly, special tokens included.  With -z (--null),",
    "standard input holds texts separated by NUL bytes (as xargs -0 reads them):",
    "each is encoded alone and its ids written on a line of their own.",
    "Exit status: 0 done,",
    "2 usage or I/O error, or a tokenizer that cannot be loaded.",
    NULL
};

static void print_error(struct ld_cli *cli, const ld_error *e)
{
    if (e->path) fprintf(cli->err, "logdiff tokenize: %s: %s\n", e->path, e->msg);
    else fprintf(cli->err, "logdiff tokenize: %s\n", e->msg);
}

static int encode(struct ld_cli *cli, const ld_tok *tok, const char *in, size_t len, unsigned flags)
{
    int32_t *ids = NULL;
    size_t n = 0;
    ld_error err;
    ld_error_clear(&err);
    if (ld_tok_encode(tok, in, len, flags, &ids, &n, &err) != LD_OK) {
        print_error(cli, &err);
        return LD_EXIT_TROUBLE;
    }
    /* ids are non-negative int32: at most 10 digits and a separator each */
    char *text = malloc(n * 11 + 1), *p = text;
    if (!text) {
        fprintf(cli->err, "logdiff tokenize: out of memory\n");
        free(ids);
        return LD_EXIT_TROUBLE;
    }
    for (size_t i = 0; i < n; i++) {
        char digits[12];
        int k = 0;
        for (uint32_t v = (uint32_t)ids[i]; k == 0 || v; v /= 10) digits[k++] = (char)('0' + v % 10);
        if (i) *p++ = ' ';
        while (k) *p++ = digits[--k];
    }
    *p++ = '\n';
    fwrite(text, 1, (size_t)(p - text), cli->out);
    free(text);
    free(ids);
    return LD_EXIT_SAME;
}

/* -z: each NUL-separated text of in[0..len) encoded alone, a line each (a
 * NUL that ends the input ends the last text, as xargs -0 reads it). */
static int encode_each(struct ld_cli *cli, const ld_tok *tok, const char *in, size_t len, unsigned flags)
{
    size_t at = 0;
    while (at < len) {
        const char *nul = memchr(in + at, '\0', len - at);
        size_t n = nul ? (size_t)(nul - (in + at)) : len - at;
        if (encode(cli, tok, in + at, n, flags) != LD_EXIT_SAME) return LD_EXIT_TROUBLE;
        at += n + 1;
    }
    return LD_EXIT_SAME;
}

/* Parses white-space separated decimal ids; 0 and a message on bad input. */
static int parse_ids(struct ld_cli *cli, const char *in, size_t len, int32_t **ids, size_t *n)
{
    *ids = malloc((len / 2 + 1) * sizeof **ids);
    *n = 0;
    if (!*ids) return 0;
    for (size_t i = 0; i < len;) {
        if (strchr(" \t\r\n", in[i])) {
            i++;
            continue;
        }
        long v = 0;
        size_t start = i;
        while (i < len && in[i] >= '0' && in[i] <= '9' && v <= INT32_MAX) v = v * 10 + (in[i++] - '0');
        if (i == start || v > INT32_MAX || (i < len && !strchr(" \t\r\n", in[i]))) {
            fprintf(cli->err, "logdiff tokenize: --decode: standard input byte %zu: not a token id\n", start);
            return 0;
        }
        (*ids)[(*n)++] = (int32_t)v;
    }
    return 1;
}

static int decode(struct ld_cli *cli, const ld_tok *tok, const char *in, size_t len)
{
    int32_t *ids = NULL;
    size_t n = 0, out_len = 0;
    char *out = NULL;
    int status = LD_EXIT_TROUBLE;
    ld_error err;
    ld_error_clear(&err);
    if (!parse_ids(cli, in, len, &ids, &n)) {
        if (!ids) fprintf(cli->err, "logdiff tokenize: out of memory\n");
    } else if (ld_tok_decode(tok, ids, n, &out, &out_len, &err) != LD_OK) {
        print_error(cli, &err);
    } else {
        fwrite(out, 1, out_len, cli->out);
        status = LD_EXIT_SAME;
    }
    free(out);
    free(ids);
    return status;
}

int cmd_tokenize(int argc, char **argv, struct ld_cli *cli)
{
    const char *src = NULL;
    int add_special = 0, parse_special = 0, dec = 0, each = 0;
    const ld_cli_option options[] = {
        { LD_OPT_STRING, 0, "tokenizer", &src, "SRC", "tokenizer.json or model directory (required)" },
        { LD_OPT_BOOL, 0, "add-special", &add_special, NULL, "add what the post-processor adds (BOS...)" },
        { LD_OPT_BOOL, 0, "parse-special", &parse_special, NULL, "special tokens in the text are tokens" },
        { LD_OPT_BOOL, 0, "decode", &dec, NULL, "read ids, write their bytes" },
        { LD_OPT_BOOL, 'z', "null", &each, NULL, "texts separated by NUL bytes, each encoded alone, a line of ids each" },
        LD_OPTION_END
    };
    int n_args = 0;
    int rc = ld_cli_parse_options(argc, argv, tokenize_usage, options, &n_args, cli->out, cli->err);
    if (rc != LD_PARSE_OK) return rc == LD_PARSE_HELP ? LD_EXIT_SAME : LD_EXIT_TROUBLE;
    const char *problem = !src ? "--tokenizer SRC is required"
                        : n_args ? "no arguments: the input is standard input"
                        : dec && (add_special || parse_special || each) ? "--decode takes no encoding option"
                        : NULL;
    if (problem) {
        fprintf(cli->err, "logdiff tokenize: %s\n", problem);
        return LD_EXIT_TROUBLE;
    }
    ld_tok *tok = NULL;
    ld_error err;
    ld_error_clear(&err);
    if (ld_tok_load(src, &tok, &err) != LD_OK) {
        print_error(cli, &err);
        return LD_EXIT_TROUBLE;
    }
    size_t len = 0;
    char *in = NULL;
    int status = LD_EXIT_TROUBLE;
    if (ld_slurp_stream(stdin, &in, &len, &err) != LD_OK)
        fprintf(cli->err, "logdiff tokenize: cannot read standard input: %s\n", err.msg);
    else if (dec)
        status = decode(cli, tok, in, len);
    else
        status = (each ? encode_each : encode)(cli, tok, in, len,
                        (add_special ? LD_TOK_ADD_SPECIAL : 0u) | (parse_special ? LD_TOK_PARSE_SPECIAL : 0u));
    free(in);
    ld_tok_free(tok);
    return status;
}
