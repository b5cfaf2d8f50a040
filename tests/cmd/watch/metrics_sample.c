/* metrics_sample.c - prints the render of metrics_calls.h's known calls:
 * every family the watcher exports, for the checks of docs/ops/ (the
 * dashboard and the alerts query only metrics the render has). */
#include <stdio.h>
#include <stdlib.h>

#include "metrics_calls.h"

int main(void)
{
    ld_metrics *m = ld_metrics_new();
    if (!m) return 1;
    ld_test_metrics_known_calls(m);
    size_t len = 0;
    char *text = ld_metrics_render(m, LD_TEST_RENDER_AT, &len);
    int rc = text && fwrite(text, 1, len, stdout) == len ? 0 : 1;
    free(text);
    ld_metrics_free(m);
    return rc;
}
