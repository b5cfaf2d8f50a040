/* input.c - opening files, stdin or memory; format sniffing; libarchive.
 *
 * Two paths.  The first bytes (the "prefix") are read and sniffed for the
 * magic numbers of the compressions and archives we handle.  Input with none
 * of them is plain: it is passed through byte for byte with read(2), without
 * libarchive, which keeps the hot path to one copy and rules out libarchive
 * mistaking a text log for some exotic format.  Everything else goes through
 * libarchive with a fixed set of filters (gzip, zstd, xz, bzip2, lz4, lzip)
 * and formats (tar, zip, raw, empty); libarchive does the decompression,
 * except gzip: a gzip stream (a .gz file, a .tar.gz, a .gz member of an
 * archive) is decoded by gunzip.h, which checks it as gzip(1) does, and
 * libarchive is handed what it decodes to.
 * After the first header, the "raw" and "empty" formats mean a single stream
 * (one member named like the file); tar and zip mean an archive.
 *
 * Ownership: ld_input owns its fd (except stdin), its buffers, the archive
 * handle and the current member name.  Not thread-safe.
 */
#include "input.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "archive_lib.h"
#include "gunzip.h"

enum {
    LD_IN_PREFIX_CAP = 64 * 1024,  /* bytes sniffed (at least 512 wanted) */
    LD_IN_SNIFF_MIN = 512,         /* one tar header */
    LD_IN_BLOCK = 1024 * 1024,     /* libarchive read callback block */
    LD_IN_MAX_HDR_FAILS = 64       /* consecutive bad headers before giving up */
};

typedef enum { LD_SRC_FD, LD_SRC_MEM } ld_src_kind;

struct ld_input {
    ld_src_kind kind;
    int fd;               /* LD_SRC_FD: the file; closed unless stdin */
    int own_fd;
    int seekable;         /* regular file: libarchive may seek (zip) */
    const unsigned char *mem;  /* LD_SRC_MEM: borrowed */
    size_t mem_len;
    char *path;           /* owned copy of the path / name */

    unsigned char *prefix;  /* first bytes of the file, owned */
    size_t prefix_len;
    uint64_t pos;           /* next raw (compressed) byte offset to hand out */
    uint64_t consumed;      /* raw bytes handed out in total (progress) */
    uint64_t file_size;

    struct archive *ar;     /* NULL on the plain path */
    unsigned char *block;   /* read-callback buffer (fd sources), owned */
    int is_archive;
    int dead;               /* libarchive gave a fatal header error / eof */
    int started;            /* the first member was made current */
    int has_member;         /* a current member exists */
    int member_done;        /* current member ended or failed */
    char *member;           /* owned "path:member" or a copy of path */

    struct archive *inner;  /* archive member that is itself compressed
                               (a rotated .log.gz inside a tar): its decoder */
    int inner_checked;      /* the member's first bytes were looked at */
    int outer_eof;          /* inner decoder: the outer member has ended */
    const void *iblk;       /* pending inner (decompressed) block */
    size_t iblk_len;

    ld_gunzip *gz;          /* the input is a gzip stream: its decoder */
    unsigned char *gzbuf;   /* its output block, handed to libarchive */
    ld_gunzip *igz;         /* the same for a gzip member (inner decoder) */
    unsigned char *igzbuf;
    char gz_why[320];       /* the gzip decoder's error, kept: libarchive may take a
                               failed read-ahead for the end of the data */

    char *map;              /* plain regular file mapped read-only (ld_input_map) */
    size_t map_len;
    size_t map_released;    /* bytes at the front already unmapped */

    const void *blk;        /* pending libarchive data block */
    size_t blk_len;
    int64_t blk_off;        /* member offset where blk starts */
    uint64_t delivered;     /* decompressed bytes of this member handed out */
};

/* ---------------------------------------------------------------- helpers */

static char *dup_str(const char *s)
{
    size_t n = strlen(s);
    char *p = malloc(n + 1);
    if (p) memcpy(p, s, n + 1);
    return p;
}

