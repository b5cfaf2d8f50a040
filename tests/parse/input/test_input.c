/* test_input.c - parse/input/input.c and parse/input/linereader.c: format sniffing,
 * decompression, archive members, stdin, line cutting, errors.
 *
 * Fixtures are written at test time with libarchive's write API (an
 * independent path from the reader under test) into
 * LD_BUILD_DIR/input_fixtures; every expected content is the bytes that were
 * written, and every read-back is checked byte for byte by re-joining the
 * lines with their terminators.
 */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "parse/input/input.h"
#include "tests/support/ld_test.h"

/* ---------------------------------------------------------------- helpers */

typedef struct buf {
    char *p;
    size_t len, cap;
} buf;

static int buf_add(buf *b, const void *p, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *np = realloc(b->p, cap);
        if (!np) return -1;
        b->p = np;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, p, n);
    b->len += n;
    b->p[b->len] = 0;
    return 0;
}

enum { MAX_MEMBERS = 16 };

/* What reading an input gave: per member its name, the re-joined bytes and
 * the error that ended it (LD_OK if none). */
typedef struct result {
    int n;
    int is_archive;
    char *name[MAX_MEMBERS];
    buf data[MAX_MEMBERS];
    uint64_t lines[MAX_MEMBERS];
    ld_status status[MAX_MEMBERS];
    ld_error err[MAX_MEMBERS];
    char *err_path[MAX_MEMBERS];  /* copy: err.path dies with the member */
    int next_errors;          /* errors from ld_input_next_member */
    int order_ok;             /* line numbers and offsets were consistent */
    size_t peak;
} result;

static void result_free(result *r)
{
    for (int i = 0; i < r->n; i++) {
        free(r->name[i]);
        free(r->data[i].p);
        free(r->err_path[i]);
    }
    memset(r, 0, sizeof *r);
}

/* Reads one member's lines into r->data[i]; checks numbering and offsets. */
static void read_member(ld_input *in, ld_linereader *lr, result *r, int i)
{
    ld_line line;
    int has;
    for (;;) {
        ld_error err;
        ld_error_clear(&err);
        ld_status st = ld_linereader_next(lr, &line, &has, &err);
        if (st != LD_OK) {
            r->status[i] = st;
            r->err[i] = err;
            free(r->err_path[i]);
            r->err_path[i] = strdup(err.path ? err.path : "(null)");
            if (st == LD_ERR_LIMIT) continue;
            return;
        }
        if (!has) return;
        r->lines[i]++;
        if (line.lineno != r->lines[i] || line.offset != r->data[i].len)
            r->order_ok = 0;
        buf_add(&r->data[i], line.data, line.len);
        if (line.crlf) buf_add(&r->data[i], "\r\n", 2);
        else if (!line.unterminated) buf_add(&r->data[i], "\n", 1);
    }
    (void)in;
}

static void read_all(ld_input *in, size_t max_line, result *r)
{
    memset(r, 0, sizeof *r);
    r->order_ok = 1;
    r->is_archive = ld_input_is_archive(in);
    ld_linereader *lr = NULL;
    if (ld_linereader_new(in, max_line, &lr, NULL) != LD_OK) return;
    int has = 1;
    int tries = 0;
    while (has && r->n < MAX_MEMBERS && tries++ < 100) {
        int i = r->n++;
        r->name[i] = strdup(ld_input_member_name(in));
        ld_linereader_reset(lr);
        read_member(in, lr, r, i);
        for (;;) {
            ld_error err;
            ld_status st = ld_input_next_member(in, &has, &err);
            if (st == LD_OK) break;
            r->next_errors++;
            if (tries++ > 100) break;
        }
    }
    r->peak = ld_linereader_peak_bytes(lr);
    ld_linereader_free(lr);
}

static int read_path(const char *path, result *r)
{
    ld_input *in;
    ld_error err;
    ld_status st = ld_input_open(path, &in, &err);
    if (st != LD_OK) {
        fprintf(stderr, "  open '%s': %s\n", path, err.msg);
        return -1;
    }
    read_all(in, 0, r);
    ld_input_close(in);
    return 0;
}

