#!/usr/bin/env bash
# logdiff regress, the CI story end to end: a baseline written from archived logs, the same logs
# pass, the logs in which one request's template lost a tool result fail with exactly that
# request in the JUnit report; fixed, new and missing requests; --jobs 1 and 4 give the same bytes.
. "$(dirname "$0")/lib.bash"
. "$(dirname "$0")/regress_lib.bash"
make_archives "$WORK"
B="$WORK/baseline.json"

run "update-baseline on the before archive: exit 0" 0 "$LOGDIFF" regress --baseline "$B" --update-baseline "$WORK/before.tar.gz"
check "baseline: sorted by rid, the planted verdicts, a hash each" python3 -c "
import json
b = json.load(open('$B')); want = json.load(open('$EXPECT_REG'))['before']
assert b['format'] == 'logdiff-regress-baseline' and b['version'] == 1, b
rids = [r['rid'] for r in b['requests']]
assert rids == sorted(want), rids
for r in b['requests']:
    assert r['verdict'] == want[r['rid']]['verdict'] and r['errors'] == want[r['rid']]['errors'], r
    assert len(r['hash']) == 16
assert len(open('$B').read().splitlines()) == len(rids) + 2   # one request per line
"
run "the same logs pass: exit 0" 0 "$LOGDIFF" regress --baseline "$B" --junit "$WORK/same.xml" "$WORK/before.tar.gz"
check "same logs: no failure in the JUnit report" python3 -c "
import xml.etree.ElementTree as ET
r = ET.parse('$WORK/same.xml').getroot()
assert r.tag == 'testsuites' and r.get('failures') == '0', r.attrib
assert not list(r.iter('failure')), ET.tostring(r)
assert len(list(r.iter('testcase'))) == 5
"
run "the tool result lost: exit 1" 1 "$LOGDIFF" regress --baseline "$B" --junit "$WORK/after.xml" "$WORK/after.zip"
check "text: the regressed request with its new finding" grep -q "^REGRESSED *demo-tool-result-lost *ok -> template .*after.zip:server-1.log:4 *new: template.dropped_message" "$WORK/out"
check "text: the README is skipped and listed" grep -q "^skipped .*after.zip:README.md: not a log" "$WORK/out"
check "JUnit: well-formed, exactly the regressed request fails" python3 -c "
import json, xml.etree.ElementTree as ET
want = json.load(open('$EXPECT_REG'))
r = ET.parse('$WORK/after.xml').getroot()
cases = list(r.iter('testcase'))
failing = sorted(c.get('name') for c in cases if c.find('failure') is not None)
assert failing == want['regressed'], failing
assert r.get('failures') == str(len(want['regressed'])), r.attrib
for c in cases:
    rid = c.get('name')
    if rid in want['after']:
        assert c.get('classname') == want['after'][rid]['member'], (rid, c.attrib)
    f = c.find('failure')
    if f is not None:
        for k in want['after'][rid]['errors']:
            assert k in f.get('message') and k in f.text, (k, f.attrib)
        assert 'is not in the prompt' in f.text and 'ok -> template' in f.get('message')
skipped = [c for c in cases if c.find('skipped') is not None]
assert [c.get('classname') for c in skipped] == ['README.md'], skipped
"
run "--json" 1 "$LOGDIFF" regress --baseline "$B" --json "$WORK/after.zip"
check "json: one regression, statuses as planted" python3 -c "
import json
want = json.load(open('$EXPECT_REG'))
rows = [json.loads(l) for l in open('$WORK/out')]
reg = sorted(r['rid'] for r in rows if r.get('regression'))
assert reg == want['regressed'], rows
for r in rows:
    if r['status'] == 'skipped': assert r['member'].endswith('after.zip:README.md'); continue
    assert r['verdict'] == want['after'][r['rid']]['verdict'], r
    assert r['before'] == want['before'][r['rid']]['verdict'], r