/* libarchive's and strerror's messages, first letter lowered (style). */
static ld_status fail_msg(ld_error *err, ld_status code, uint64_t off,
                          const char *path, const char *what, const char *why)
{
    char low[200];
    snprintf(low, sizeof low, "%s", why ? why : "unknown error");
    size_t n = strlen(low); /* libarchive ends some messages with a newline */
    while (n && isspace((unsigned char)low[n - 1])) low[--n] = '\0';
    if (!isupper((unsigned char)low[1])) /* keep acronyms: "ZIP ..." */
        low[0] = (char)tolower((unsigned char)low[0]);
    if (err) err->path = path;
    if (what) return LD_FAIL(err, code, off, "%s: %s", what, low);
    return LD_FAIL(err, code, off, "%s", low);
}

static ssize_t read_full(int fd, void *buf, size_t cap)
{
    for (;;) {
        ssize_t n = read(fd, buf, cap);
        if (n >= 0 || errno != EINTR) return n;
    }
}

/* Reads the prefix: at least LD_IN_SNIFF_MIN bytes unless EOF comes first
 * (pipes may deliver less per read). */
static ld_status read_prefix(ld_input *in, ld_error *err)
{
    in->prefix = malloc(LD_IN_PREFIX_CAP);
    if (!in->prefix) return LD_FAIL(err, LD_ERR_NOMEM, 0, "prefix buffer");
    while (in->prefix_len < LD_IN_SNIFF_MIN) {
        ssize_t n = read_full(in->fd, in->prefix + in->prefix_len,
                              LD_IN_PREFIX_CAP - in->prefix_len);
        if (n < 0)
            return fail_msg(err, LD_ERR_IO, in->prefix_len, in->path,
                            "cannot read", strerror(errno));
        if (n == 0) break;
        in->prefix_len += (size_t)n;
    }
    return LD_OK;
}

/* ---------------------------------------------------------------- sniffing */

static int has_magic(const unsigned char *p, size_t n, const char *m, size_t mn)
{
    return n >= mn && memcmp(p, m, mn) == 0;
}

/* A tar header: its checksum (octal at 148, computed with the field itself
 * as spaces) matches; signed-byte sums are accepted as old tars did. */
static int is_tar_header(const unsigned char *p, size_t n)
{
    if (n < 512) return 0;
    unsigned long stored = 0;
    int digits = 0;
    for (int i = 148; i < 156; i++) {
        if (p[i] >= '0' && p[i] <= '7') {
            stored = stored * 8 + (unsigned long)(p[i] - '0');
            digits++;
        } else if (p[i] != ' ' && p[i] != 0) {
            return 0;
        } else if (digits) {
            break;
        }
    }
    if (!digits) return 0;
    unsigned long usum = 0;
    long ssum = 0;
    for (int i = 0; i < 512; i++) {
        unsigned char c = (i >= 148 && i < 156) ? ' ' : p[i];
        usum += c;
        ssum += (signed char)c;
    }
    return stored == usum || (long)stored == ssum;
}

/* 1 when libarchive should look at the bytes: a compression or archive magic
 * number at the start.  Everything else is plain text (or junk), passed
 * through untouched. */
static int compressed_magic(const unsigned char *p, size_t n)
{
    static const struct { const char *m; size_t n; } magics[] = {
        { "\x1f\x8b", 2 },                 /* gzip */
        { "\x28\xb5\x2f\xfd", 4 },         /* zstd frame */
        { "\xfd" "7zXZ\x00", 6 },          /* xz */
        { "BZh", 3 },                      /* bzip2 (digit checked below) */
        { "\x04\x22\x4d\x18", 4 },         /* lz4 frame */
        { "LZIP", 4 },                     /* lzip */
    };
    for (size_t i = 0; i < sizeof magics / sizeof magics[0]; i++) {
        if (!has_magic(p, n, magics[i].m, magics[i].n)) continue;
        if (magics[i].m[0] == 'B')
            return n >= 4 && p[3] >= '1' && p[3] <= '9';
        return 1;
    }
    return 0;
}

static int needs_libarchive(const unsigned char *p, size_t n)
{
    static const struct { const char *m; size_t n; } magics[] = {
        { "PK\x03\x04", 4 },               /* zip local header */
        { "PK\x05\x06", 4 },               /* empty zip */
        { "PK\x07\x08", 4 },               /* spanned zip marker */
        { "PK00", 4 },                     /* old spanned marker */
    };
    if (compressed_magic(p, n)) return 1;
    for (size_t i = 0; i < sizeof magics / sizeof magics[0]; i++)
        if (has_magic(p, n, magics[i].m, magics[i].n)) return 1;
    return is_tar_header(p, n);
}

