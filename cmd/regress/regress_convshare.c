/* regress_convshare.c - conversations across the shares of a sharded
 * `logdiff regress`.  A share's conversation tracker starts empty, so a turn
 * whose earlier turns were in an earlier share would be judged without them.
 * --conv-journal FILE writes what the share's tracker kept (its ops,
 * regress_journal.h); --conv-from DIR starts the tracker from the journals
 * of every share before this one, in share order: the state one process
 * over their inputs would have reached (ids, evictions and memory bounds
 * included), so the share's verdicts are that process's.  The partial
 * keeps the digests of the journals it started from and of its own ops, for
 * --merge to check. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cmd/common/outfile.h"
#include "parse/input/slurp.h"
#include "regress_journal.h"
#include "regress_lines.h"
#include "regress_opts.h"

static int refuse(struct ld_cli *cli, const char *fmt, const char *a, const char *b)
{
    fprintf(cli->err, "logdiff regress: ");
    fprintf(cli->err, fmt, a, b);
    fputc('\n', cli->err);
    return -1;
}

int ld_cli_regress_conv_begin(ld_cli_regress_run *run, const ld_cli_regress_opts *o, ld_diff_options *dopts)
{
    if (!o->partial && !o->conv_journal) return 0;
    ld_cli_journal *j = calloc(1, sizeof *j);
    if (!j) return refuse(run->cli, "out of memory%s%s", "", "");
    j->digest = LD_JOURNAL_DIGEST_INIT;
    run->journal = j;
    run->track_only = !o->partial;
    if (o->conv_journal && !(j->ops = tmpfile()))
        return refuse(run->cli, "cannot make a temporary file for --conv-journal %s%s", o->conv_journal, "");
    dopts->conv.journal = ld_cli_journal_on_op;
    dopts->conv.journal_ctx = j;
    return 0;
}

/* The journal at path when it is one of this run's: its share index, or
 * -1 (not a journal: skipped), -2 (a journal of another run: said). */
static long journal_share(ld_cli_regress_run *run, const cJSON *settings, const char *path)
{
    ld_error e;
    ld_error_clear(&e);
    size_t len = 0;
    char *line = ld_cli_first_line(path, &len, &e);
    ld_cli_partial_head h;
    long index = -1;
    if (line && ld_cli_partial_read_head(line, len, &h, &e) == LD_OK) {
        int same = h.count == run->shard_count && h.n_inputs == run->n_all_inputs &&
                   cJSON_Compare(h.settings, settings, 1);
        for (size_t i = 0; same && i < h.n_inputs; i++) same = !strcmp(h.inputs[i], run->all_inputs[i]);
        index = !h.journal ? -1 : same ? h.index : -2;
        if (index == -2)
            refuse(run->cli, "--conv-from: %s is a journal of another run (other inputs, shares or judging "
                   "settings)%s", path, "");
        ld_cli_partial_head_free(&h);
    }
    free(line);
    return index;
}

/* paths[s] = the journal of share s < run->shard_index found in dir
 * (malloc'd strings); 0, or -1 with the reason said. */
static int find_journals(ld_cli_regress_run *run, const char *dir, const cJSON *settings, char **paths)
{
    DIR *d = opendir(dir);
    if (!d) return refuse(run->cli, "--conv-from %s: cannot read the directory: %s", dir, strerror(errno));
    int rc = 0;
    for (struct dirent *de; (de = readdir(d));) {
        size_t n = strlen(dir) + strlen(de->d_name) + 2;
        char *path = malloc(n);
        struct stat st;
        if (!path) { rc = -1; break; }
        snprintf(path, n, "%s/%s", dir, de->d_name);
        long s = stat(path, &st) == 0 && S_ISREG(st.st_mode) ? journal_share(run, settings, path) : -1;
        if (s == -2) rc = -1;
        if (s >= 0 && s < run->shard_index && paths[s]) {
            refuse(run->cli, "--conv-from: two journals of one share: %s and %s", paths[s], path);
            rc = -1;
        }
        if (s >= 0 && s < run->shard_index && !paths[s]) paths[s] = path;
        else free(path);
    }
    closedir(d);
    for (long s = 0; rc == 0 && s < run->shard_index; s++)
        if (!paths[s]) {
            fprintf(run->cli->err, "logdiff regress: --conv-from %s: no journal of share %ld/%ld, which this share "
                    "starts from\n", dir, s, run->shard_count);
            rc = -1;
        }
    return rc;
}

