/* convopts.c - see convopts.h. */
#include "convopts.h"

#include <stdio.h>

#include "cmd/common/logread.h"

int ld_cli_conv_options(struct ld_cli *cli, const char *cmd, const ld_cli_conv_opts *o,
                        ld_conv_options *out)
{
    const char *mem = o->memory ? o->memory : LD_CLI_CONV_DEFAULT_MEMORY;
    *out = (ld_conv_options){ 0 };
    out->max_bytes = ld_cli_parse_size(mem);
    if (!out->max_bytes) {
        fprintf(cli->err, "logdiff %s: --conversation-memory '%s' is not a size from 1K to 64G "
                "(bytes, or with K, M, G)\n", cmd, mem);
        return -1;
    }
    if (o->max < 0) {
        fprintf(cli->err, "logdiff %s: --max-conversations %ld: give 1 or more\n", cmd, o->max);
        return -1;
    }
    out->max_conversations = o->max ? (size_t)o->max : LD_CLI_CONV_DEFAULT_MAX;
    return 0;
}

const char *ld_cli_conv_summary(const ld_conv_stats *st, const ld_cli_conv_opts *o, char *buf,
                                size_t cap)
{
    buf[0] = 0;
    if (!st->evicted) return buf;
    char max[24];
    snprintf(max, sizeof max, "%ld", o->max ? o->max : (long)LD_CLI_CONV_DEFAULT_MAX);
    snprintf(buf, cap, "%llu conversation%s forgotten to stay within --conversation-memory %s and "
             "--max-conversations %s (the one used longest ago first): a later turn of one is "
             "judged without its earlier turns",
             (unsigned long long)st->evicted, st->evicted == 1 ? "" : "s",
             o->memory ? o->memory : LD_CLI_CONV_DEFAULT_MEMORY, max);
    return buf;
}
