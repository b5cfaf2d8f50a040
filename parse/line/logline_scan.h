/* logline_scan.h - a request line's literal followed without parsing it:
 * its bracket depth, the string and escape it is in, and where its fields
 * end, fed in pieces (a capture's cut records) with each byte looked at once.
 *
 * Two users: the captures that mark no cuts (parse/capture/) go on with a
 * line while its literal is open, and a line cut for good is closed after
 * its last whole field (logline_cut.c).  Python's repr and JSON alike:
 * strings in ' or ", backslash escapes, ( [ { and their closers. */
#ifndef LD_LOGLINE_SCAN_H
#define LD_LOGLINE_SCAN_H

#include <stddef.h>
#include <stdint.h>

typedef struct ld_literal_scan {
    int active;          /* the line holds a literal this scan follows */
    uint32_t depth;      /* brackets open */
    char quote;          /* the string the scan is in, or 0 */
    int escape;          /* the last byte was a backslash inside it */
    char outer;          /* the closer of the outermost bracket open */
    uint64_t fed;        /* bytes fed so far */
    uint64_t field_end;  /* where (in bytes fed) the last comma at depth 1 of the top-level value
                            now open stands; 0: none yet */
    uint64_t value_end;  /* where the last comma at depth 0 stands (between kwargs); 0: none */
} ld_literal_scan;

/* A scan from the start of a literal (the state zeroed, active). */
void ld_literal_start(ld_literal_scan *o);

/* A request line's first piece: the scan starts at its literal (an SGLang
 * text line's `obj=`, in its first 512 bytes, or a leading `{` of a JSON
 * line) and is inactive for any other line, so that an apostrophe in an
 * ordinary log line opens nothing. */
void ld_literal_begin_line(ld_literal_scan *o, const char *s, size_t n);

/* The next piece; more closers than openers make the scan inactive. */
void ld_literal_feed(ld_literal_scan *o, const char *s, size_t n);

/* ld_literal_feed with its block scans capped at `level` (as
 * parse/pylit/pylit_scan.h's: 0 byte by byte ... 3 AVX-512BW), for the
 * tests of every path; ld_literal_feed takes the best the machine has. */
void ld_literal_feed_at(int level, ld_literal_scan *o, const char *s, size_t n);

/* 1 when the literal is still open (inside a string or a bracket). */
int ld_literal_open(const ld_literal_scan *o);

#endif