static const char *fixture_dir(void)
{
    static char dir[1024];
    if (!dir[0]) {
        snprintf(dir, sizeof dir, "%s/input_fixtures", LD_BUILD_DIR);
        mkdir(dir, 0777);
    }
    return dir;
}

static const char *fixture(const char *name)
{
    static char paths[8][1200];
    static int k;
    char *p = paths[k++ % 8];
    snprintf(p, 1200, "%s/%.100s", fixture_dir(), name);
    return p;
}

static int write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(data, 1, len, f);
    return fclose(f) == 0 && w == len ? 0 : -1;
}

static int read_file(const char *path, buf *out)
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    char tmp[65536];
    size_t n;
    while ((n = fread(tmp, 1, sizeof tmp, f)) > 0) buf_add(out, tmp, n);
    fclose(f);
    return 0;
}

typedef enum { F_NONE, F_GZIP, F_ZSTD, F_XZ, F_BZIP2 } filt;
static const char *const filt_ext[] = { "", ".gz", ".zst", ".xz", ".bz2" };

static int add_filter(struct archive *a, filt f)
{
    int r = ARCHIVE_OK;
    switch (f) {
    case F_NONE: break;
    case F_GZIP: r = archive_write_add_filter_gzip(a); break;
    case F_ZSTD: r = archive_write_add_filter_zstd(a); break;
    case F_XZ: r = archive_write_add_filter_xz(a); break;
    case F_BZIP2: r = archive_write_add_filter_bzip2(a); break;
    }
    return r == ARCHIVE_OK ? 0 : -1;
}

/* One member of a fixture archive; type 0 = regular file. */
typedef struct member {
    const char *name;
    const char *data;
    size_t len;
    int type;
} member;

/* format: "raw" (single stream, one member), "pax" or "zip". */
static int write_archive(const char *path, const char *format, filt f,
                         const member *m, int n)
{
    struct archive *a = archive_write_new();
    int ok = add_filter(a, f) == 0;
    if (strcmp(format, "raw") == 0) ok = ok && archive_write_set_format_raw(a) == ARCHIVE_OK;
    else if (strcmp(format, "pax") == 0) ok = ok && archive_write_set_format_pax_restricted(a) == ARCHIVE_OK;
    else ok = ok && archive_write_set_format_zip(a) == ARCHIVE_OK;
    /* the raw format wants a padding-free last block */
    ok = ok && archive_write_set_bytes_in_last_block(a, 1) == ARCHIVE_OK;
    ok = ok && archive_write_open_filename(a, path) == ARCHIVE_OK;
    for (int i = 0; ok && i < n; i++) {
        struct archive_entry *e = archive_entry_new();
        archive_entry_set_pathname(e, m[i].name);
        int type = m[i].type ? m[i].type : (int)AE_IFREG;
        archive_entry_set_filetype(e, (unsigned)type);
        archive_entry_set_perm(e, type == AE_IFDIR ? 0755 : 0644);
        if (type == AE_IFLNK) archive_entry_set_symlink(e, "a.log");
        archive_entry_set_size(e, type == AE_IFREG ? (la_int64_t)m[i].len : 0);
        ok = archive_write_header(a, e) == ARCHIVE_OK;
        if (ok && type == AE_IFREG && m[i].len)
            ok = archive_write_data(a, m[i].data, m[i].len) == (la_ssize_t)m[i].len;
        archive_entry_free(e);
    }
    if (!ok) fprintf(stderr, "  libarchive write: %s\n", archive_error_string(a));
    ok = archive_write_close(a) == ARCHIVE_OK && ok;
    archive_write_free(a);
    return ok ? 0 : -1;
}

static int write_stream(const char *path, filt f, const char *data, size_t len)
{
    member m = { "data", data, len, 0 };
    return write_archive(path, "raw", f, &m, 1);
}

static int bytes_eq(const buf *b, const char *data, size_t len)
{
    return b->len == len && (len == 0 || memcmp(b->p, data, len) == 0);
}

/* Text with '[' and '{' lines, CRLF, invalid UTF-8 and a final line without
 * a newline: a worst case for both the sniffer and the reader. */
