#!/usr/bin/env bash
# logdiff template --template deepseek-v3.2 / deepseek-v4: every case of
# testdata/replay/dsenc/{v32,v4}.json (SGLang's own encoders, tools/gen_dsenc_cases.py) through
# the command line: the same bytes on standard output, or exit 2 with a message where SGLang
# refuses the request.  Also: a model directory whose config.json names the model type.
. "$(dirname "$0")/lib.bash"
D="$LD_SOURCE_DIR/testdata/replay/dsenc"

for v in v32:deepseek-v3.2 v4:deepseek-v4; do
    file=${v%%:*} name=${v#*:}
    check "$name: every case as SGLang" python3 - "$LOGDIFF" "$name" "$D/$file.json" "$WORK" <<'PY'
import json, subprocess, sys
exe, name, path, work = sys.argv[1:]
bad = 0
for c in json.load(open(path, encoding="utf-8")):
    req = f"{work}/req.json"
    json.dump(c["request"], open(req, "w", encoding="utf-8"), ensure_ascii=False)
    p = subprocess.run([exe, "template", "--template", name, req], capture_output=True)
    if "error" in c:
        ok = p.returncode == 2 and p.stdout == b"" and p.stderr.strip()
    else:
        ok = p.returncode == 0 and p.stdout == c["expect"].encode("utf-8")
    if not ok:
        bad += 1
        print(f"{c['name']}: exit {p.returncode}, stderr {p.stderr[:200]!r}")
print(f"{name}: {bad} bad")
sys.exit(1 if bad else 0)
PY
done

# a model directory without a chat template: config.json's model_type picks the encoder
mkdir -p "$WORK/model"
echo '{"model_type": "deepseek_v32"}' >"$WORK/model/config.json"
echo '{"messages": [{"role": "user", "content": "Hi"}]}' >"$WORK/hi.json"
run "model dir with model_type deepseek_v32" 0 "$LOGDIFF" template --template "$WORK/model" "$WORK/hi.json"
"$LOGDIFF" template --template deepseek-v3.2 "$WORK/hi.json" >"$WORK/by-name" 2>/dev/null
check "same as --template deepseek-v3.2" cmp -s "$WORK/out" "$WORK/by-name"
run "unknown name is a missing file" 2 "$LOGDIFF" template --template deepseek-v9 "$WORK/hi.json"
finish
