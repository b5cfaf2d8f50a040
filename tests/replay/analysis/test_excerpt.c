/* test_excerpt.c - evidence excerpts (replay/analysis/finding.c's
 * ld_excerpt): the text's own bytes around an offset, "..." where it goes
 * on, never a character cut in two (expected values by hand from UTF-8). */
#include <string.h>

#include "tests/support/ld_test.h"
#include "replay/analysis/finding.h"

static int test_excerpt_bytes_as_they_are(void)
{
    ld_arena a;
    ld_arena_init(&a, 0);
    const char *s = "say \"hi\"\n\tand a back\\slash";
    CHECK_EQ_STR(ld_excerpt(&a, s, strlen(s), 0, 100), s);
    CHECK_EQ_STR(ld_excerpt(&a, s, strlen(s), 0, 4), "say ...");
    CHECK_EQ_STR(ld_excerpt(&a, s, strlen(s), 12, 8), "...and a ba..."); /* from 2 before */
    CHECK_EQ_STR(ld_excerpt(&a, s, strlen(s), 4, 8), "...y \"hi\"\n\t..."); /* newline and tab as they are */
    ld_arena_release(&a);
    return 0;
}

static int test_excerpt_whole_characters(void)
{
    ld_arena a;
    ld_arena_init(&a, 0);
    /* a token's decoded bytes may end inside a character: "<｜tool▁calls▁end" then
     * the first two of the three bytes of "｜" (U+FF5C: EF BD 9C) */
    const char *s = "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "end\xef\xbd";
    CHECK_EQ_STR(ld_excerpt(&a, s, strlen(s), 0, 100),
                 "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "end..."); /* the cut one left out */
    /* an offset inside a character starts at the character; a count of
     * characters, not bytes */
    CHECK_EQ_STR(ld_excerpt(&a, s, strlen(s), 3, 2), "...\xef\xbd\x9ct...");
    ld_arena_release(&a);
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_excerpt_bytes_as_they_are),
    LD_CASE(test_excerpt_whole_characters),
};

LD_TEST_MAIN(cases)