/* ---------------------------------------------------------------- callbacks */

static la_ssize_t cb_read(struct archive *a, void *ud, const void **buf)
{
    ld_input *in = ud;
    size_t n;
    if (in->kind == LD_SRC_MEM) {
        n = in->pos < in->mem_len ? in->mem_len - (size_t)in->pos : 0;
        *buf = in->mem + in->pos;
    } else if (in->pos < in->prefix_len) {
        /* the fd sits at prefix_len whenever pos is inside the prefix */
        n = in->prefix_len - (size_t)in->pos;
        *buf = in->prefix + in->pos;
    } else {
        ssize_t r = read_full(in->fd, in->block, LD_IN_BLOCK);
        if (r < 0) {
            ld_la.archive_set_error(a, errno, "read error: %s", strerror(errno));
            return -1;
        }
        n = (size_t)r;
        *buf = in->block;
    }
    in->pos += n;
    in->consumed += n;
    return (la_ssize_t)n;
}

static la_int64_t cb_seek(struct archive *a, void *ud, la_int64_t off,
                          int whence)
{
    ld_input *in = ud;
    int64_t size = (int64_t)in->file_size, base = 0;
    if (whence == SEEK_CUR) base = (int64_t)in->pos;
    else if (whence == SEEK_END) base = size;
    int64_t to = base + off;
    if (to < 0) to = 0;
    if (to > size) to = size;
    if (in->kind == LD_SRC_FD) {
        off_t fdpos = (off_t)(to < (int64_t)in->prefix_len
                                  ? (int64_t)in->prefix_len : to);
        if (lseek(in->fd, fdpos, SEEK_SET) < 0) {
            ld_la.archive_set_error(a, errno, "seek error: %s", strerror(errno));
            return ARCHIVE_FATAL;
        }
    }
    in->pos = (uint64_t)to;
    return to;
}

static la_int64_t cb_skip(struct archive *a, void *ud, la_int64_t n)
{
    ld_input *in = ud;
    int64_t from = (int64_t)in->pos;
    la_int64_t to = cb_seek(a, ud, n, SEEK_CUR);
    return to < 0 ? 0 : to - from;
}

/* A gzip stream is decoded here (gunzip.h), its raw bytes pulled through
 * the raw read callback; libarchive sees the decoded bytes. */
typedef la_ssize_t (*raw_read_fn)(struct archive *a, void *ud, const void **buf);

typedef struct gz_pull {
    struct archive *a;
    ld_input *in;
    raw_read_fn raw;
} gz_pull;

static long gz_more(void *ctx, const void **buf, const char **why)
{
    gz_pull *p = ctx;
    la_ssize_t n = p->raw(p->a, p->in, buf);
    if (n < 0) *why = ld_la.archive_error_string(p->a);
    return (long)n;
}

static la_ssize_t gz_read(struct archive *a, ld_input *in, ld_gunzip *g, unsigned char *out,
                          raw_read_fn raw, const void **buf)
{
    gz_pull p = { a, in, raw };
    size_t n = 0;
    ld_error e;
    ld_error_clear(&e);
    if (ld_gunzip_read(g, gz_more, &p, out, LD_IN_BLOCK, &n, &e) != LD_OK) {
        /* libarchive's own printf knows no %llu */
        snprintf(in->gz_why, sizeof in->gz_why, "%s (compressed byte %llu)", e.msg,
                 (unsigned long long)e.offset);
        ld_la.archive_set_error(a, EIO, "%s", in->gz_why);
        return -1;
    }
    *buf = out;
    return (la_ssize_t)n;
}

static la_ssize_t cb_read_gz(struct archive *a, void *ud, const void **buf)
{
    ld_input *in = ud;
    return gz_read(a, in, in->gz, in->gzbuf, cb_read, buf);
}

static int is_gzip(const void *p, size_t n)
{
    return n >= 2 && has_magic(p, n, "\x1f\x8b", 2);
}

