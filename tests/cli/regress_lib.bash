# regress_lib.bash - the CI story's archives for the `logdiff regress` tests (sourced after
# lib.bash).  "before": the demo's two servers with the tool result kept
# (testdata/regress/server-1-before.log, tools/gen_regress_fixtures.py); "after": the demo as it
# is, where the second server lost it.  Expected verdicts: testdata/regress/expect.json.
REG="$LD_SOURCE_DIR/testdata/regress"
EXPECT_REG="$REG/expect.json"

# make_archives DIR: DIR/before.tar.gz, DIR/after.zip (with a README.md that is not a log),
# DIR/server-0.tar.xz and DIR/server-1-after.tar (one server each)
make_archives() {
    local dir=$1
    mkdir -p "$dir/before" "$dir/after"
    cp "$DEMO/server-0.log" "$dir/before/server-0.log"
    cp "$REG/server-1-before.log" "$dir/before/server-1.log"
    cp "$DEMO/server-0.log" "$dir/after/server-0.log"
    gzip -dc "$DEMO/server-1.log.gz" >"$dir/after/server-1.log"
    printf 'weekly capture, see the runbook\n' >"$dir/after/README.md"
    python3 - "$dir" <<'PY'
import os, sys, tarfile, zipfile
d = sys.argv[1]
def tar(name, mode, side, members):
    with tarfile.open(os.path.join(d, name), mode) as t:
        for m in members:
            t.add(os.path.join(d, side, m), arcname=m)
tar("before.tar.gz", "w:gz", "before", ["server-0.log", "server-1.log"])
tar("server-0.tar.xz", "w:xz", "after", ["server-0.log"])
tar("server-1-after.tar", "w", "after", ["server-1.log"])
with zipfile.ZipFile(os.path.join(d, "after.zip"), "w", zipfile.ZIP_DEFLATED) as z:
    for m in ["server-0.log", "server-1.log", "README.md"]:
        z.write(os.path.join(d, "after", m), arcname=m)
PY
}
