#!/usr/bin/env bash
# logdiff regress --html, rendered by a real headless browser (Debian's chromium): the page is
# one file that needs no network, the regressed request comes first and its section shows the
# message array beside the templated prompt with the lost tool result marked (what a person
# sees: the DOM chromium built, and its screenshot).  Skips when chromium is absent.
. "$(dirname "$0")/lib.bash"
. "$(dirname "$0")/regress_lib.bash"
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$CHROMIUM" ]; then
    echo "skipped: chromium is not installed (Debian package chromium; tools/setup.sh test installs it)"
    exit 77
fi
make_archives "$WORK"
"$LOGDIFF" regress --baseline "$WORK/b.json" --update-baseline "$WORK/before.tar.gz" >/dev/null
run "the tool result lost: exit 1" 1 "$LOGDIFF" regress --baseline "$WORK/b.json" --html "$WORK/report.html" "$WORK/after.zip"
check "self-contained: no script, no external reference" python3 -c "
import re
s = open('$WORK/report.html', encoding='utf-8').read()
assert '<script' not in s and not re.search(r'(src|href)=\"(https?:)?//', s) and '@import' not in s
"
browse() { # browse OUT ARGS...: chromium headless on the report, a fresh profile each time
    local out=$1; shift
    timeout 120 "$CHROMIUM" --headless --disable-gpu --no-sandbox --no-first-run \
        --user-data-dir="$WORK/profile" "$@" "file://$WORK/report.html" >"$out" 2>"$WORK/chromium.err"
}
browse "$WORK/dom.html" --dump-dom
check "chromium: DOM dumped" test -s "$WORK/dom.html"
browse /dev/null --screenshot="$WORK/shot.png" --window-size=1400,1400 --hide-scrollbars
check "chromium: screenshot taken" test -s "$WORK/shot.png"
check "what a person sees" python3 "$LD_SOURCE_DIR/tests/cli/check_regress_html.py" "$WORK/dom.html" "$WORK/shot.png" "$EXPECT_REG"
# the logger cut the middle of that request's prompt ('head' ... 'tail'): the cut is shaded
python3 - "$WORK" <<'PY'
import os, sys
d = sys.argv[1]
t = open(os.path.join(d, "after", "server-1.log"), "rb").read()
i = t.index(b"Finish: obj=GenerateReqInput(rid='demo-tool-result-lost'")
old = b"# Tools\\n\\nYou may call"
j = t.index(old, i)
open(os.path.join(d, "cut.log"), "wb").write(t[:j] + b"# Tools' ... 'You may call" + t[j + len(old):])
PY
run "cut prompt: still the regression" 1 "$LOGDIFF" regress --baseline "$WORK/b.json" --html "$WORK/report.html" "$WORK/cut.log"
browse "$WORK/dom-cut.html" --dump-dom
check "cut prompt: the cut is shaded where the logger cut" python3 -c "
import re
s = open('$WORK/dom-cut.html', encoding='utf-8').read()
assert re.search(r'# Tools<span class=\"cut\">\[the logger cut the prompt here[^<]*</span>You may call', s), 'no cut marker'
"
finish
