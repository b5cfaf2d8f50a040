/* archive_lib.h - libarchive, opened the first time an input needs it.
 *
 * Plain logs never touch libarchive; compressed and archived inputs do.  So
 * logdiff does not link it: ld_archive_lib_need() opens it with dlopen on
 * the first such input (include/ld_dynlib.h says why), and input.c calls it
 * through the table ld_la, whose members have libarchive's own names and
 * types (from <archive.h>): ld_la.archive_read_new(), ...
 */
#ifndef LD_ARCHIVE_LIB_H
#define LD_ARCHIVE_LIB_H

#include <archive.h>
#include <archive_entry.h>

#include "ld_dynlib.h"
#include "ld_error.h"

/* Every libarchive function logdiff calls. */
#define LD_ARCHIVE_FUNCS(X, t)                                                                        \
    X(t, archive_read_new) X(t, archive_read_free) X(t, archive_read_open) X(t, archive_read_open1)   \
    X(t, archive_read_next_header) X(t, archive_read_data_block) X(t, archive_error_string)           \
    X(t, archive_set_error) X(t, archive_format) X(t, archive_read_set_callback_data)                 \
    X(t, archive_read_set_read_callback) X(t, archive_read_set_seek_callback)                         \
    X(t, archive_read_set_skip_callback) X(t, archive_read_support_filter_gzip)                       \
    X(t, archive_read_support_filter_zstd) X(t, archive_read_support_filter_xz)                       \
    X(t, archive_read_support_filter_bzip2) X(t, archive_read_support_filter_lz4)                     \
    X(t, archive_read_support_filter_lzip) X(t, archive_read_support_format_tar)                      \
    X(t, archive_read_support_format_zip) X(t, archive_read_support_format_raw)                       \
    X(t, archive_read_support_format_empty) X(t, archive_entry_filetype) X(t, archive_entry_hardlink) \
    X(t, archive_entry_size) X(t, archive_entry_pathname) X(t, archive_entry_pathname_utf8)

typedef struct ld_archive_fns {
    LD_ARCHIVE_FUNCS(LD_DYNLIB_SLOT, _)
} ld_archive_fns;

/* Filled by the first successful ld_archive_lib_need(); read-only after. */
extern ld_archive_fns ld_la;

/* LD_OK once libarchive is open and ld_la filled; else LD_ERR_UNSUPPORTED
 * saying libarchive could not be loaded and why.  Thread-safe. */
ld_status ld_archive_lib_need(ld_error *err);

#endif
