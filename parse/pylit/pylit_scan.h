/* pylit_scan.h - the end of a quoted string found 64 bytes a step: in a
 * Python or JSON string literal every backslash escapes the byte after it
 * (so runs of backslashes pair up), and the escaped bytes of a whole block
 * are found at once, with no branch per escape (simdjson's odd-run
 * carry).  Shared by the parser (pylit.c) and the literal follower of
 * parse/line (logline_scan.c).  The blocks are read with AVX-512BW or AVX2
 * where the machine has them (chosen at run time), SSE2 otherwise, and
 * byte by byte on other architectures; every path gives the same answer
 * (tests). */
#ifndef LD_PYLIT_SCAN_H
#define LD_PYLIT_SCAN_H

#include <stddef.h>
#include <stdint.h>

/* The index in s[0..n) of the first byte equal to q that no backslash
 * escapes, or n when there is none.  *escape: on entry, whether s[0] is
 * escaped (the piece before ended in an escaping backslash); when n is
 * returned, whether the byte after s[n-1] is.  *backslash is set to 1 when a
 * backslash lies before the index returned (left alone otherwise). */
size_t ld_pyp_string_end(const char *s, size_t n, char q, int *escape, int *backslash);

/* The same with the block reader chosen by the caller, for the tests: 0
 * byte by byte, 1 SSE2, 2 AVX2, 3 AVX-512BW; a level the build or the
 * machine lacks falls back to the next one below.  (The same holds for
 * ld_pyp_simple_escapes_at.) */
size_t ld_pyp_string_end_at(int level, const char *s, size_t n, char q, int *escape, int *backslash);

/* The escapes of a string's raw text s[0..n) (its first byte not
 * escaped), 64 bytes a step: returns how many there are before *stop, all
 * of them one-byte ones (a backslash and one of \\ ' " a b f n r t v: two
 * bytes that decode to one).  *stop is where the caller goes on byte by
 * byte: the backslash of the first escape of another kind, or where the
 * last whole block ends (the backslash before it when it escapes the next
 * byte); never inside an escape. */
size_t ld_pyp_simple_escapes(const char *s, size_t n, size_t *stop);
size_t ld_pyp_simple_escapes_at(int level, const char *s, size_t n, size_t *stop);

/* Decodes the one-byte escapes of raw[0..n) (its first byte not escaped)
 * into dst, 64 bytes a step, and returns the bytes written: raw[0..*stop)
 * decoded, *stop where ld_pyp_simple_escapes stops.  dst has room for n
 * bytes (whole blocks are stored; none passes dst + n).  Only where the
 * machine compresses bytes in a vector (AVX-512 VBMI2, level 4): elsewhere
 * it returns 0 with *stop 0, and the caller decodes byte by byte. */
size_t ld_pyp_decode_simple(const char *raw, size_t n, char *dst, size_t *stop);
size_t ld_pyp_decode_simple_at(int level, const char *raw, size_t n, char *dst, size_t *stop);

/* ld_pyp_decode_simple for a counted decode (ld_py_str_decode_count), from
 * raw[from] (not escaped) to the end of raw[0..n), the last block read and
 * stored through a mask: decodes raw[from..*stop) into dst and returns the
 * bytes written, *stop the backslash of the first escape of another kind,
 * or n.  Adds to *cont the continuation bytes (10xxxxxx) written, and sets
 * *bad nonzero when a byte of raw it read breaks a UTF-8 rule as
 * ld_utf8_count_chars judges them (read with the three bytes before it,
 * zeros before raw[0]; the text cut inside a character is the caller's
 * to check).  dst has room for n - from bytes.  Level 4 (AVX-512 VBMI2)
 * only: elsewhere it returns 0 with *stop = from. */
size_t ld_pyp_decode_count(const char *raw, size_t n, size_t from, char *dst, size_t *stop, size_t *cont,
                           uint64_t *bad);

/* ld_pyp_decode_count for machines with AVX2 (levels 2 and 3: no byte
 * compress), pylit_decode_avx2.c: the same contract and answers, 32 bytes a
 * step.  Call it only where ld_pyp_scan_level() >= 2 (elsewhere it returns 0
 * with *stop = from). */
size_t ld_pyp_decode_count_avx2(const char *raw, size_t n, size_t from, char *dst, size_t *stop, size_t *cont,
                                uint64_t *bad);

/* The highest level the functions above can run here: 0 byte by byte, 1
 * SSE2, 2 AVX2, 3 AVX-512BW, 4 AVX-512 VBMI2 (for ld_pyp_decode_simple; the
 * others read blocks as at 3). */
int ld_pyp_scan_level(void);

#endif