"
# swapped: the baseline of the broken logs, then the good ones: fixed, exit 0
run "baseline of the after logs" 0 "$LOGDIFF" regress --baseline "$WORK/after.json" --update-baseline "$WORK/after.zip"
run "the good logs against it: fixed, exit 0" 0 "$LOGDIFF" regress --baseline "$WORK/after.json" --json "$WORK/before.tar.gz"
check "fixed as planted" python3 -c "
import json
want = json.load(open('$EXPECT_REG'))['fixed_when_reversed']
rows = [json.loads(l) for l in open('$WORK/out')]
assert sorted(r['rid'] for r in rows if r['status'] == 'fixed') == want, rows
"
# one server only: the other's requests are missing (not a failure)
run "missing requests: exit 0" 0 "$LOGDIFF" regress --baseline "$B" --json "$WORK/server-0.tar.xz"
check "missing: the second server's requests" python3 -c "
import json
want = json.load(open('$EXPECT_REG'))['before']
rows = [json.loads(l) for l in open('$WORK/out')]
miss = sorted(r['rid'] for r in rows if r['status'] == 'missing')
assert miss == sorted(k for k, v in want.items() if v['member'] == 'server-1.log'), miss
"
# a baseline of the second server alone: the first server's harness fault is new and failing
"$LOGDIFF" regress --baseline "$WORK/one.json" --update-baseline "$WORK/server-1-after.tar" >/dev/null
run "new failing request: exit 1" 1 "$LOGDIFF" regress --baseline "$WORK/one.json" --json "$WORK/server-0.tar.xz" "$WORK/server-1-after.tar"
check "new-failing: the empty assistant turn; new ok ones are not regressions" python3 -c "
import json
want = json.load(open('$EXPECT_REG'))['after']
rows = [json.loads(l) for l in open('$WORK/out')]
nf = sorted(r['rid'] for r in rows if r['status'] == 'new-failing')
assert nf == sorted(k for k, v in want.items() if v['member'] == 'server-0.log' and v['verdict'] != 'ok'), nf
assert all(not r['regression'] for r in rows if r['status'] == 'new'), rows
"
# with the model's real chat template (third-party, in ../shared): the fixtures' prompts were
# rendered through it, so every "before" request re-renders faithfully, and the lost tool result
# is also a render mismatch
QWEN="${LD_SHARED_DIR:-$LD_SOURCE_DIR/../shared}/templates/Qwen-Qwen2.5-7B-Instruct.jinja"
if [ -f "$QWEN" ]; then
    run "--template: baseline" 0 "$LOGDIFF" regress --template "$QWEN" --baseline "$WORK/tq.json" --update-baseline "$WORK/before.tar.gz"
    check "--template: every request faithful" python3 -c "
import json
b = json.load(open('$WORK/tq.json'))['requests']
assert len(b) == 5 and all(r['info'] == ['template.faithful'] for r in b), b
"
    run "--template: the lost tool result" 1 "$LOGDIFF" regress --template "$QWEN" --baseline "$WORK/tq.json" --json "$WORK/after.zip"
    check "--template: a dropped message and a render mismatch, on that request only" python3 -c "
import json
want = json.load(open('$EXPECT_REG'))['regressed']
rows = [json.loads(l) for l in open('$WORK/out') if '\"rid\": null' not in l]
reg = {r['rid']: r['new_errors'] for r in rows if r.get('regression')}
assert sorted(reg) == want and all(v == ['template.dropped_message', 'template.render_mismatch'] for v in reg.values()), reg
"
else
    echo "skip --template checks: $QWEN is absent (third-party reference material)"
fi
# several inputs: any number of threads gives the same bytes
INPUTS=("$WORK/server-0.tar.xz" "$WORK/after.zip" "$WORK/before.tar.gz" "$DEMO" "$LD_SOURCE_DIR/testdata/replay/rerender/server.log" "$WORK/server-1-after.tar")
for j in 1 4; do
    "$LOGDIFF" regress --jobs $j --baseline "$WORK/j$j.json" --update-baseline "${INPUTS[@]}" >/dev/null 2>&1
    "$LOGDIFF" regress --jobs $j --baseline "$B" --junit "$WORK/j$j.xml" --html "$WORK/j$j.html" "${INPUTS[@]}" >"$WORK/j$j.txt" 2>&1
    "$LOGDIFF" regress --jobs $j --baseline "$B" --json "${INPUTS[@]}" >"$WORK/j$j.jsonl" 2>/dev/null
done
for ext in json xml html txt jsonl; do
    check "--jobs 1 and --jobs 4: identical $ext" cmp -s "$WORK/j1.$ext" "$WORK/j4.$ext"
done
check "several inputs: every request of every input" python3 -c "
import json
rows = [json.loads(l) for l in open('$WORK/j4.jsonl')]
rids = [r['rid'] for r in rows if r.get('rid')]
assert rids.count('demo-tool-result-lost') == 4 and len(rows) > 20, len(rows)
"
finish