/* ---------------------------------------------------------------- members */

static ld_status set_member_name(ld_input *in, const char *entry, ld_error *err)
{
    size_t pl = strlen(in->path), el = entry ? strlen(entry) : 0;
    char *name = malloc(pl + el + 2);
    if (!name) return LD_FAIL(err, LD_ERR_NOMEM, 0, "member name");
    memcpy(name, in->path, pl);
    if (entry) {
        name[pl] = ':';
        memcpy(name + pl + 1, entry, el + 1);
    } else {
        name[pl] = 0;
    }
    free(in->member);
    in->member = name;
    return LD_OK;
}

static void drop_inner(ld_input *in)
{
    if (in->inner) ld_la.archive_read_free(in->inner);
    in->inner = NULL;
    ld_gunzip_free(in->igz);
    in->igz = NULL;
    in->inner_checked = in->outer_eof = 0;
    in->iblk = NULL;
    in->iblk_len = 0;
}

static void start_member(ld_input *in)
{
    drop_inner(in);
    in->has_member = 1;
    in->member_done = 0;
    in->blk = NULL;
    in->blk_len = 0;
    in->blk_off = 0;
    in->delivered = 0;
}

static int entry_is_log(struct archive_entry *e)
{
    if (ld_la.archive_entry_filetype(e) != AE_IFREG) return 0;
    /* a tar hard link carries no data of its own */
    if (ld_la.archive_entry_hardlink(e) && ld_la.archive_entry_size(e) == 0) return 0;
    return 1;
}

static const char *entry_name(struct archive_entry *e)
{
    const char *s = ld_la.archive_entry_pathname(e);
    if (!s) s = ld_la.archive_entry_pathname_utf8(e);
    return s ? s : "?";
}

/* The first header decides single stream vs archive. */
static void classify(ld_input *in)
{
    int base = ld_la.archive_format(in->ar) & ARCHIVE_FORMAT_BASE_MASK;
    in->is_archive = !(base == ARCHIVE_FORMAT_RAW || base == ARCHIVE_FORMAT_EMPTY
                       || base == 0);
}

static ld_status header_failed(ld_input *in, int r, int *fails, ld_error *err)
{
    ld_status st = fail_msg(err, LD_ERR_IO, 0, in->path, "bad archive header",
                            ld_la.archive_error_string(in->ar));
    if (r == ARCHIVE_FATAL || ++*fails >= LD_IN_MAX_HDR_FAILS) in->dead = 1;
    return st;
}

/* Reads headers until a regular member; *out_has = 0 at the end. */
static ld_status archive_next(ld_input *in, int *out_has, ld_error *err)
{
    int nfails = 0;
    for (;;) {
        struct archive_entry *e;
        int r = ld_la.archive_read_next_header(in->ar, &e);
        int first = !in->started;
        in->started = 1;
        if (first) classify(in);
        if (r == ARCHIVE_EOF && in->gz_why[0]) {
            in->dead = 1;
            return fail_msg(err, LD_ERR_IO, 0, in->path, NULL, in->gz_why);
        }
        if (r == ARCHIVE_EOF) {
            in->dead = 1;
            /* an empty single stream is still one (empty) member */
            if (first && !in->is_archive) {
                LD_TRY(set_member_name(in, NULL, err));
                start_member(in);
                in->member_done = 1;
                *out_has = 1;
                return LD_OK;
            }
            return LD_OK;
        }
        if (r < ARCHIVE_WARN) return header_failed(in, r, &nfails, err);
        if (!in->is_archive) {
            LD_TRY(set_member_name(in, NULL, err));
        } else {
            if (!entry_is_log(e)) continue;
            LD_TRY(set_member_name(in, entry_name(e), err));
        }
        start_member(in);
        *out_has = 1;
        return LD_OK;
    }
}

ld_status ld_input_next_member(ld_input *in, int *out_has, ld_error *err)
{
    *out_has = 0;
    if (!in->ar || in->dead) {
        /* plain input has exactly one member, made current by open */
        in->has_member = 0;
        return LD_OK;
    }
    in->has_member = 0;
    return archive_next(in, out_has, err);
}

/* ---------------------------------------------------------------- reading */

