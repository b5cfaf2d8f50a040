/* logread.h - what every log-reading subcommand shares: expanding inputs,
 * the progress bar, reporting problems (one line each on stderr, or JSON
 * objects with "rid": null on stdout), and the closing counts. */
#ifndef LD_CMD_LOGREAD_H
#define LD_CMD_LOGREAD_H

#include <cjson/cJSON.h>

#include "cmd/cmd.h"
#include "parse/logset.h"
#include "parse/pair/pair.h"

/* --capture NAME and --max-line SIZE as given (NULL: not given) */
typedef struct ld_cli_capture_opts {
    const char *capture;
    const char *max_line;
} ld_cli_capture_opts;

/* Their option lines, the same in every command that reads logs */
#define LD_CLI_CAPTURE_OPTIONS(o)                                                                           \
    { LD_OPT_STRING, 0, "capture", &(o).capture, "NAME",                                                   \
      "how the logs were captured: auto (default), plain, docker-json, cri, kubectl-prefix, shipper-json, " \
      "journal-json, journal-export, journal-text, syslog" },                                               \
    { LD_OPT_STRING, 0, "max-line", &(o).max_line, "SIZE",                                                 \
      "a line longer than SIZE (rejoined from its capture's pieces or not) is dropped and said, so that "  \
      "a writer that never ends its line cannot take the memory (default 1G; K, M, G)" }

/* "64M", "1G", "4096": bytes (K, M, G as powers of 1024, an optional B),
 * from 1K to 64G; 0 when s is not such a size. */
size_t ld_cli_parse_size(const char *s);

/* --capture's NAME (NULL: auto) as a kind into *out; -1 with a message
 * on cli->err when unknown. */
int ld_cli_capture_kind(struct ld_cli *cli, const char *name, ld_capture_kind *out);

/* --capture and --max-line into *out; -1 with a message on cli->err when
 * either is not understood. */
int ld_cli_capture_options(struct ld_cli *cli, const ld_cli_capture_opts *o, ld_logset_options *out);

typedef struct ld_cli_logread {
    struct ld_cli *cli;
    int json;                   /* problems as JSON lines on stdout too */
    int line_errors_as_records; /* bad lines arrive as LD_REQ_ERROR records */
    ld_logset_stats stats;
    ld_pair_stats pair_stats;
    ld_cli_capture_opts capture; /* --capture, --max-line */
} ld_cli_logread;

/* The summary's line of what the captures did ("" when every member was
 * plain and nothing was rejoined or cut), into buf. */
const char *ld_cli_capture_summary(const ld_logset_stats *st, char *buf, size_t cap);

/* The summary's line for lines past the size limit (st->over_limit > 0):
 * how many, the limit (max_line as given, NULL: the default), what became of
 * them.  Into buf. */
const char *ld_cli_over_limit_summary(const ld_logset_stats *st, const char *max_line, char *buf,
                                      size_t cap);

/* The same as JSON: {"members": {"docker-json": 1, ...}, "records": N,
 * "rejoined_lines": N, "joined_records": N, "unfinished_lines": N,
 * "bad_records": N, "damaged_lines": N, "replaced_bytes": N, "marked_joins": N,
 * "open_joins": N, "cut_lines": N, "lost_records": N, "problems": N,
 * "over_limit": N}. */
cJSON *ld_cli_capture_json(const ld_logset_stats *st);

/* Reads inputs[0..n) ("-" = stdin, directories expanded) into a pairer made
 * with `opts` that calls `emit(ctx, req)`.  Returns LD_EXIT_TROUBLE when
 * nothing could be done (no inputs, out of memory), else 0; I/O problems are
 * counted in lr->stats.io_errors and reported as they happen. */
int ld_cli_logread_run(ld_cli_logread *lr, char **inputs, int n,
                   const ld_pair_options *opts, ld_pair_emit_fn emit,
                   void *ctx);

/* One problem reported as every log reader reports it: a JSON record
 * ({"rid": null, "error": {...}}) on stdout with lr->json, a line on stderr
 * (not for a bad request line in JSON mode); nothing for a bad request line
 * when lr->line_errors_as_records (it comes as a record). */
void ld_cli_logread_problem(ld_cli_logread *lr, ld_problem_kind kind, const ld_error *e);

/* Where a request's earliest part was logged (parts in the order a request
 * is logged: OpenAI line, Receive, Finish...); NULL when none was seen. */
const ld_source *ld_cli_request_first_part(const ld_request *r);

/* "file:line" of the earliest part of a request (static buffer per call
 * site is not used: writes into buf). */
const char *ld_cli_request_where(const ld_request *r, char *buf, size_t cap,
                             const ld_source **out_src);

/* Comma-separated flag words of a request ("truncated,unpaired"), "" if none. */
const char *ld_cli_request_flag_words(const ld_request *r, char *buf, size_t cap);

/* JSON for an error record / problem: {"rid": null, "error": {...}}. */
/* " [file.c:123]", where the error arose, when LOGDIFF_DEBUG is set in the
 * environment and the build records it (ld_error.h's origin_file); else "".
 * Into buf. */
const char *ld_cli_error_origin(const ld_error *e, char *buf, size_t cap);

cJSON *ld_cli_error_json(const char *kind, const ld_error *e);

#endif