static const char sample[] =
    "[2024-05-01 12:00:00] INFO Receive: obj=GenerateReqInput(text='hi')\n"
    "{\"event\": \"req\", \"id\": 1}\r\n"
    "\n"
    "bad utf-8: \xff\xfe\xc3\x28 \xe2\x82 end\n"
    "tab\tand\rlone cr\n"
    "last line without newline";

/* Lines of roughly `total` bytes: "line <n> <padding>\n". */
static char *make_lines(size_t total, size_t *out_len)
{
    char *p = malloc(total + 64);
    size_t n = 0;
    for (unsigned i = 0; n < total; i++)
        n += (size_t)sprintf(p + n, "line %u %.*s\n", i, (int)(i % 53),
                             "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0");
    *out_len = n;
    return p;
}

/* ---------------------------------------------------------------- cases */

static int test_input_plain_text(void)
{
    const char *path = fixture("plain.log");
    CHECK(write_file(path, sample, sizeof sample - 1) == 0);
    result r;
    CHECK(read_path(path, &r) == 0);
    CHECK_EQ_INT(r.n, 1);
    CHECK_EQ_STR(r.name[0], path);
    CHECK_EQ_INT(r.is_archive, 0);
    CHECK_EQ_INT(r.status[0], LD_OK);
    CHECK(r.order_ok);
    CHECK_EQ_INT(r.lines[0], 6);
    CHECK(bytes_eq(&r.data[0], sample, sizeof sample - 1));
    result_free(&r);
    return 0;
}

static int test_input_line_flags(void)
{
    static const char text[] = "a\r\nbb\n\r\nccc\r";
    ld_input *in;
    CHECK_EQ_INT(ld_input_open_memory(text, sizeof text - 1, "m", &in, NULL), LD_OK);
    ld_linereader *lr;
    CHECK_EQ_INT(ld_linereader_new(in, 0, &lr, NULL), LD_OK);
    ld_line l;
    int has;
    struct { const char *s; size_t len; uint64_t off; int crlf, unterm; } want[] = {
        { "a", 1, 0, 1, 0 }, { "bb", 2, 3, 0, 0 }, { "", 0, 6, 1, 0 },
        { "ccc\r", 4, 8, 0, 1 },
    };
    for (size_t i = 0; i < 4; i++) {
        CHECK_EQ_INT(ld_linereader_next(lr, &l, &has, NULL), LD_OK);
        CHECK(has);
        CHECK_EQ_INT(l.len, want[i].len);
        CHECK(memcmp(l.data, want[i].s, l.len) == 0);
        CHECK_EQ_INT(l.lineno, i + 1);
        CHECK_EQ_INT(l.offset, want[i].off);
        CHECK_EQ_INT(l.crlf, want[i].crlf);
        CHECK_EQ_INT(l.unterminated, want[i].unterm);
    }
    CHECK_EQ_INT(ld_linereader_next(lr, &l, &has, NULL), LD_OK);
    CHECK(!has);
    CHECK_EQ_INT(ld_linereader_next(lr, &l, &has, NULL), LD_OK);
    CHECK(!has);
    int more;
    CHECK_EQ_INT(ld_input_next_member(in, &more, NULL), LD_OK);
    CHECK(!more);
    CHECK_EQ_INT(ld_input_bytes_consumed(in), sizeof text - 1);
    CHECK_EQ_INT(ld_input_file_size(in), sizeof text - 1);
    ld_linereader_free(lr);
    ld_input_close(in);
    return 0;
}

static int test_input_empty_file(void)
{
    const char *path = fixture("empty.log");
    CHECK(write_file(path, "", 0) == 0);
    result r;
    CHECK(read_path(path, &r) == 0);
    CHECK_EQ_INT(r.n, 1);
    CHECK_EQ_STR(r.name[0], path);
    CHECK_EQ_INT(r.lines[0], 0);
    CHECK_EQ_INT(r.data[0].len, 0);
    result_free(&r);
    return 0;
}