static ld_status read_plain(ld_input *in, unsigned char *buf, size_t cap,
                            size_t *out_n, ld_error *err)
{
    size_t n = 0;
    if (in->kind == LD_SRC_MEM) {
        size_t left = in->mem_len - (size_t)in->pos;
        n = left < cap ? left : cap;
        memcpy(buf, in->mem + in->pos, n);
    } else if (in->pos < in->prefix_len) {
        size_t left = in->prefix_len - (size_t)in->pos;
        n = left < cap ? left : cap;
        memcpy(buf, in->prefix + in->pos, n);
    } else {
        ssize_t r = read_full(in->fd, buf, cap);
        if (r < 0)
            return fail_msg(err, LD_ERR_IO, in->delivered, in->member,
                            "read error", strerror(errno));
        n = (size_t)r;
    }
    in->pos += n;
    in->consumed += n;
    *out_n = n;
    return LD_OK;
}

/* Copies from the pending libarchive block; holes of sparse members
 * (block offset beyond what was delivered) read as zeros. */
static size_t copy_block(ld_input *in, unsigned char *buf, size_t cap)
{
    if ((uint64_t)in->blk_off > in->delivered) {
        uint64_t hole = (uint64_t)in->blk_off - in->delivered;
        size_t n = hole < cap ? (size_t)hole : cap;
        memset(buf, 0, n);
        return n;
    }
    size_t n = in->blk_len < cap ? in->blk_len : cap;
    memcpy(buf, in->blk, n);
    in->blk = (const unsigned char *)in->blk + n;
    in->blk_len -= n;
    in->blk_off += (int64_t)n;
    return n;
}

/* Next data block of archive `a` (the input's, or the inner decoder of a
 * compressed member).  At the member's end: LD_OK with member_done set.  A
 * warning (e.g. a bad CRC) is a damaged member too. */
static ld_status data_block(ld_input *in, struct archive *a, const void **out,
                            size_t *out_n, la_int64_t *out_off, const char *why_default,
                            ld_error *err)
{
    *out_n = 0;
    *out_off = 0;
    int r = ld_la.archive_read_data_block(a, out, out_n, out_off);
    if (r == ARCHIVE_EOF && in->gz_why[0]) r = ARCHIVE_FATAL; /* see gz_why */
    if (r == ARCHIVE_EOF) {
        in->member_done = 1;
        return LD_OK;
    }
    if (r != ARCHIVE_OK) {
        in->member_done = 1;
        const char *why = in->gz_why[0] ? in->gz_why : ld_la.archive_error_string(a);
        return fail_msg(err, LD_ERR_IO, in->delivered, in->member, NULL, why ? why : why_default);
    }
    return LD_OK;
}

/* Makes the next block of the current archive member pending (in->blk);
 * leaves blk_len == 0 and member_done set at the member's end. */
static ld_status fill_block(ld_input *in, ld_error *err)
{
    while (in->blk_len == 0 && !in->member_done) {
        const void *b;
        size_t n;
        la_int64_t off;
        LD_TRY(data_block(in, in->ar, &b, &n, &off, "corrupt or truncated data", err));
        if (in->member_done) return LD_OK;
        in->blk = b;
        in->blk_len = n;
        /* never move backwards: overlapping blocks are cut to what's new */
        in->blk_off = off < (la_int64_t)in->delivered ? (int64_t)in->delivered
                                                      : off;
    }
    return LD_OK;
}

/* Inner decoder's read callback: the outer member's bytes, block by block
 * (the first one already pending from the sniff). */
static la_ssize_t cb_inner_read(struct archive *a, void *ud, const void **buf)
{
    ld_input *in = ud;
    if (in->blk_len == 0 && !in->outer_eof) {
        const void *b;
        size_t n = 0;
        la_int64_t off = 0;
        int r = ld_la.archive_read_data_block(in->ar, &b, &n, &off);
        if (r == ARCHIVE_EOF) {
            in->outer_eof = 1;
        } else if (r != ARCHIVE_OK) {
            const char *why = ld_la.archive_error_string(in->ar);
            ld_la.archive_set_error(a, EIO, "%s", why ? why : "corrupt archive member");
            return -1;
        } else {
            in->blk = b;
            in->blk_len = n;
        }
    }
    *buf = in->blk;
    la_ssize_t n = (la_ssize_t)in->blk_len;
    in->blk = NULL;
    in->blk_len = 0;
    return n;
}

