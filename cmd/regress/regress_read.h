/* regress_read.h - reading several inputs at once for `logdiff regress`,
 * with results that do not depend on the number of threads.
 *
 * Each INPUT (a file, an archive, a directory, "-") is read by one worker
 * thread with its own pairer, exactly as `logdiff diff INPUT` reads it
 * (a directory's files in name order, an archive's members in archive
 * order, streamed member by member, never unpacked).  What a worker finds
 * (records, the end of each member, problems) is queued per input, and the
 * calling thread receives it all in one fixed order: every event of input 0
 * in the order it happened, then input 1's, and so on.  So whatever runs on
 * the calling thread (the judge, with its conversation tracker) sees the
 * same sequence with 1 thread or 16.  Memory: a worker ahead of the input
 * being consumed stops when its queue holds LD_RG_QUEUE_CAP records.
 */
#ifndef LD_CMD_REGRESS_READ_H
#define LD_CMD_REGRESS_READ_H

#include <stddef.h>
#include <stdint.h>

#include "parse/logset.h"
#include "parse/pair/pair.h"

enum { LD_RG_QUEUE_CAP = 256 };

typedef struct ld_cli_regress_member_info {
    const char *name;       /* full member name ("archive:member" or the path) */
    const char *label;      /* the member inside its input: archive member name, or
                               the file's path below a directory input / its base name */
    uint64_t lines;         /* lines read */
    uint64_t request_lines; /* request lines (parsed or not) among them */
    const ld_error *error;  /* the member could not be read (fully); NULL if fine */
} ld_cli_regress_member_info;

typedef struct ld_cli_regress_sink {
    /* A record of input `input`; ownership passes to the callee. `label` as in
     * ld_cli_regress_member_info (valid for the call). */
    void (*on_record)(void *ctx, size_t input, ld_request *r, const char *label);
    /* A member ended (after its records that were complete by then). */
    void (*on_member)(void *ctx, size_t input, const ld_cli_regress_member_info *m);
    /* An input that could not be opened, a line too long to read, one its
     * capture cut or never finished. */
    void (*on_problem)(void *ctx, size_t input, ld_problem_kind kind, const ld_error *e);
    void *ctx;
    /* A note of the input's directory walk (a symlink loop not followed, a
     * file met twice read once); NULL: not told. */
    void (*on_note)(void *ctx, size_t input, const char *msg);
} ld_cli_regress_sink;

/* Reads inputs[0..n) with `jobs` worker threads (>= 1), pairers made with
 * `opts`, the lines unwrapped from `capture` (LD_CAPTURE_AUTO: recognised
 * per member), delivering every event to `sink` on the calling thread in input
 * order.  Returns 0, or -1 when memory or threads ran out (err filled). */
int ld_cli_regress_read_inputs(char *const *inputs, size_t n, int jobs, const ld_pair_options *opts,
                               const ld_logset_options *capture, const ld_cli_regress_sink *sink,
                               ld_error *err);

#endif
