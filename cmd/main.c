/* main.c - logdiff's command table and dispatcher.
 * A thin dispatcher after git.c: look the subcommand up, run it, and make
 * sure standard output reached its destination (a full disk or a closed
 * pipe is trouble, exit 2) before exiting with the subcommand's status. */
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "logdiff_config.h"
#include "parse/capture/journal_file.h"
#include "parse/capture/journal_follow.h"

struct cmd_entry {
    const char *name;
    int (*fn)(int, char **, struct ld_cli *);
    const char *summary;
};

static const struct cmd_entry commands[] = {
    { "scan", cmd_scan, "list every request found in the logs, one row each" },
    { "show", cmd_show, "everything about one request, by rid" },
    { "diff", cmd_diff, "which layer lost the conversation: a verdict per request" },
    { "template", cmd_template, "render a request through a chat template, exact bytes" },
    { "tokenize", cmd_tokenize, "text to token ids (or back) with a tokenizer.json, as HF tokenizers" },
    { "regress", cmd_regress, "compare archived logs' verdicts with a baseline, for CI" },
    { "watch", cmd_watch, "follow a running server's logs: verdicts as requests finish, Prometheus metrics" },
    { "replay", cmd_replay, "replay a logged request on logdiff's engine: where its output diverges" },
};

static void print_main_usage(FILE *f)
{
    fprintf(f, "usage: logdiff <command> [options] LOG...\n\n"
               "logdiff reads SGLang and vLLM request logs (plain, gzip, zstd, xz,\n"
               "bzip2, tar, zip; '-' for standard input) and tells which layer\n"
               "lost the conversation.\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "    %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n'logdiff <command> --help' describes a command's options.\n"
               "exit status: 0 nothing to report, 1 something reported, 2 trouble\n");
}

static int finish_stdout(int status)
{
    if (fflush(stdout) != 0 || ferror(stdout)) {
        if (errno != EPIPE)
            fprintf(stderr, "logdiff: cannot write standard output: %s\n",
                    strerror(errno));
        return LD_EXIT_TROUBLE;
    }
    return status;
}

/* glibc hands freed memory back to the kernel once the top of the heap
 * holds 128 KiB free, and serves a block over 128 KiB (a request's arena,
 * a decoded prompt) with its own mmap, unmapped when freed: either way the
 * next request gets fresh pages to fault in and zero.  Commands work
 * request by request with blocks of about the same sizes, so this was half
 * of `diff`'s page faults (3,200 -> 1,600 on a 100 MB log, 5-8% of its
 * time) and a part of `scan`'s.  Freed memory is kept for reuse up to
 * 64 MiB, and only blocks of 32 MiB or more (a huge line) get their own
 * mapping; the peak is unchanged (memory is reused, not added). */
static void keep_freed_memory(void)
{
#if defined(M_MMAP_THRESHOLD) && defined(M_TRIM_THRESHOLD)
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 64 << 20);
#endif
}

int main(int argc, char **argv)
{
    keep_freed_memory();
    struct ld_cli cli = { stdout, stderr, isatty(STDOUT_FILENO),
                          isatty(STDERR_FILENO) };
    /* colours only on a terminal, and never when NO_COLOR is set (no-color.org) */
    const char *no_color = getenv("NO_COLOR");
    if (no_color && *no_color) cli.out_is_tty = 0;
    if (argc < 2) {
        print_main_usage(stderr);
        return LD_EXIT_TROUBLE;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") ||
        !strcmp(argv[1], "help")) {
        print_main_usage(stdout);
        return finish_stdout(LD_EXIT_SAME);
    }
    if (!strcmp(argv[1], "--version")) {
        printf("logdiff %s\njournal files (*.journal): %s\nwatch journal:UNIT: %s\nwatch --metrics-listen: %s\n",
               LD_VERSION, ld_journal_file_available() ? "read with libsystemd" : "not read (built without libsystemd)",
               ld_journal_follow_available() ? "followed with libsystemd"
                                             : "not available (built without libsystemd: use journalctl -f -o json -u UNIT | logdiff watch -)",
#ifdef LD_HAVE_MICROHTTPD
               "served with libmicrohttpd"
#else
               "not available (built without libmicrohttpd: use --metrics-textfile)"
#endif
        );
        return finish_stdout(LD_EXIT_SAME);
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name))
            return finish_stdout(commands[i].fn(argc - 1, argv + 1, &cli));
    fprintf(stderr, "logdiff: '%s' is not a logdiff command (see 'logdiff --help')\n",
            argv[1]);
    return LD_EXIT_TROUBLE;
}
