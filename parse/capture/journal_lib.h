/* journal_lib.h - libsystemd's sd-journal, opened the first time a journal
 * is read (built with libsystemd only: LD_HAVE_LIBSYSTEMD).
 *
 * Most runs read no journal, so logdiff does not link libsystemd:
 * ld_journal_lib_need() opens it with dlopen (include/ld_dynlib.h says
 * why), and the journal readers call it through the table ld_sdj, whose
 * members have sd-journal's own names and types: ld_sdj.sd_journal_next(), ...
 */
#ifndef LD_JOURNAL_LIB_H
#define LD_JOURNAL_LIB_H
#ifdef LD_HAVE_LIBSYSTEMD

#include <systemd/sd-journal.h>

#include "ld_dynlib.h"
#include "ld_error.h"

/* Every sd-journal function logdiff calls. */
#define LD_JOURNAL_FUNCS(X, t)                                                                               \
    X(t, sd_journal_open) X(t, sd_journal_open_directory) X(t, sd_journal_open_files) X(t, sd_journal_close) \
    X(t, sd_journal_set_data_threshold) X(t, sd_journal_add_match) X(t, sd_journal_seek_head)                \
    X(t, sd_journal_seek_tail) X(t, sd_journal_seek_cursor) X(t, sd_journal_test_cursor)                     \
    X(t, sd_journal_get_cursor) X(t, sd_journal_next) X(t, sd_journal_previous) X(t, sd_journal_get_data)    \
    X(t, sd_journal_get_fd) X(t, sd_journal_process) X(t, sd_journal_has_runtime_files)                      \
    X(t, sd_journal_has_persistent_files)

typedef struct ld_journal_fns {
    LD_JOURNAL_FUNCS(LD_DYNLIB_SLOT, _)
} ld_journal_fns;

/* Filled by the first successful ld_journal_lib_need(); read-only after. */
extern ld_journal_fns ld_sdj;

/* LD_OK once libsystemd is open and ld_sdj filled; else LD_ERR_UNSUPPORTED
 * saying libsystemd could not be loaded and why.  Thread-safe. */
ld_status ld_journal_lib_need(ld_error *err);

#endif
#endif
