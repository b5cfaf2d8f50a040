#!/usr/bin/env bash
# diff --template through a template that prints the date (strftime_now): each
# request is re-rendered on the day its line was logged, the days either side
# tried for a server clock in another time zone, the date used named; a bare
# .jinja given no --bos-token is compared after the logged BOS, with how to pass
# it.  Fixtures: tools/gen_date_fixtures.py (Python jinja2, the real Llama 3.2
# template, each prompt dated the day its server rendered it).
. "$(dirname "$0")/lib.bash"
LLAMA="$LD_SOURCE_DIR/../shared/templates/meta-llama-Llama-3.2-3B-Instruct.jinja"
D="$LD_SOURCE_DIR/testdata/replay/dates"
if [ ! -f "$LLAMA" ]; then
    echo "skipped: $LLAMA absent (../shared is not beside this clone)"
    exit 77
fi

check_dates() { # JSON EXTRA-WORDS: each request's finding kind and date words as built
    python3 - "$D/expect.json" "$1" "$2" <<'PY'
import json, sys
expect = json.load(open(sys.argv[1]))
got = {r["rid"]: r for r in map(json.loads, open(sys.argv[2])) if r.get("rid")}
assert sorted(got) == sorted(expect), (sorted(got), sorted(expect))
for rid, e in expect.items():
    fs = [f for f in got[rid]["findings"] if f["kind"].startswith("template.")]
    assert [f["kind"] for f in fs] == [e["kind"]], (rid, [f["kind"] for f in fs])
    assert e["detail_has"] in fs[0]["detail"], (rid, fs[0]["detail"])
    assert sys.argv[3] in fs[0]["detail"], (rid, fs[0]["detail"])
    want = "template" if e["kind"] == "template.render_mismatch" else "ok"
    assert got[rid]["verdict"] == want, (rid, got[rid]["verdict"])
PY
}

"$LOGDIFF" diff --json --template "$LLAMA" --bos-token '<|begin_of_text|>' "$D/server.log" >"$WORK/with-bos.json" 2>"$WORK/err"
check "dated the day logged, or the day either side; the date named" check_dates "$WORK/with-bos.json" "strftime_now dated"
"$LOGDIFF" diff --json --template "$LLAMA" "$D/server.log" >"$WORK/bare.json" 2>"$WORK/err"
check "a bare .jinja: compared after the logged BOS, with how to pass it" check_dates "$WORK/bare.json" \
    "pass --bos-token '<|begin_of_text|>' or a tokenizer_config.json"
run "the stale prompt is the one reported: exit 1" 1 "$LOGDIFF" diff --template "$LLAMA" "$D/server.log"
check "its first difference is the date" grep -q "first difference at byte 112 of the logged prompt" "$WORK/out"
finish
