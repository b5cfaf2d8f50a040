/* render_date.c - see render_date.h. */
#include "render_date.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

static int leap(int y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int days_in(int y, int m)
{
    static const int d[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    return m == 2 && leap(y) ? 29 : d[m - 1];
}

static int parse(const char *s, int *y, int *m, int *d)
{
    for (int i = 0; i < LD_DATE_LEN; i++)
        if (i == 4 || i == 7 ? s[i] != '-' : (s[i] < '0' || s[i] > '9')) return 0;
    if (sscanf(s, "%4d-%2d-%2d", y, m, d) != 3) return 0;
    return *y >= 1 && *m >= 1 && *m <= 12 && *d >= 1 && *d <= days_in(*y, *m);
}

int ld_date_valid(const char *s)
{
    int y, m, d;
    return s && strlen(s) == LD_DATE_LEN && parse(s, &y, &m, &d);
}

void ld_date_today(char out[LD_DATE_LEN + 1])
{
    time_t now = time(NULL);
    struct tm tm;
    if (!localtime_r(&now, &tm) || !strftime(out, LD_DATE_LEN + 1, "%Y-%m-%d", &tm))
        snprintf(out, LD_DATE_LEN + 1, "1970-01-01");
}

int ld_date_of_timestamp(const char *ts, char out[LD_DATE_LEN + 1])
{
    int y, m, d;
    if (!ts) return 0;
    if (*ts == '[') ts++;
    if (strlen(ts) < LD_DATE_LEN || !parse(ts, &y, &m, &d)) return 0;
    memcpy(out, ts, LD_DATE_LEN);
    out[LD_DATE_LEN] = '\0';
    return 1;
}

void ld_date_shift(const char *ymd, int days, char out[LD_DATE_LEN + 1])
{
    int y = 1970, m = 1, d = 1;
    parse(ymd, &y, &m, &d);
    for (; days > 0; days--)
        if (++d > days_in(y, m) && (d = 1) && ++m > 12) m = 1, y++;
    for (; days < 0; days++)
        if (--d < 1 && (--m < 1 ? (m = 12, y--) : 0, 1)) d = days_in(y, m);
    snprintf(out, LD_DATE_LEN + 1, "%04d-%02d-%02d", y, m, d);
}