static int test_input_binary_junk(void)
{
    /* NULs, high bytes, no newline for long stretches, a near-miss magic */
    size_t len = 300000;
    char *junk = malloc(len);
    uint32_t x = 12345;
    for (size_t i = 0; i < len; i++) {
        x = x * 1103515245u + 12345u;
        junk[i] = (char)(x >> 24);
    }
    junk[0] = '\x1f';  /* gzip's first byte, not its second */
    junk[1] = 'x';
    const char *path = fixture("junk.bin");
    CHECK(write_file(path, junk, len) == 0);
    result r;
    CHECK(read_path(path, &r) == 0);
    CHECK_EQ_INT(r.n, 1);
    CHECK_EQ_INT(r.status[0], LD_OK);
    CHECK(r.order_ok);
    CHECK(bytes_eq(&r.data[0], junk, len));
    result_free(&r);
    /* the same bytes from memory */
    ld_input *in;
    CHECK_EQ_INT(ld_input_open_memory(junk, len, "junk", &in, NULL), LD_OK);
    read_all(in, 0, &r);
    ld_input_close(in);
    CHECK_EQ_INT(r.n, 1);
    CHECK_EQ_STR(r.name[0], "junk");
    CHECK(bytes_eq(&r.data[0], junk, len));
    result_free(&r);
    free(junk);
    return 0;
}

static int check_stream(filt f)
{
    size_t len;
    char *text = make_lines(1 << 20, &len);
    char name[64];
    snprintf(name, sizeof name, "stream.log%s", filt_ext[f]);
    const char *path = fixture(name);
    CHECK(write_stream(path, f, text, len) == 0);
    result r;
    CHECK(read_path(path, &r) == 0);
    CHECK_EQ_INT(r.n, 1);
    CHECK_EQ_STR(r.name[0], path);
    CHECK_EQ_INT(r.is_archive, 0);
    CHECK_EQ_INT(r.status[0], LD_OK);
    CHECK(r.order_ok);
    CHECK(bytes_eq(&r.data[0], text, len));
    result_free(&r);
    /* the sample (unterminated last line, CRLF, bad UTF-8) and an empty one */
    snprintf(name, sizeof name, "sample.log%s", filt_ext[f]);
    path = fixture(name);
    CHECK(write_stream(path, f, sample, sizeof sample - 1) == 0);
    CHECK(read_path(path, &r) == 0);
    CHECK_EQ_INT(r.n, 1);
    CHECK(bytes_eq(&r.data[0], sample, sizeof sample - 1));
    result_free(&r);
    snprintf(name, sizeof name, "empty.log%s", filt_ext[f]);
    path = fixture(name);
    CHECK(write_stream(path, f, "", 0) == 0);
    CHECK(read_path(path, &r) == 0);
    CHECK_EQ_INT(r.n, 1);
    CHECK_EQ_STR(r.name[0], path);
    CHECK_EQ_INT(r.data[0].len, 0);
    CHECK_EQ_INT(r.status[0], LD_OK);
    result_free(&r);
    free(text);
    return 0;
}

static int test_input_gzip_stream(void) { return check_stream(F_GZIP); }
static int test_input_zstd_stream(void) { return check_stream(F_ZSTD); }
static int test_input_xz_stream(void) { return check_stream(F_XZ); }
static int test_input_bzip2_stream(void) { return check_stream(F_BZIP2); }

static const char member_b[] = "{\"b\": 1}\n{\"b\": 2}\r\n";

/* An archive with a regular file, a directory, a file in it, a symlink
 * and an empty file; the regular ones come back as "path:member". */
static int check_archive(const char *format, filt f, const char *ext)
{
    size_t len;
    char *text = make_lines(300000, &len);
    member m[] = {
        { "a.log", text, len, 0 },
        { "dir/", NULL, 0, AE_IFDIR },
        { "dir/b.log", member_b, sizeof member_b - 1, 0 },
        { "link.log", NULL, 0, AE_IFLNK },
        { "empty.log", "", 0, 0 },
        { "c.log", sample, sizeof sample - 1, 0 },
    };
    char name[64];
    snprintf(name, sizeof name, "arch%s", ext);
    const char *path = fixture(name);
    CHECK(write_archive(path, format, f, m, 6) == 0);
    result r;
    CHECK(read_path(path, &r) == 0);
    CHECK_EQ_INT(r.is_archive, 1);
    CHECK_EQ_INT(r.n, 4);
    CHECK_EQ_INT(r.next_errors, 0);
    const member *want[] = { &m[0], &m[2], &m[4], &m[5] };
    for (int i = 0; i < 4; i++) {
        char full[1400];
        snprintf(full, sizeof full, "%s:%s", path, want[i]->name);
        CHECK_EQ_STR(r.name[i], full);
        CHECK_EQ_INT(r.status[i], LD_OK);
        CHECK(bytes_eq(&r.data[i], want[i]->data, want[i]->len));
    }
    CHECK(r.order_ok);
    CHECK_EQ_INT(r.lines[1], 2);
    result_free(&r);
    free(text);
    return 0;
}

