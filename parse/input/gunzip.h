/* gunzip.h - gzip streams decompressed and checked as gzip(1) checks them.
 *
 * libarchive's gzip filter reads the trailer of a member without comparing
 * its CRC-32 and length with the data, takes a stream that stops after its
 * header for an empty one, and hands out what corrupt deflate data decodes
 * to.  This decoder (zlib's inflate with the gzip wrapper) does what
 * `gzip -t` does: every member's CRC-32 and length are checked, a stream
 * that ends inside a member is an error, members may follow one another,
 * zero bytes after the last member are padding, anything else after it is
 * "trailing garbage" (an error here: gzip(1) warns and exits 2).
 *
 * Pull model: ld_gunzip_read() asks `more` for compressed bytes as it needs
 * them.  Errors carry the offset of the compressed byte where they were
 * found (err->offset).  Ownership: the decoder owns its zlib state only.
 */
#ifndef LD_GUNZIP_H
#define LD_GUNZIP_H

#include <stddef.h>
#include <stdint.h>

#include "ld_error.h"

typedef struct ld_gunzip ld_gunzip;

/* The next compressed bytes: *buf, returns their count, 0 at the end of the
 * input, -1 on a read error (with *why set to a static or caller-owned
 * message valid until the next call). */
typedef long (*ld_gunzip_more_fn)(void *ctx, const void **buf, const char **why);

ld_status ld_gunzip_new(ld_gunzip **out, ld_error *err);

/* Decompressed bytes into out[0..cap): *n_out > 0, or 0 at the end of the
 * stream (after its last member checked).  Errors: LD_ERR_IO (corrupt or
 * truncated data, trailing garbage, a read error), LD_ERR_NOMEM. */
ld_status ld_gunzip_read(ld_gunzip *g, ld_gunzip_more_fn more, void *ctx, unsigned char *out,
                         size_t cap, size_t *n_out, ld_error *err);

void ld_gunzip_free(ld_gunzip *g);

#endif