static la_ssize_t cb_inner_read_gz(struct archive *a, void *ud, const void **buf)
{
    ld_input *in = ud;
    return gz_read(a, in, in->igz, in->igzbuf, cb_inner_read, buf);
}

/* The compressions libarchive recognises, for an input and an archive member alike. */
static void support_filters(struct archive *a)
{
    ld_la.archive_read_support_filter_gzip(a);
    ld_la.archive_read_support_filter_zstd(a);
    ld_la.archive_read_support_filter_xz(a);
    ld_la.archive_read_support_filter_bzip2(a);
    ld_la.archive_read_support_filter_lz4(a);
    ld_la.archive_read_support_filter_lzip(a);
}

/* A member whose first bytes are a compression magic number (rotated
 * server-1.log.gz inside logs.tar) is decoded by a second libarchive
 * reader, fed from the outer member; it keeps the outer member's name. */
static ld_status open_inner(ld_input *in, ld_error *err)
{
    struct archive *a = ld_la.archive_read_new();
    if (!a) return LD_FAIL(err, LD_ERR_NOMEM, 0, "libarchive handle");
    support_filters(a);
    ld_la.archive_read_support_format_raw(a);
    ld_la.archive_read_support_format_empty(a);
    in->inner = a;
    raw_read_fn rd = cb_inner_read;
    in->gz_why[0] = 0; /* the outer stream is sound, or this would not be read */
    if (is_gzip(in->blk, in->blk_len)) {
        LD_TRY(ld_gunzip_new(&in->igz, err));
        if (!in->igzbuf && !(in->igzbuf = malloc(LD_IN_BLOCK)))
            return LD_FAIL(err, LD_ERR_NOMEM, 0, "gzip buffer");
        rd = cb_inner_read_gz;
    }
    struct archive_entry *e;
    if (ld_la.archive_read_open(a, in, NULL, rd, NULL) != ARCHIVE_OK ||
        ld_la.archive_read_next_header(a, &e) < ARCHIVE_WARN) {
        in->member_done = 1;
        const char *why = ld_la.archive_error_string(a);
        return fail_msg(err, LD_ERR_IO, 0, in->member, "cannot decompress member",
                        why ? why : "unknown format");
    }
    return LD_OK;
}

static ld_status read_inner(ld_input *in, unsigned char *buf, size_t cap,
                            size_t *out_n, ld_error *err)
{
    while (in->iblk_len == 0) {
        const void *b;
        size_t n;
        la_int64_t off;
        LD_TRY(data_block(in, in->inner, &b, &n, &off,
                          "corrupt or truncated compressed member", err));
        if (in->member_done) return LD_OK;
        in->iblk = b;
        in->iblk_len = n;
    }
    size_t n = in->iblk_len < cap ? in->iblk_len : cap;
    memcpy(buf, in->iblk, n);
    in->iblk = (const unsigned char *)in->iblk + n;
    in->iblk_len -= n;
    *out_n = n;
    return LD_OK;
}

static ld_status read_archive(ld_input *in, unsigned char *buf, size_t cap,
                              size_t *out_n, ld_error *err)
{
    if (in->inner) return read_inner(in, buf, cap, out_n, err);
    LD_TRY(fill_block(in, err));
    if (in->blk_len == 0) return LD_OK;
    if (in->is_archive && !in->inner_checked) {
        in->inner_checked = 1;
        if (in->blk_off == 0 && compressed_magic(in->blk, in->blk_len)) {
            LD_TRY(open_inner(in, err));
            return read_inner(in, buf, cap, out_n, err);
        }
    }
    *out_n = copy_block(in, buf, cap);
    return LD_OK;
}

ld_status ld_input_read(ld_input *in, void *buf, size_t cap, size_t *out_n,
                        ld_error *err)
{
    *out_n = 0;
    if (!in->has_member || in->member_done || cap == 0) return LD_OK;
    ld_status st = in->ar ? read_archive(in, buf, cap, out_n, err)
                          : read_plain(in, buf, cap, out_n, err);
    if (st != LD_OK) {
        in->member_done = 1;
        return st;
    }
    if (*out_n == 0) in->member_done = 1;
    in->delivered += *out_n;
    return LD_OK;
}

