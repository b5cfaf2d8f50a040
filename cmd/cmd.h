/* cmd.h - the subcommands and what they share.
 *
 * Each subcommand lives in cmd/<name>.c, defines
 *   int cmd_<name>(int argc, char **argv, struct ld_cli *cli)
 * and is listed in cmd/main.c's commands[] table (git builtin/ style).  The
 * return value is the exit status, as diff(1): 0 nothing to report,
 * 1 something reported, 2 usage or I/O trouble.
 */
#ifndef LD_CMD_H
#define LD_CMD_H

#include <stdio.h>

enum { LD_EXIT_SAME = 0, LD_EXIT_DIFF = 1, LD_EXIT_TROUBLE = 2 };

struct ld_cli {
    FILE *out;        /* standard output */
    FILE *err;        /* standard error */
    int out_is_tty;   /* colours and tables for people */
    int err_is_tty;   /* progress bar allowed */
};

int cmd_scan(int argc, char **argv, struct ld_cli *cli);
int cmd_show(int argc, char **argv, struct ld_cli *cli);
int cmd_diff(int argc, char **argv, struct ld_cli *cli);
int cmd_template(int argc, char **argv, struct ld_cli *cli);
int cmd_tokenize(int argc, char **argv, struct ld_cli *cli);
int cmd_regress(int argc, char **argv, struct ld_cli *cli);
int cmd_replay(int argc, char **argv, struct ld_cli *cli);
int cmd_watch(int argc, char **argv, struct ld_cli *cli);

#endif
