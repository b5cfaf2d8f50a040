/* test_render_date.c - the date strftime_now prints (replay/template/
 * render_date.c): read from a log line's timestamp, checked, shifted a day
 * across months, years and leap days (expected values from the calendar). */
#include <string.h>

#include "tests/support/ld_test.h"
#include "replay/template/render_date.h"

static int test_render_date_valid(void)
{
    CHECK(ld_date_valid("2024-02-29") && ld_date_valid("2000-02-29") && ld_date_valid("2026-12-31"));
    CHECK(!ld_date_valid("2023-02-29") && !ld_date_valid("1900-02-29") && !ld_date_valid("2024-13-01"));
    CHECK(!ld_date_valid("2024-04-31") && !ld_date_valid("2024-4-01") && !ld_date_valid("2024-04-01 ") &&
          !ld_date_valid("") && !ld_date_valid(NULL));
    char today[LD_DATE_LEN + 1];
    ld_date_today(today);
    CHECK(ld_date_valid(today));
    return 0;
}

static int test_render_date_of_timestamp(void)
{
    char d[LD_DATE_LEN + 1];
    CHECK(ld_date_of_timestamp("2026-11-20 09:14:01", d) && !strcmp(d, "2026-11-20"));
    CHECK(ld_date_of_timestamp("2026-11-20T09:14:01.5Z", d) && !strcmp(d, "2026-11-20"));
    CHECK(ld_date_of_timestamp("[2026-11-20 09:14:01 DP0 TP0]", d) && !strcmp(d, "2026-11-20"));
    CHECK(!ld_date_of_timestamp("04-10 03:35:45", d)); /* vLLM: no year */
    CHECK(!ld_date_of_timestamp("16:43:29", d) && !ld_date_of_timestamp(NULL, d));
    return 0;
}

static int test_render_date_shift(void)
{
    static const struct { const char *from; int days; const char *to; } cases[] = {
        {"2026-03-15", -1, "2026-03-14"}, {"2026-03-14", 1, "2026-03-15"},
        {"2026-03-01", -1, "2026-02-28"}, {"2024-03-01", -1, "2024-02-29"},
        {"2024-02-28", 1, "2024-02-29"},  {"2023-02-28", 1, "2023-03-01"},
        {"2026-12-31", 1, "2027-01-01"},  {"2027-01-01", -1, "2026-12-31"},
        {"2026-04-30", 1, "2026-05-01"},  {"2026-01-01", 365, "2027-01-01"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[LD_DATE_LEN + 1];
        ld_date_shift(cases[i].from, cases[i].days, out);
        CHECK_MSG(!strcmp(out, cases[i].to), "%s %+d: %s, want %s", cases[i].from, cases[i].days, out, cases[i].to);
    }
    return 0;
}

static const ld_test_case cases[] = {
    LD_CASE(test_render_date_valid),
    LD_CASE(test_render_date_of_timestamp),
    LD_CASE(test_render_date_shift),
};

LD_TEST_MAIN(cases)
