/* gunzip.c - see gunzip.h. */
#include "gunzip.h"

#include <stdlib.h>
#include <zlib.h>

typedef enum {
    GZ_START,     /* no byte yet: a member must come */
    GZ_MEMBER,    /* inside a member */
    GZ_BETWEEN,   /* after a member: another, zero padding, or the end */
    GZ_PADDING,   /* zero bytes after the last member */
    GZ_END
} gz_state;

struct ld_gunzip {
    z_stream z;
    gz_state state;
    int at_eof;          /* `more` said the input has ended */
    uint64_t offset;     /* compressed bytes consumed so far */
    uint64_t members;    /* members checked whole */
};

ld_status ld_gunzip_new(ld_gunzip **out, ld_error *err)
{
    ld_gunzip *g = calloc(1, sizeof *g);
    if (!g) return LD_FAIL(err, LD_ERR_NOMEM, 0, "gzip decoder");
    if (inflateInit2(&g->z, 15 + 16) != Z_OK) { /* 15-bit window, gzip wrapper only */
        free(g);
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "gzip decoder");
    }
    *out = g;
    return LD_OK;
}

void ld_gunzip_free(ld_gunzip *g)
{
    if (!g) return;
    inflateEnd(&g->z);
    free(g);
}

/* Refills the input when it is used up; sets at_eof at its end. */
static ld_status refill(ld_gunzip *g, ld_gunzip_more_fn more, void *ctx, ld_error *err)
{
    if (g->z.avail_in || g->at_eof) return LD_OK;
    const void *buf = NULL;
    const char *why = NULL;
    long n = more(ctx, &buf, &why);
    if (n < 0) return LD_FAIL(err, LD_ERR_IO, g->offset, "%s", why ? why : "read error");
    g->at_eof = n == 0;
    g->z.next_in = (unsigned char *)buf; /* zlib's API is not const; it only reads */
    g->z.avail_in = (uInt)n;
    return LD_OK;
}

static void consume(ld_gunzip *g, uInt n)
{
    g->z.next_in += n;
    g->z.avail_in -= n;
    g->offset += n;
}

/* After a member: zero padding to the end, another member, or garbage. */
static ld_status between(ld_gunzip *g, ld_error *err)
{
    while (g->z.avail_in && g->z.next_in[0] == 0) {
        consume(g, 1);
        g->state = GZ_PADDING;
    }
    if (!g->z.avail_in) return LD_OK;
    if (g->state == GZ_PADDING || g->z.next_in[0] != 0x1f)
        return LD_FAIL(err, LD_ERR_IO, g->offset, "gzip: trailing garbage after member %llu: "
                       "the data before it was read, the rest ignored",
                       (unsigned long long)g->members);
    g->state = GZ_MEMBER;
    return inflateReset(&g->z) == Z_OK ? LD_OK : LD_FAIL(err, LD_ERR_NOMEM, g->offset, "gzip decoder");
}

/* One inflate call into out; a member's end is checked by zlib itself. */
static ld_status inflate_some(ld_gunzip *g, unsigned char *out, size_t cap, size_t *n_out,
                              ld_error *err)
{
    uInt before = g->z.avail_in;
    g->z.next_out = out;
    g->z.avail_out = (uInt)(cap > UINT32_MAX ? UINT32_MAX : cap);
    int r = inflate(&g->z, Z_NO_FLUSH);
    g->offset += before - g->z.avail_in;
    *n_out = (size_t)(g->z.next_out - out);
    if (r == Z_STREAM_END) {
        g->members++;
        g->state = GZ_BETWEEN;
        return LD_OK;
    }
    if (r == Z_OK || (r == Z_BUF_ERROR && !g->at_eof)) return LD_OK;
    if (r == Z_MEM_ERROR) return LD_FAIL(err, LD_ERR_NOMEM, g->offset, "gzip decoder");
    if (r == Z_BUF_ERROR)
        return LD_FAIL(err, LD_ERR_IO, g->offset, "gzip: unexpected end of file, the stream truncated inside member %llu",
                       (unsigned long long)g->members + 1);
    return LD_FAIL(err, LD_ERR_IO, g->offset, "gzip: invalid compressed data in member %llu: %s",
                   (unsigned long long)g->members + 1, g->z.msg ? g->z.msg : "corrupt");
}

ld_status ld_gunzip_read(ld_gunzip *g, ld_gunzip_more_fn more, void *ctx, unsigned char *out,
                         size_t cap, size_t *n_out, ld_error *err)
{
    *n_out = 0;
    while (*n_out == 0 && g->state != GZ_END) {
        LD_TRY(refill(g, more, ctx, err));
        if (g->state == GZ_BETWEEN || g->state == GZ_PADDING) {
            LD_TRY(between(g, err));
            if (g->z.avail_in == 0 && g->at_eof) g->state = GZ_END;
            continue;
        }
        if (g->z.avail_in == 0 && g->at_eof && g->state == GZ_START)
            return LD_FAIL(err, LD_ERR_IO, 0, "gzip: empty file");
        g->state = GZ_MEMBER;
        LD_TRY(inflate_some(g, out, cap, n_out, err));
    }
    return LD_OK;
}