static int test_input_tar(void) { return check_archive("pax", F_NONE, ".tar"); }
static int test_input_tar_gzip(void) { return check_archive("pax", F_GZIP, ".tar.gz"); }
static int test_input_tar_zstd(void) { return check_archive("pax", F_ZSTD, ".tar.zst"); }
static int test_input_tar_xz(void) { return check_archive("pax", F_XZ, ".tar.xz"); }
static int test_input_tar_bzip2(void) { return check_archive("pax", F_BZIP2, ".tar.bz2"); }
static int test_input_zip(void) { return check_archive("zip", F_NONE, ".zip"); }

/* Runs the input through fd 0 from a child writing into a pipe. */
static int read_stdin(const char *data, size_t len, result *r)
{
    int fds[2];
    if (pipe(fds) != 0) return -1;
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        close(fds[0]);
        size_t off = 0;
        while (off < len) {
            ssize_t w = write(fds[1], data + off, len - off);
            if (w <= 0) _exit(1);
            off += (size_t)w;
        }
        _exit(0);
    }
    close(fds[1]);
    int saved = dup(0);
    dup2(fds[0], 0);
    close(fds[0]);
    ld_input *in;
    ld_error err;
    ld_status st = ld_input_open("-", &in, &err);
    if (st == LD_OK) {
        if (ld_input_file_size(in) != 0) st = LD_ERR_MISMATCH;
        read_all(in, 0, r);
        ld_input_close(in);
    }
    dup2(saved, 0);
    close(saved);
    int status;
    waitpid(pid, &status, 0);
    return st == LD_OK ? 0 : -1;
}

static int test_input_stdin(void)
{
    size_t len;
    char *text = make_lines(3 << 20, &len);
    result r;
    CHECK(read_stdin(text, len, &r) == 0);
    CHECK_EQ_INT(r.n, 1);
    CHECK_EQ_STR(r.name[0], "-");
    CHECK(r.order_ok);
    CHECK(bytes_eq(&r.data[0], text, len));
    result_free(&r);
    /* a gzip stream and a tar.gz through the pipe (no seeking) */
    const char *path = fixture("stdin.log.gz");
    CHECK(write_stream(path, F_GZIP, text, len) == 0);
    buf gz = { 0 };
    CHECK(read_file(path, &gz) == 0);
    CHECK(read_stdin(gz.p, gz.len, &r) == 0);
    CHECK_EQ_INT(r.n, 1);
    CHECK(bytes_eq(&r.data[0], text, len));
    result_free(&r);
    free(gz.p);
    CHECK(check_archive("pax", F_GZIP, ".stdin.tar.gz") == 0);
    gz = (buf){ 0 };
    CHECK(read_file(fixture("arch.stdin.tar.gz"), &gz) == 0);
    CHECK(read_stdin(gz.p, gz.len, &r) == 0);
    CHECK_EQ_INT(r.n, 4);
    CHECK_EQ_STR(r.name[1], "-:dir/b.log");
    CHECK(bytes_eq(&r.data[1], member_b, sizeof member_b - 1));
    result_free(&r);
    free(gz.p);
    /* a zip through a pipe is read with the streaming reader */
    CHECK(check_archive("zip", F_NONE, ".stdin.zip") == 0);
    gz = (buf){ 0 };
    CHECK(read_file(fixture("arch.stdin.zip"), &gz) == 0);
    CHECK(read_stdin(gz.p, gz.len, &r) == 0);
    CHECK(r.n >= 2);
    CHECK_EQ_STR(r.name[1], "-:dir/b.log");
    CHECK(bytes_eq(&r.data[1], member_b, sizeof member_b - 1));
    result_free(&r);
    free(gz.p);
    free(text);
    return 0;
}

