/* npy.h - writing NumPy .npy files (format version 1.0), so that arrays
 * logdiff computes can be read with numpy.load.
 *
 * The format (numpy/lib/format.py, "NEP 1"): the magic "\x93NUMPY", the
 * version bytes 1 and 0, a little-endian uint16 header length, then the
 * header: the repr of a Python dict {'descr': ..., 'fortran_order': False,
 * 'shape': (...), } padded with spaces and ended by '\n' so that the data
 * starts at a multiple of 64 bytes; then the data, C order.  The header is
 * written as numpy's own writer does (np.save, numpy 2.x), spare spaces for
 * growing the first axis included, so files are byte-identical to np.save's
 * for the same array.
 *
 * Library code: errors are returned (ld_error), nothing is printed.  The
 * functions hold no state and are thread-safe.
 */
#ifndef LD_NPY_H
#define LD_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "ld_error.h"

#define LD_NPY_MAX_DIMS 8
#define LD_NPY_HEADER_MAX 512 /* bytes: enough for any header ld_npy_header writes */

/* The preamble and header of an array of `ndim` (0..LD_NPY_MAX_DIMS)
 * dimensions `shape`, element type `descr` (a NumPy type string such as
 * "<f4", "<i8"; at most 16 characters), into buf [cap]: *out_len bytes
 * (a multiple of 64), not NUL-terminated.  Errors: LD_ERR_USAGE (bad descr
 * or ndim), LD_ERR_LIMIT (cap too small; LD_NPY_HEADER_MAX always suffices). */
ld_status ld_npy_header(const char *descr, const size_t *shape, int ndim, char *buf, size_t cap,
                        size_t *out_len, ld_error *err);

/* Writes `path` (created or truncated): the header, then the elements of
 * `data` (C order, host byte order, `elem_size` bytes each: 1, 2, 4 or 8)
 * stored little-endian whatever the host.  `descr` must name a
 * little-endian type of that size ("<f4" for float, "<i8" for int64_t).
 * Errors: LD_ERR_USAGE (arguments), LD_ERR_LIMIT (the byte count
 * overflows), LD_ERR_IO with a message naming the path and the system's
 * reason.  A file that fails half-way is left as it is. */
ld_status ld_npy_write(const char *path, const char *descr, const size_t *shape, int ndim, const void *data,
                       size_t elem_size, ld_error *err);

/* ld_npy_write of a float32 matrix [rows][cols] as '<f4'. */
ld_status ld_npy_write_f32(const char *path, const float *data, size_t rows, size_t cols, ld_error *err);

/* ld_npy_write of an int64 vector [n] as '<i8'. */
ld_status ld_npy_write_i64(const char *path, const int64_t *data, size_t n, ld_error *err);

#endif /* LD_NPY_H */