/* ---------------------------------------------------------------- opening */

static ld_status open_archive(ld_input *in, ld_error *err)
{
    ld_error why = {0};
    if (ld_archive_lib_need(&why) != LD_OK)
        return fail_msg(err, LD_ERR_UNSUPPORTED, 0, in->path, "cannot read", why.msg);
    in->ar = ld_la.archive_read_new();
    if (!in->ar) return LD_FAIL(err, LD_ERR_NOMEM, 0, "libarchive handle");
    struct archive *a = in->ar;
    support_filters(a);
    ld_la.archive_read_support_format_tar(a);
    ld_la.archive_read_support_format_zip(a);
    ld_la.archive_read_support_format_raw(a);
    ld_la.archive_read_support_format_empty(a);
    if (in->kind == LD_SRC_FD) {
        in->block = malloc(LD_IN_BLOCK);
        if (!in->block) return LD_FAIL(err, LD_ERR_NOMEM, 0, "read buffer");
    }
    const unsigned char *p = in->kind == LD_SRC_MEM ? in->mem : in->prefix;
    size_t n = in->kind == LD_SRC_MEM ? in->mem_len : in->prefix_len;
    ld_la.archive_read_set_callback_data(a, in);
    ld_la.archive_read_set_read_callback(a, cb_read);
    if (is_gzip(p, n)) {
        LD_TRY(ld_gunzip_new(&in->gz, err));
        if (!(in->gzbuf = malloc(LD_IN_BLOCK))) return LD_FAIL(err, LD_ERR_NOMEM, 0, "gzip buffer");
        ld_la.archive_read_set_read_callback(a, cb_read_gz);
    } else if (in->seekable) {
        ld_la.archive_read_set_seek_callback(a, cb_seek);
        ld_la.archive_read_set_skip_callback(a, cb_skip);
    }
    if (ld_la.archive_read_open1(a) != ARCHIVE_OK)
        return fail_msg(err, LD_ERR_IO, 0, in->path, "cannot open",
                        ld_la.archive_error_string(a));
    return LD_OK;
}

/* Sniffs the prefix and makes the first member current. */
static ld_status finish_open(ld_input *in, ld_error *err)
{
    const unsigned char *p = in->kind == LD_SRC_MEM ? in->mem : in->prefix;
    size_t n = in->kind == LD_SRC_MEM ? in->mem_len : in->prefix_len;
    if (!needs_libarchive(p, n)) {
        LD_TRY(set_member_name(in, NULL, err));
        start_member(in);
        in->started = 1;
        return LD_OK;
    }
    LD_TRY(open_archive(in, err));
    int has = 0;
    LD_TRY(archive_next(in, &has, err));
    if (!has) {
        /* an archive without a regular member: an empty current member */
        LD_TRY(set_member_name(in, NULL, err));
        in->has_member = 0;
    }
    return LD_OK;
}

static ld_status new_input(const char *name, ld_input **out, ld_error *err)
{
    ld_input *in = calloc(1, sizeof *in);
    if (!in) return LD_FAIL(err, LD_ERR_NOMEM, 0, "input");
    in->fd = -1;
    in->path = dup_str(name);
    if (!in->path) {
        free(in);
        return LD_FAIL(err, LD_ERR_NOMEM, 0, "input");
    }
    *out = in;
    return LD_OK;
}

static ld_status open_fd(ld_input *in, const char *path, ld_error *err)
{
    if (strcmp(path, "-") == 0) {
        in->fd = STDIN_FILENO;
    } else {
        in->fd = open(path, O_RDONLY | O_CLOEXEC);
        if (in->fd < 0)
            return fail_msg(err, LD_ERR_IO, 0, path, "cannot open",
                            strerror(errno));
        in->own_fd = 1;
    }
    struct stat st;
    if (fstat(in->fd, &st) != 0)
        return fail_msg(err, LD_ERR_IO, 0, path, "cannot stat",
                        strerror(errno));
    if (S_ISDIR(st.st_mode)) {
        if (err) err->path = path;
        return LD_FAIL(err, LD_ERR_IO, 0, "cannot read: is a directory");
    }
    if (S_ISREG(st.st_mode)) {
        in->file_size = (uint64_t)st.st_size;
        /* seeking needs the fd at offset 0 now (stdin may be elsewhere) */
        in->seekable = lseek(in->fd, 0, SEEK_CUR) == 0;
    }
    return read_prefix(in, err);
}