static uint64_t fnv1a(const void *p, size_t n)
{
    const unsigned char *s = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 1099511628211ull;
    return h;
}

/* Reads first / the long line / two short ones from `in` (closed here). */
static int check_long_line(ld_input *in, size_t big, uint64_t want, size_t len,
                           int buffered)
{
    ld_linereader *lr;    CHECK_EQ_INT(ld_linereader_new(in, 0, &lr, NULL), LD_OK);
    ld_line l;
    int has;
    CHECK_EQ_INT(ld_linereader_next(lr, &l, &has, NULL), LD_OK);
    CHECK(has && l.len == 5);
    CHECK_EQ_INT(ld_linereader_next(lr, &l, &has, NULL), LD_OK);
    CHECK(has);
    CHECK_EQ_INT(l.len, big);
    CHECK_EQ_INT(l.lineno, 2);
    CHECK_EQ_INT(l.offset, 6);
    CHECK(l.crlf);
    CHECK(fnv1a(l.data, l.len) == want);
    CHECK_EQ_INT(ld_linereader_next(lr, &l, &has, NULL), LD_OK);
    CHECK(has && l.len == 11 && memcmp(l.data, "short after", 11) == 0);
    CHECK_EQ_INT(l.offset, 6 + big + 2);
    CHECK_EQ_INT(ld_linereader_next(lr, &l, &has, NULL), LD_OK);
    CHECK(has && l.unterminated && l.len == 3);
    CHECK_EQ_INT(ld_linereader_next(lr, &l, &has, NULL), LD_OK);
    CHECK(!has);
    size_t peak = ld_linereader_peak_bytes(lr);
    if (buffered) CHECK_MSG(peak >= big && peak < 2 * big, "peak %zu", peak);
    else CHECK_MSG(peak < big, "peak %zu: a mapped file needs no line buffer", peak);
    CHECK_EQ_INT(ld_input_bytes_consumed(in), len);
    ld_linereader_free(lr);
    ld_input_close(in);
    return 0;
}

static int test_input_long_line_64mib(void)
{
    size_t big = (size_t)64 << 20;
    size_t len = big + 64;
    char *data = malloc(len);
    CHECK(data);
    memcpy(data, "first\n", 6);
    uint32_t x = 7;
    for (size_t i = 6; i < 6 + big; i++) {
        x = x * 1664525u + 1013904223u;
        char c = (char)(' ' + (x >> 25) % 90);  /* printable, no newline */
        data[i] = c;
    }
    uint64_t want = fnv1a(data + 6, big);
    memcpy(data + 6 + big, "\r\nshort after\nend", 17);
    len = 6 + big + 17;
    const char *path = fixture("long_line.log");
    CHECK(write_file(path, data, len) == 0);
    ld_input *in;
    /* a regular file is mapped: the line comes from the page cache */
    CHECK_EQ_INT(ld_input_open(path, &in, NULL), LD_OK);
    if (check_long_line(in, big, want, len, 0)) return 1;
    /* from memory (as from a pipe or a decompressor): the buffer holds it */
    CHECK_EQ_INT(ld_input_open_memory(data, len, "long", &in, NULL), LD_OK);
    if (check_long_line(in, big, want, len, 1)) return 1;
    remove(path);
    free(data);
    return 0;
}

