/* convopts.h - the bounds of the conversation state of `diff` and `regress`
 * (replay/analysis/conv.h): their options, said the same way in --help, and
 * the summary's line when a conversation was forgotten to stay within them. */
#ifndef LD_CLI_CONVOPTS_H
#define LD_CLI_CONVOPTS_H

#include <stddef.h>

#include "cmd/cmd.h"
#include "replay/analysis/conv.h"

/* --conversation-memory SIZE and --max-conversations N as given */
typedef struct ld_cli_conv_opts {
    const char *memory; /* NULL: the default */
    long max;           /* 0: the default */
} ld_cli_conv_opts;

#define LD_CLI_CONV_DEFAULT_MEMORY "256M"
#define LD_CLI_CONV_DEFAULT_MAX 65536

#define LD_CLI_CONV_OPTIONS(o)                                                                        \
    { LD_OPT_STRING, 0, "conversation-memory", &(o).memory, "SIZE",                                   \
      "memory for following conversations across requests (default " LD_CLI_CONV_DEFAULT_MEMORY      \
      "; K, M, G): past it the conversation used longest ago is forgotten, and said in the summary" }, \
    { LD_OPT_INT, 0, "max-conversations", &(o).max, "N",                                             \
      "conversations followed at once (default 65536): past it the same" }

/* The options into *out; -1 with a message on cli->err when not understood. */
int ld_cli_conv_options(struct ld_cli *cli, const char *cmd, const ld_cli_conv_opts *o,
                        ld_conv_options *out);

/* The summary's line when st->evicted > 0 ("" otherwise), into buf. */
const char *ld_cli_conv_summary(const ld_conv_stats *st, const ld_cli_conv_opts *o, char *buf,
                                size_t cap);

#endif
