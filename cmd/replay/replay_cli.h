/* replay_cli.h - what `logdiff replay`'s files share: its options as
 * parsed (ld_cli_replay_args, checked by replay_args.c), the requests read
 * from the logs (ld_cli_replay_pick, replay_pick.c), the modes that run
 * them (replay_modes.c) and the report of a plain replay
 * (replay_report.c).  cmd/replay.c's cmd_replay strings them together. */
#ifndef LD_CLI_REPLAY_H
#define LD_CLI_REPLAY_H

#include "cmd/cmd.h"
#include "cmd/common/logread.h"
#include "replay/run/replay.h"

#define LD_CLI_REPLAY_PFX "logdiff replay: "

/* this process as one rank of a group of processes (--tp-rank) */
typedef struct ld_cli_tp_proc {
    long rank, device, timeout;
    const char *rendezvous;
    char srun_rendezvous[4096]; /* the one an srun step meets at (replay_args.c) */
    const char *transport; /* NULL: the default (replay.h) */
} ld_cli_tp_proc;

typedef struct ld_cli_replay_args {
    /* as given (NULL / 0: not given) */
    const char *model, *rid, *near_tie, *seed, *backend, *dump_dir, *positions, *kernels, *check, *batch_with,
        *check_layers;
    ld_cli_capture_opts capture; /* --capture, --max-line */
    int json, compare;
    long threads, top_k, max_tokens, tp;
    ld_cli_tp_proc proc;
    /* derived by ld_cli_replay_check */
    double nt;                   /* --near-tie, or the default */
    ld_replay_sampling sampling; /* --seed's */
    int first, last;             /* --check-layers: [first, last) */
    ld_replay_positions want;    /* --positions (owned: ld_replay_positions_free) */
} ld_cli_replay_args;

/* Completes *a (the defaults, the environment's rank, the values parsed)
 * and checks it: 0, or -1 with the problem printed on cli->err. */
int ld_cli_replay_check(struct ld_cli *cli, ld_cli_replay_args *a, int n_logs);

/* The requests of the logs that matter: the one to replay (its rid, or
 * the only sub-request of a batch with that parent rid) and the
 * --batch-with ones.  Owned: ld_cli_replay_pick_free. */
typedef struct ld_cli_replay_pick {
    const char *rid;
    ld_request *exact;      /* first record with this rid */
    ld_request *sub;        /* first sub-request of a batch with this parent rid */
    size_t n_exact, n_sub;
    const char **with;      /* --batch-with: the rids [n_with] */
    ld_request **with_r;    /* the first record of each (NULL: not seen) */
    size_t n_with;
    char *with_buf;         /* the copy `with` points into */
} ld_cli_replay_pick;

/* Reads the logs into *s: the request to replay in *r (NULL with the
 * reason printed when it is not there, or the logs could not be read). */
int ld_cli_replay_read(struct ld_cli *cli, const ld_cli_replay_args *a, char **logs, int n_logs,
                       ld_cli_replay_pick *s, const ld_request **r);
void ld_cli_replay_pick_free(ld_cli_replay_pick *s);

/* The engine of --model on --backend with --kernels, split with --tp,
 * this process a rank of a group with --tp-rank (*quiet then opened for a
 * rank other than 0, whose report nobody reads).  0, or -1 printed. */
int ld_cli_replay_engine(struct ld_cli *cli, const ld_cli_replay_args *a, ld_replay_engine **e, FILE **quiet);

/* The modes; each returns the exit status. */
int ld_cli_replay_batch(struct ld_cli *cli, const ld_cli_replay_args *a, ld_replay_engine *e, const ld_request *r,
                        const ld_cli_replay_pick *s);
int ld_cli_replay_check_backends(struct ld_cli *cli, const ld_cli_replay_args *a, ld_replay_engine *e,
                                 const ld_request *r);
int ld_cli_replay_compare(struct ld_cli *cli, const ld_cli_replay_args *a, ld_replay_engine *e, const ld_request *r);
int ld_cli_replay_one(struct ld_cli *cli, const ld_cli_replay_args *a, ld_replay_engine *e, const ld_request *r);

/* replay_report.c: a plain replay's report, for people or one JSON object */
void ld_cli_replay_print_text(struct ld_cli *cli, const ld_request *r, const ld_replay_engine *e,
                              const ld_replay_result *res);
void ld_cli_replay_print_json(struct ld_cli *cli, const ld_request *r, const ld_replay_engine *e,
                              const ld_replay_result *res, const char *dump_dir, const ld_replay_dump *dump);

/* "logdiff replay: WHAT: [path: ]message" */
void ld_cli_replay_error(struct ld_cli *cli, const char *what, const ld_error *e);

#endif