ld_status ld_input_open(const char *path, ld_input **out, ld_error *err)
{
    *out = NULL;
    if (!path) return LD_FAIL(err, LD_ERR_USAGE, 0, "no path");
    ld_input *in;
    LD_TRY(new_input(path, &in, err));
    in->kind = LD_SRC_FD;
    ld_status st = open_fd(in, path, err);
    if (st == LD_OK) st = finish_open(in, err);
    if (st != LD_OK) {
        if (err && err->path == in->path) err->path = path;
        if (err && err->path == in->member) err->path = path;
        ld_input_close(in);
        return st;
    }
    *out = in;
    return LD_OK;
}

ld_status ld_input_open_memory(const void *data, size_t len, const char *name,
                               ld_input **out, ld_error *err)
{
    *out = NULL;
    if (!data && len) return LD_FAIL(err, LD_ERR_USAGE, 0, "no data");
    ld_input *in;
    LD_TRY(new_input(name ? name : "<memory>", &in, err));
    in->kind = LD_SRC_MEM;
    in->mem = data ? data : (const void *)"";
    in->mem_len = len;
    in->file_size = len;
    in->seekable = 1;
    ld_status st = finish_open(in, err);
    if (st != LD_OK) {
        /* the error's path must outlive the input: use the caller's name */
        if (err) err->path = name;
        ld_input_close(in);
        return st;
    }
    *out = in;
    return LD_OK;
}

/* ---------------------------------------------------------------- mapping */

int ld_input_map(ld_input *in, const char **out_data, size_t *out_len)
{
    if (in->map) {
        *out_data = in->map;
        *out_len = in->map_len;
        return 1;
    }
    /* only a plain regular file opened by path, not yet read past its prefix */
    if (in->kind != LD_SRC_FD || in->ar || !in->own_fd || !in->seekable ||
        !in->file_size || in->pos != 0 || in->file_size > (uint64_t)SIZE_MAX)
        return 0;
    void *m = mmap(NULL, (size_t)in->file_size, PROT_READ, MAP_PRIVATE, in->fd, 0);
    if (m == MAP_FAILED) return 0; /* the read() path still works */
    posix_madvise(m, (size_t)in->file_size, POSIX_MADV_SEQUENTIAL);
    in->map = m;
    in->map_len = (size_t)in->file_size;
    *out_data = in->map;
    *out_len = in->map_len;
    return 1;
}

void ld_input_map_release(ld_input *in, uint64_t off)
{
    if (!in->map || off > in->map_len) return;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t upto = (size_t)off / page * page;
    in->consumed = off;
    if (upto <= in->map_released) return;
    munmap(in->map + in->map_released, upto - in->map_released);
    in->map_released = upto;
}

static void unmap(ld_input *in)
{
    if (in->map && in->map_len > in->map_released)
        munmap(in->map + in->map_released, in->map_len - in->map_released);
    in->map = NULL;
}

/* ---------------------------------------------------------------- queries */

const char *ld_input_member_name(const ld_input *in)
{
    return in->member ? in->member : in->path;
}

int ld_input_is_archive(const ld_input *in) { return in->is_archive; }

uint64_t ld_input_bytes_consumed(const ld_input *in)
{
    if (in->file_size && in->consumed > in->file_size) return in->file_size;
    return in->consumed;
}

uint64_t ld_input_file_size(const ld_input *in) { return in->file_size; }

void ld_input_close(ld_input *in)
{
    if (!in) return;
    drop_inner(in);
    unmap(in);
    if (in->ar) ld_la.archive_read_free(in->ar);
    if (in->own_fd && in->fd >= 0) close(in->fd);
    free(in->block);
    ld_gunzip_free(in->gz);
    free(in->gzbuf);
    free(in->igzbuf);
    free(in->prefix);
    free(in->member);
    free(in->path);
    free(in);
}