static int test_input_line_limit(void)
{
    static const char text[] = "ok\n0123456789abcdef\nnext\n0123456789abcdefgh";
    ld_input *in;
    CHECK_EQ_INT(ld_input_open_memory(text, sizeof text - 1, "m", &in, NULL), LD_OK);
    ld_linereader *lr;
    CHECK_EQ_INT(ld_linereader_new(in, 8, &lr, NULL), LD_OK);
    ld_line l;
    int has;
    ld_error err;
    CHECK_EQ_INT(ld_linereader_next(lr, &l, &has, &err), LD_OK);
    CHECK(has && l.len == 2);
    CHECK_EQ_INT(ld_linereader_next(lr, &l, &has, &err), LD_ERR_LIMIT);
    CHECK_EQ_INT(err.line, 2);
    CHECK_EQ_INT(err.offset, 3);
    CHECK_EQ_STR(err.path, "m");  /* valid: same member */
    CHECK_EQ_INT(ld_linereader_next(lr, &l, &has, &err), LD_OK);
    CHECK(has && l.len == 4 && l.lineno == 3 && l.offset == 20);
    CHECK_EQ_INT(ld_linereader_next(lr, &l, &has, &err), LD_ERR_LIMIT);
    CHECK_EQ_INT(err.line, 4);
    CHECK_EQ_INT(ld_linereader_next(lr, &l, &has, &err), LD_OK);
    CHECK(!has);
    ld_linereader_free(lr);
    ld_input_close(in);
    return 0;
}

/* A compressed stream cut in half: the lines before the cut come through,
 * then LD_ERR_IO naming the member at the decompressed offset. */
static int check_truncated(filt f)
{
    size_t len;
    char *text = make_lines(4 << 20, &len);
    char name[64];
    snprintf(name, sizeof name, "trunc.log%s", filt_ext[f]);
    const char *path = fixture(name);
    CHECK(write_stream(path, f, text, len) == 0);
    buf whole = { 0 };
    CHECK(read_file(path, &whole) == 0);
    CHECK(write_file(path, whole.p, whole.len / 2) == 0);
    free(whole.p);
    result r;
    CHECK(read_path(path, &r) == 0);
    CHECK_EQ_INT(r.n, 1);
    CHECK_EQ_INT(r.status[0], LD_ERR_IO);
    CHECK_EQ_STR(r.err_path[0], path);
    CHECK_MSG(strstr(r.err[0].msg, "runcat") != NULL, "msg '%s'", r.err[0].msg);
    CHECK(r.lines[0] > 1000);
    CHECK(r.data[0].len < len);
    CHECK(bytes_eq(&r.data[0], text, r.data[0].len));  /* a prefix */
    CHECK(r.err[0].offset >= r.data[0].len);
    CHECK(r.err[0].offset <= len);
    CHECK_EQ_INT(r.err[0].line, r.lines[0] + 1);
    result_free(&r);
    free(text);
    return 0;
}

static int test_input_truncated_gzip(void) { return check_truncated(F_GZIP); }
static int test_input_truncated_zstd(void) { return check_truncated(F_ZSTD); }

static int test_input_zip_corrupt_member(void)
{
    size_t len;
    char *text = make_lines(200000, &len);
    member m[] = {
        { "good1.log", text, len, 0 },
        { "bad.log", text, len, 0 },
        { "good2.log", sample, sizeof sample - 1, 0 },
    };
    const char *path = fixture("corrupt.zip");
    CHECK(write_archive(path, "zip", F_NONE, m, 3) == 0);
    buf z = { 0 };
    CHECK(read_file(path, &z) == 0);
    /* flip bytes in the middle of bad.log's compressed data */
    char *hdr = NULL;
    for (size_t i = 0; i + 30 < z.len; i++)
        if (memcmp(z.p + i, "PK\x03\x04", 4) == 0 &&
            memcmp(z.p + i + 30, "bad.log", 7) == 0) {
            hdr = z.p + i;
            break;
        }
    CHECK(hdr);
    for (int i = 0; i < 64; i++) hdr[200 + i] ^= 0x5a;
    CHECK(write_file(path, z.p, z.len) == 0);
    result r;
    CHECK(read_path(path, &r) == 0);
    CHECK_EQ_INT(r.n, 3);
    char want[1400];
    snprintf(want, sizeof want, "%s:bad.log", path);
    CHECK_EQ_STR(r.name[1], want);
    CHECK_EQ_INT(r.status[0], LD_OK);
    CHECK(bytes_eq(&r.data[0], text, len));
    CHECK_EQ_INT(r.status[1], LD_ERR_IO);
    CHECK_EQ_STR(r.err_path[1], want);
    CHECK(r.err[1].msg[0] != 0);
    CHECK_EQ_INT(r.status[2], LD_OK);
    CHECK(bytes_eq(&r.data[2], sample, sizeof sample - 1));
    result_free(&r);
    /* the same from memory (seekable) */
    ld_input *in;
    CHECK_EQ_INT(ld_input_open_memory(z.p, z.len, "mem.zip", &in, NULL), LD_OK);
    read_all(in, 0, &r);
    ld_input_close(in);
    CHECK_EQ_INT(r.n, 3);
    CHECK_EQ_STR(r.name[2], "mem.zip:good2.log");
    CHECK_EQ_INT(r.status[1], LD_ERR_IO);
    CHECK(bytes_eq(&r.data[2], sample, sizeof sample - 1));
    result_free(&r);
    free(z.p);
    free(text);
    return 0;
}

