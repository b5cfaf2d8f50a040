/* jsonline.h - a JSON object of plain members read in place, without a
 * tree: for the lines of the baseline and of regress's partials, a million
 * of which one merge reads (cJSON made a malloc'd item of every value).
 *
 * It takes only what it reads exactly as cJSON does: strings without
 * escapes or control bytes (their bytes are the value), whole numbers of
 * at most 15 digits without sign, fraction, exponent or leading zero (exact
 * as doubles), true, false, null, arrays of such strings, spaces between
 * the tokens; the member names among the caller's, each at most once.
 * Anything else (an escape, a nested object, a number written otherwise, a
 * name repeated or not the caller's, a byte that is not JSON) is not
 * taken: the caller then reads the line with cJSON, and its checks and
 * errors, as before.  So what it takes reads the same both ways (the fuzz
 * targets of the partial and the baseline compare the two).
 */
#ifndef LD_JSONLINE_H
#define LD_JSONLINE_H

#include <stddef.h>
#include <stdint.h>

typedef enum ld_jl_type {
    LD_JL_ABSENT = 0,
    LD_JL_STRING,
    LD_JL_NUMBER,
    LD_JL_NULL,
    LD_JL_TRUE,
    LD_JL_FALSE,
    LD_JL_STRINGS  /* an array of strings */
} ld_jl_type;

typedef struct ld_jl_value {
    ld_jl_type type;
    const char *s;   /* STRING: its bytes; STRINGS: the text between [ and ] */
    size_t len;
    uint64_t num;    /* NUMBER: its value; STRINGS: how many */
} ld_jl_value;

/* A member name and its length: LD_JL_NAME("rid"). */
typedef struct ld_jl_name {
    const char *s;
    size_t len;
} ld_jl_name;
#define LD_JL_NAME(lit) { lit, sizeof lit - 1 }

/* The object starting at p (before end), its members' values into
 * vals[i] for names[i] (LD_JL_ABSENT for the names it lacks).  Returns the
 * byte after its closing brace, or NULL when it is not taken (see above).
 * Fastest with the members in the order of names. */
const char *ld_jl_object(const char *p, const char *end, const ld_jl_name *names, size_t n_names,
                         ld_jl_value *vals);

/* The strings of a STRINGS value in turn: *pos starts at 0; 1 and the
 * next string's bytes, or 0 after the last. */
int ld_jl_next_string(const ld_jl_value *v, size_t *pos, const char **s, size_t *len);

/* 1 when s[0..len) is 16 hex digits (either case), with their value. */
int ld_jl_hex16(const char *s, size_t len, int lower_only, uint64_t *out);

#endif
