#!/usr/bin/env bash
# logdiff regress on bad input: a corrupt archive member (error naming it, the other members
# still checked, exit 2), members that are not logs (skipped and listed), a baseline edited by
# hand or written by another logdiff version (a clear error, exit 2), and the options that
# cannot work yet.
. "$(dirname "$0")/lib.bash"
. "$(dirname "$0")/regress_lib.bash"
make_archives "$WORK"
B="$WORK/baseline.json"
"$LOGDIFF" regress --baseline "$B" --update-baseline "$WORK/before.tar.gz" >/dev/null

# a zip whose first member's compressed bytes are damaged, a binary member, a text member
python3 - "$WORK" <<'PY'
import os, sys, zipfile
d = sys.argv[1]
path = os.path.join(d, "bad.zip")
with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
    z.write(os.path.join(d, "after", "server-0.log"), "server-0.log")
    z.write(os.path.join(d, "after", "server-1.log"), "server-1.log")
    z.writestr("logo.png", b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4)
    z.writestr("notes/README.md", "not a log\n")
with zipfile.ZipFile(path) as z:
    info = z.getinfo("server-0.log")
data = bytearray(open(path, "rb").read())
off = info.header_offset + 30 + len(info.filename) + len(info.extra) + info.compress_size // 2
for i in range(off, off + 64):
    data[i] ^= 0x5A
open(path, "wb").write(bytes(data))
PY
run "corrupt member: exit 2" 2 "$LOGDIFF" regress --baseline "$B" --junit "$WORK/bad.xml" "$WORK/bad.zip"
check "corrupt member: the error names it" grep -q "bad.zip:server-0.log.*decompression failed" "$WORK/err"
check "corrupt member: the other members still checked" grep -q "^REGRESSED *demo-tool-result-lost .*bad.zip:server-1.log:4" "$WORK/out"
check "non-logs skipped and listed" bash -c "grep -q '^skipped .*bad.zip:logo.png: not a log' '$WORK/out' && grep -q '^skipped .*bad.zip:notes/README.md: not a log' '$WORK/out'"
check "JUnit: an error naming the member, the skipped members, the regression" python3 -c "
import xml.etree.ElementTree as ET
r = ET.parse('$WORK/bad.xml').getroot()
errs = [c for c in r.iter('testcase') if c.find('error') is not None]
assert len(errs) == 1 and errs[0].get('name').endswith('bad.zip:server-0.log'), [c.attrib for c in errs]
skipped = sorted(c.get('classname') for c in r.iter('testcase') if c.find('skipped') is not None)
assert {'logo.png', 'notes/README.md'} <= set(skipped), skipped
assert [c.get('name') for c in r.iter('testcase') if c.find('failure') is not None] == ['demo-tool-result-lost']
"
printf 'this is not an archive, nor a log\n' >"$WORK/plain.txt"
run "a plain file that is not a log: skipped, exit 0" 0 "$LOGDIFF" regress --baseline "$B" "$WORK/before.tar.gz" "$WORK/plain.txt"
check "plain non-log listed" grep -q "^skipped .*plain.txt: not a log" "$WORK/out"
run "an input that does not exist: exit 2" 2 "$LOGDIFF" regress --baseline "$B" "$WORK/before.tar.gz" "$WORK/nope.tar.gz"
check "missing input named" grep -q "nope.tar.gz" "$WORK/err"

