/* options.c - see options.h. */
#include "options.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void ld_cli_print_usage(FILE *f, const char *const *usage, const ld_cli_option *options)
{
    for (int i = 0; usage[i]; i++)
        fprintf(f, i == 0 ? "usage: %s\n" : "%s\n", usage[i]);
    fputc('\n', f);
    for (const ld_cli_option *o = options; o->type != LD_OPT_END; o++) {
        char left[64];
        int n = 0;
        if (o->short_name)
            n = snprintf(left, sizeof left, "-%c, ", o->short_name);
        else
            n = snprintf(left, sizeof left, "    ");
        snprintf(left + n, sizeof left - n, "--%s%s%s", o->long_name,
                 o->arg_help ? " " : "", o->arg_help ? o->arg_help : "");
        fprintf(f, "    %-28s %s\n", left, o->help);
    }
    fprintf(f, "    %-28s %s\n", "-h, --help", "show this help and exit");
}

static const ld_cli_option *find_long(const ld_cli_option *options, const char *name,
                                  size_t len)
{
    for (const ld_cli_option *o = options; o->type != LD_OPT_END; o++)
        if (o->long_name && strlen(o->long_name) == len &&
            !strncmp(o->long_name, name, len))
            return o;
    return NULL;
}

static const ld_cli_option *find_short(const ld_cli_option *options, char c)
{
    for (const ld_cli_option *o = options; o->type != LD_OPT_END; o++)
        if (o->short_name == c) return o;
    return NULL;
}

/* Stores `arg` into the option; returns 0 or -1 with a message. */
static int store(const ld_cli_option *o, const char *arg, FILE *errout,
                 const char *cmd)
{
    if (o->type == LD_OPT_BOOL) {
        *(int *)o->value = 1;
        return 0;
    }
    if (o->type == LD_OPT_STRING) {
        *(const char **)o->value = arg;
        return 0;
    }
    if (!arg) return -1;
    char *end;
    errno = 0;
    long v = strtol(arg, &end, 10);
    if (errno || end == arg || *end) {
        fprintf(errout, "logdiff %s: option '--%s' expects an integer, got '%s'\n",
                cmd, o->long_name, arg);
        return -1;
    }
    *(long *)o->value = v;
    return 0;
}

/* Handles argv[*i], an option; may consume the next argument. */
static int parse_one(int argc, char **argv, int *i, const ld_cli_option *options,
                     FILE *errout)
{
    const char *a = argv[*i];
    const char *cmd = argv[0];
    const ld_cli_option *o;
    const char *inline_arg = NULL;
    if (a[1] == '-') {
        const char *name = a + 2;
        const char *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        o = find_long(options, name, len);
        if (eq) inline_arg = eq + 1;
    } else {
        o = find_short(options, a[1]);
        if (o && a[2]) inline_arg = a + 2;
    }
    if (!o) {
        fprintf(errout, "logdiff %s: unknown option '%s' (see 'logdiff %s --help')\n",
                cmd, a, cmd);
        return -1;
    }
    if (o->type == LD_OPT_BOOL) {
        if (inline_arg) {
            fprintf(errout, "logdiff %s: option '--%s' takes no value\n", cmd,
                    o->long_name);
            return -1;
        }
        return store(o, NULL, errout, cmd);
    }
    if (!inline_arg) {
        if (*i + 1 >= argc) {
            fprintf(errout, "logdiff %s: option '--%s' needs a value\n", cmd,
                    o->long_name);
            return -1;
        }
        inline_arg = argv[++*i];
    }
    return store(o, inline_arg, errout, cmd);
}

int ld_cli_parse_options(int argc, char **argv, const char *const *usage,
                     const ld_cli_option *options, int *out_n_args, FILE *out,
                     FILE *errout)
{
    int n_args = 0, only_args = 0;
    for (int i = 1; i < argc; i++) {
        char *a = argv[i];
        if (only_args || a[0] != '-' || a[1] == '\0') {
            argv[1 + n_args++] = a;
            continue;
        }
        if (!strcmp(a, "--")) {
            only_args = 1;
            continue;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            ld_cli_print_usage(out, usage, options);
            return LD_PARSE_HELP;
        }
        if (parse_one(argc, argv, &i, options, errout) != 0)
            return LD_PARSE_ERROR;
    }
    *out_n_args = n_args;
    return LD_PARSE_OK;
}
