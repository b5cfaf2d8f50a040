#!/usr/bin/env bash
# logdiff diff over every harness fixture (tools/gen_harness_fixtures.py: text and JSON mode,
# with and without the timestamp prefix, interleaved, two files, level 1, logger cuts, tool
# calls, repetition, parse errors), plain, gzip'd and as one tar.zst: the planted findings
# and nothing else.
. "$(dirname "$0")/lib.bash"
FX="$LD_SOURCE_DIR/testdata/replay/harness"
CHECK="python3 $LD_SOURCE_DIR/tests/cli/check_diff.py"
for expect in "$FX"/*.expect.json; do
    name=$(basename "$expect" .expect.json)
    mapfile -t files < <(python3 -c "import json,sys; print('\n'.join(json.load(open(sys.argv[1]))['files']))" "$expect")
    paths=(); gz=(); for f in "${files[@]}"; do paths+=("$FX/$f"); gzip -c "$FX/$f" >"$WORK/$f.gz"; gz+=("$WORK/$f.gz"); done
    "$LOGDIFF" diff --json "${paths[@]}" >"$WORK/plain.json" 2>"$WORK/err"
    check "$name" $CHECK "$expect" <"$WORK/plain.json"
    "$LOGDIFF" diff --json "${gz[@]}" >"$WORK/gz.json" 2>"$WORK/err"
    check "$name (gzip)" $CHECK "$expect" <"$WORK/gz.json"
    (cd "$FX" && tar --zstd -cf "$WORK/$name.tar.zst" "${files[@]}")
    "$LOGDIFF" diff --json "$WORK/$name.tar.zst" >"$WORK/tar.json" 2>"$WORK/err"
    check "$name (tar.zst)" $CHECK "$expect" <"$WORK/tar.json"
done
finish
