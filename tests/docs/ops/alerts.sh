#!/usr/bin/env bash
# alerts.sh - docs/ops/logdiff-alerts.yml through promtool: the rules are
# valid (promtool check rules, which lints them too) and each alert fires
# when it must and not otherwise (promtool test rules with
# docs/ops/logdiff-alerts.test.yml).  Skips (77) without promtool.
set -u
src=${LD_SOURCE_DIR:-$(dirname "$0")/../../..}
ops=$src/docs/ops
if ! command -v promtool >/dev/null 2>&1; then
    echo "skipped: promtool not found (Debian: apt-get install prometheus)"
    exit 77
fi
fail=0
promtool check rules "$ops/logdiff-alerts.yml" || fail=1
# promtool resolves rule_files from the test file's folder
(cd "$ops" && promtool test rules logdiff-alerts.test.yml) || fail=1
if [ $fail = 0 ]; then echo "2 passed, 0 failed"; else echo "failed"; fi
exit $fail