# baselines edited by hand or from another version
edit() { # edit NAME PYTHON-EXPR-ON-TEXT
    python3 -c "import sys; t = open('$B').read(); open('$WORK/' + sys.argv[1], 'w').write($2)" "$1"
}
edit v2.json "t.replace('\"version\": 1', '\"version\": 2')"
run "baseline of format version 2: exit 2" 2 "$LOGDIFF" regress --baseline "$WORK/v2.json" "$WORK/before.tar.gz"
check "version error says both versions and what to do" bash -c "grep -q 'format version 2, this logdiff reads version 1' '$WORK/err' && grep -q -- '--update-baseline' '$WORK/err'"
edit kind.json "t.replace('\"errors\": [\"harness.empty_assistant\"', '\"errors\": [\"harness.empty_asistant\"')"
run "hand-edited: unknown finding kind: exit 2" 2 "$LOGDIFF" regress --baseline "$WORK/kind.json" "$WORK/before.tar.gz"
check "the entry and the kind are named" grep -q "rid 'demo-empty-assistant-2'.*unknown finding kind 'harness.empty_asistant'" "$WORK/err"
edit okd.json "t.replace('\"verdict\": \"harness\"', '\"verdict\": \"ok\"')"
run "hand-edited: verdict ok with errors left: exit 2" 2 "$LOGDIFF" regress --baseline "$WORK/okd.json" "$WORK/before.tar.gz"
check "the verdict does not follow" grep -q "does not follow from its errors" "$WORK/err"
edit broken.json "t[:len(t) // 2]"
run "truncated baseline: exit 2" 2 "$LOGDIFF" regress --baseline "$WORK/broken.json" "$WORK/before.tar.gz"
check "not valid JSON, with a line" grep -q "broken.json:[0-9]*: not valid JSON" "$WORK/err"
edit other.json "'{\"requests\": []}'"
run "another file: exit 2" 2 "$LOGDIFF" regress --baseline "$WORK/other.json" "$WORK/before.tar.gz"
check "not a logdiff baseline" grep -q "not a logdiff baseline" "$WORK/err"
run "no baseline file: exit 2" 2 "$LOGDIFF" regress --baseline "$WORK/none.json" "$WORK/before.tar.gz"
check "hint to write one" grep -q "write one with --update-baseline" "$WORK/err"

# arbitrary bytes from a log: invalid UTF-8 and markup characters in a rid, a control byte in a
# message; the reports stay well-formed and the baseline round-trips them
python3 - "$WORK" <<'PY'
import os, sys
d = sys.argv[1]
t = open(os.path.join(d, "after", "server-1.log"), "rb").read()
t = t.replace(b"demo-tool-result-lost", b"demo-\xff<&>\"lost")
t = t.replace(b"umbrella", b"umb\xfe\\x01rella")  # raw 0xfe, and the escape \x01 in the literal
os.makedirs(os.path.join(d, "bytes"))
open(os.path.join(d, "bytes", "server-1.log"), "wb").write(t)
PY
run "odd bytes: baseline" 0 "$LOGDIFF" regress --baseline "$WORK/bytes.json" --update-baseline "$WORK/bytes"
check "odd bytes: the rid as rid_hex" grep -q '"rid_hex": "64656d6f2dff3c263e226c6f7374"' "$WORK/bytes.json"
run "odd bytes: the same logs pass" 0 "$LOGDIFF" regress --baseline "$WORK/bytes.json" "$WORK/bytes"
run "odd bytes: against the clean baseline" 1 "$LOGDIFF" regress --baseline "$B" --junit "$WORK/bytes.xml" --html "$WORK/bytes.html" "$WORK/bytes"
check "odd bytes: JUnit well-formed, the rid shown byte for byte" python3 -c "
import xml.etree.ElementTree as ET
r = ET.parse('$WORK/bytes.xml').getroot()
names = [c.get('name') for c in r.iter('testcase') if c.find('failure') is not None]
assert names == ['demo-\\\\xff<&>\"lost'], names
"
check "odd bytes: HTML escapes them" python3 -c "
s = open('$WORK/bytes.html', 'rb').read()
assert b'demo-<span class=\"bad\">\\\\xff</span>&lt;&amp;&gt;&quot;lost' in s
assert b'umb<span class=\"bad\">\\\\xfe</span><span class=\"bad\">\\\\x01</span>rella' in s
s.decode('utf-8')
"

run "no --baseline: exit 2" 2 "$LOGDIFF" regress "$WORK/before.tar.gz"
run "--tokenizer that does not load: exit 2" 2 "$LOGDIFF" regress --baseline "$B" --tokenizer "$WORK/no-such.json" "$WORK/before.tar.gz"
check "--tokenizer: names the source" grep -q "no-such.json" "$WORK/err"
run "--jobs 0: exit 2" 2 "$LOGDIFF" regress --baseline "$B" --jobs 0 "$WORK/before.tar.gz"
finish
