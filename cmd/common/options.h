/* options.h - declarative option parsing shared by every subcommand
 * (after git's parse-options: a usage[] synopsis plus an option table; the
 * same table generates --help). */
#ifndef LD_CMD_OPTIONS_H
#define LD_CMD_OPTIONS_H

#include <stdio.h>

typedef enum {
    LD_OPT_END = 0,
    LD_OPT_BOOL,   /* int *: set to 1 */
    LD_OPT_STRING, /* const char **: the argument (borrowed from argv) */
    LD_OPT_INT     /* long *: a decimal integer */
} ld_cli_opt_type;

typedef struct ld_cli_option {
    ld_cli_opt_type type;
    char short_name;       /* 0 if none */
    const char *long_name; /* without the leading "--" */
    void *value;
    const char *arg_help;  /* e.g. "RID"; NULL for bools */
    const char *help;
} ld_cli_option;

#define LD_OPTION_END { LD_OPT_END, 0, NULL, NULL, NULL, NULL }

enum { LD_PARSE_OK = 0, LD_PARSE_HELP = 1, LD_PARSE_ERROR = 2 };

/* Parses argv[1..argc) (argv[0] is the subcommand name).  Options and
 * positional arguments may be mixed; "--" ends options; "-" alone is a
 * positional argument (standard input).  Positional arguments are moved to
 * the front: on return *out_n_args of them start at argv[1].
 * Returns LD_PARSE_OK, LD_PARSE_HELP (help printed on `out`), or
 * LD_PARSE_ERROR (one line printed on `errout`). */
int ld_cli_parse_options(int argc, char **argv, const char *const *usage,
                     const ld_cli_option *options, int *out_n_args, FILE *out,
                     FILE *errout);

/* Prints the usage lines and the option table. */
void ld_cli_print_usage(FILE *f, const char *const *usage, const ld_cli_option *options);

#endif