static ld_status replay_op(void *ctx, const ld_conv_op *op, ld_error *e)
{
    return ld_differ_conv_replay(ctx, op, e);
}

static int replay_journal(ld_cli_regress_run *run, const char *path, uint64_t *digest)
{
    ld_error e;
    ld_error_clear(&e);
    char *text = NULL;
    size_t len = 0;
    ld_status st = ld_slurp_file(path, &text, &len, &e);
    if (st == LD_OK) st = ld_cli_journal_read_ops(text, len, replay_op, run->differ, digest, &e);
    free(text);
    if (st == LD_OK) return 0;
    if (e.line)
        fprintf(run->cli->err, "logdiff regress: %s:%llu: byte %llu: %s\n", path, (unsigned long long)e.line,
                (unsigned long long)e.offset, e.msg);
    else
        fprintf(run->cli->err, "logdiff regress: %s: %s\n", path, e.msg);
    return -1;
}

int ld_cli_regress_conv_preload(ld_cli_regress_run *run, const ld_cli_regress_opts *o)
{
    if (!o->conv_from) return 0;
    cJSON *settings = ld_cli_regress_settings(run, o);
    size_t n = run->shard_index ? (size_t)run->shard_index : 1;
    char **paths = calloc(n, sizeof *paths);
    run->conv_from = calloc(n, sizeof *run->conv_from);
    int rc = settings && paths && run->conv_from ? find_journals(run, o->conv_from, settings, paths)
                                                 : refuse(run->cli, "out of memory%s%s", "", "");
    for (long s = 0; rc == 0 && s < run->shard_index; s++) rc = replay_journal(run, paths[s], &run->conv_from[s]);
    for (size_t s = 0; paths && s < n; s++) free(paths[s]);
    free(paths);
    cJSON_Delete(settings);
    run->conv_preloaded = rc == 0;
    ld_conv_stats st;
    ld_differ_conv_stats(run->differ, &st);
    run->preload_evicted = st.evicted;
    return rc;
}

typedef struct journal_writer {
    const ld_cli_journal *j;
    const ld_cli_partial_head *h;
} journal_writer;

static int write_journal_to(const void *ctx, FILE *f)
{
    const journal_writer *w = ctx;
    return ld_cli_journal_write(w->j, w->h, f);
}

int ld_cli_regress_conv_end(ld_cli_regress_run *run, const ld_cli_regress_opts *o)
{
    run->conv.evicted -= run->preload_evicted; /* the earlier shares' evictions are theirs */
    if (!o->conv_journal) return 0;
    ld_cli_partial_head h = { run->shard_index, run->shard_count, run->share_first,
                              run->share_first + run->n_inputs, (char **)run->all_inputs,
                              run->n_all_inputs, ld_cli_regress_settings(run, o), 1, 0, 0, NULL };
    if (!h.settings) return refuse(run->cli, "out of memory writing --conv-journal %s%s", o->conv_journal, "");
    journal_writer w = { run->journal, &h };
    int rc = ld_cli_write_output("regress", o->conv_journal, write_journal_to, &w, run->cli->err);
    cJSON_Delete(h.settings);
    if (rc == 0 && !o->partial)
        fprintf(run->cli->out, "share %ld/%ld: %llu conversation ops; journal %s written\n", run->shard_index,
                run->shard_count, (unsigned long long)run->journal->n_ops, o->conv_journal);
    return rc;
}

void ld_cli_regress_conv_free(ld_cli_regress_run *run)
{
    if (run->journal && run->journal->ops) fclose(run->journal->ops);
    free(run->journal);
    free(run->conv_from);
    run->journal = NULL;
    run->conv_from = NULL;
}
