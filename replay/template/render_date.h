/* render_date.h - the date a template's strftime_now() prints.
 * transformers gives templates the renderer's local date (datetime.now());
 * a server rendered a logged request on the day its log line shows, so a
 * re-render must use that day (and, since the server's clock may keep
 * another time zone than its logger's, may need the day either side).
 * Dates are "YYYY-MM-DD" in a char[LD_DATE_LEN + 1]. */
#ifndef LD_RENDER_DATE_H
#define LD_RENDER_DATE_H

#define LD_DATE_LEN 10

/* 1 when s is a real calendar date written YYYY-MM-DD. */
int ld_date_valid(const char *s);

/* Today's local date, as transformers' strftime_now sees it. */
void ld_date_today(char out[LD_DATE_LEN + 1]);

/* The date a log line's timestamp text begins with ("2026-11-20 09:14:01",
 * "2026-11-20T09:14:01Z", "[2026-11-20 ..."); 0 when it names none (vLLM's
 * "MM-DD hh:mm:ss" has no year). */
int ld_date_of_timestamp(const char *ts, char out[LD_DATE_LEN + 1]);

/* `days` after the valid date `ymd` (before, when negative). */
void ld_date_shift(const char *ymd, int days, char out[LD_DATE_LEN + 1]);

#endif