/* An archive without a regular member: one empty current member named like
 * the archive, then no more. */
static int test_input_archive_without_files(void)
{
    member m[] = { { "dir/", NULL, 0, AE_IFDIR } };
    const char *path = fixture("onlydir.tar.gz");
    CHECK(write_archive(path, "pax", F_GZIP, m, 1) == 0);
    result r;
    CHECK(read_path(path, &r) == 0);
    CHECK_EQ_INT(r.is_archive, 1);
    CHECK_EQ_INT(r.n, 1);
    CHECK_EQ_STR(r.name[0], path);
    CHECK_EQ_INT(r.data[0].len, 0);
    result_free(&r);
    return 0;
}

static int test_input_open_errors(void)
{
    ld_input *in = (ld_input *)1;
    ld_error err;
    const char *missing = fixture("does-not-exist.log");
    CHECK_EQ_INT(ld_input_open(missing, &in, &err), LD_ERR_IO);
    CHECK(in == NULL);
    CHECK(err.path == missing);
    CHECK_MSG(strstr(err.msg, "no such file") != NULL, "msg '%s'", err.msg);
    CHECK_EQ_INT(ld_input_open(fixture_dir(), &in, &err), LD_ERR_IO);
    CHECK(err.path != NULL && strcmp(err.path, fixture_dir()) == 0);
    CHECK_MSG(strstr(err.msg, "directory") != NULL, "msg '%s'", err.msg);
    return 0;
}

static int test_input_progress(void)
{
    size_t len;
    char *text = make_lines(3 << 20, &len);
    const char *path = fixture("progress.log.zst");
    CHECK(write_stream(path, F_ZSTD, text, len) == 0);
    struct stat st;
    CHECK(stat(path, &st) == 0);
    ld_input *in;
    CHECK_EQ_INT(ld_input_open(path, &in, NULL), LD_OK);
    CHECK_EQ_INT(ld_input_file_size(in), st.st_size);
    CHECK(ld_input_bytes_consumed(in) <= (uint64_t)st.st_size);
    result r;
    read_all(in, 0, &r);
    CHECK(bytes_eq(&r.data[0], text, len));
    CHECK_EQ_INT(ld_input_bytes_consumed(in), st.st_size);
    ld_input_close(in);
    result_free(&r);
    free(text);
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_input_plain_text),
    LD_CASE(test_input_line_flags),
    LD_CASE(test_input_empty_file),
    LD_CASE(test_input_binary_junk),
    LD_CASE(test_input_gzip_stream),
    LD_CASE(test_input_zstd_stream),
    LD_CASE(test_input_xz_stream),
    LD_CASE(test_input_bzip2_stream),
    LD_CASE(test_input_tar),
    LD_CASE(test_input_tar_gzip),
    LD_CASE(test_input_tar_zstd),
    LD_CASE(test_input_tar_xz),
    LD_CASE(test_input_tar_bzip2),
    LD_CASE(test_input_zip),
    LD_CASE(test_input_stdin),
    LD_CASE(test_input_long_line_64mib),
    LD_CASE(test_input_line_limit),
    LD_CASE(test_input_truncated_gzip),
    LD_CASE(test_input_truncated_zstd),
    LD_CASE(test_input_zip_corrupt_member),
    LD_CASE(test_input_archive_without_files),
    LD_CASE(test_input_open_errors),
    LD_CASE(test_input_progress),
};

LD_TEST_MAIN(cases)
