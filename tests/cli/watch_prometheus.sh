#!/usr/bin/env bash
# logdiff watch scraped by a real Prometheus server (Debian's prometheus,
# started here on a loopback port, scrape interval 1 s): a log is written and
# rotated while watch follows it, and the counters read back through
# Prometheus' HTTP query API equal what `logdiff diff` says of the same lines
# (requests by verdict, error findings by kind, lines read).  Skips, saying
# why, where there is no prometheus binary or logdiff was built without
# libmicrohttpd.
. "$(dirname "$0")/lib.bash"
if ! command -v prometheus >/dev/null 2>&1; then
    echo "skipped: no prometheus binary (apt-get install prometheus; tools/setup.sh test installs it)"
    exit 77
fi
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
MPORT=$(port)
PPORT=$(port)
LOG=$WORK/all.log
{ cat "$DEMO/server-0.log"; gzip -dc "$DEMO/server-1.log.gz"; } >"$LOG"
LIVE=$WORK/live/server.log
mkdir -p "$WORK/live" "$WORK/tsdb"

"$LOGDIFF" watch --json --poll 0.05 --metrics-listen "127.0.0.1:$MPORT" "$LIVE" >"$WORK/w.out" 2>"$WORK/w.err" &
WATCH_PID=$!
sleep 0.5
if ! kill -0 "$WATCH_PID" 2>/dev/null; then
    if grep -q "without libmicrohttpd" "$WORK/w.err"; then
        echo "skipped: logdiff was built without libmicrohttpd (libmicrohttpd-dev)"
        exit 77
    fi
    not_ok "watch started" "$(cat "$WORK/w.err")"
    finish
fi
cat >"$WORK/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: logdiff
    static_configs:
      - targets: ["127.0.0.1:$MPORT"]
EOF
prometheus --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/tsdb" \
    --web.listen-address="127.0.0.1:$PPORT" >"$WORK/prom.log" 2>&1 &
PROM_PID=$!
trap 'kill "$WATCH_PID" "$PROM_PID" 2>/dev/null; wait 2>/dev/null; rm -rf "$WORK"' EXIT

# the log written while watch follows it, rotated half way (rename and create)
half=$(( $(wc -l <"$LOG") / 2 ))
head -n "$half" "$LOG" >"$LIVE"
sleep 1
mv "$LIVE" "$LIVE.1"
tail -n +"$((half + 1))" "$LOG" >"$LIVE"

# diff's own account of the same lines: the oracle
"$LOGDIFF" diff --json "$LOG" >"$WORK/diff.json" 2>/dev/null
"$LOGDIFF" diff "$LOG" >"$WORK/diff.txt" 2>/dev/null
python3 - "$WORK/diff.json" "$WORK/diff.txt" >"$WORK/expect.json" <<'EOF'
import collections, json, re, sys
verdicts, kinds = collections.Counter(), collections.Counter()
for r in map(json.loads, open(sys.argv[1])):
    if r.get("rid") is None:
        continue
    verdicts[r["verdict"]] += 1
    for f in r["findings"]:
        kinds[(f["kind"], f["severity"])] += 1
lines = int(re.search(r"; (\d+) lines read", open(sys.argv[2]).read()).group(1))
print(json.dumps({"verdicts": verdicts, "findings": {"%s|%s" % k: v for k, v in kinds.items()},
                  "lines": lines}))
EOF

# Prometheus' view, polled until it has caught up (30 s at most)
cat >"$WORK/query.py" <<'EOF'
import json, sys, time, urllib.parse, urllib.request
base, expect = sys.argv[1], json.load(open(sys.argv[2]))
def query(q):
    url = base + "/api/v1/query?" + urllib.parse.urlencode({"query": q})
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.load(r)["data"]["result"]
def view():
    v = {s["metric"]["verdict"]: int(float(s["value"][1]))
         for s in query("logdiff_requests_judged_total") if float(s["value"][1])}
    f = {"%s|%s" % (s["metric"]["kind"], s["metric"]["severity"]): int(float(s["value"][1]))
         for s in query("logdiff_findings_total") if float(s["value"][1])}
    lines = int(sum(float(s["value"][1]) for s in query("logdiff_lines_read_total")))
    return {"verdicts": v, "findings": f, "lines": lines}
got = None
for _ in range(180):  # a loaded machine: Prometheus may take a while to start
    try:
        got = view()
        if got == expect:
            print("prometheus agrees:", json.dumps(got, sort_keys=True))
            sys.exit(0)
    except OSError:
        pass
    time.sleep(0.5)
print("expected:", json.dumps(expect, sort_keys=True))
print("got:     ", json.dumps(got, sort_keys=True))
sys.exit(1)
EOF
if python3 "$WORK/query.py" "http://127.0.0.1:$PPORT" "$WORK/expect.json" >"$WORK/q.out" 2>&1; then
    ok "Prometheus' counters equal diff's (verdicts, findings, lines)"
else
    not_ok "Prometheus' counters equal diff's" "$(cat "$WORK/q.out")" "$(tail -3 "$WORK/prom.log")"
fi
# a poll that falls between the rename and the new file's creation sees the
# path gone (then the new file appear): rename-and-create is not atomic, for
# logrotate either, so the rotation is counted as one event or the other
check "the rotation was counted" python3 -c "
import json, urllib.request, urllib.parse
u = 'http://127.0.0.1:$PPORT/api/v1/query?' + urllib.parse.urlencode({'query': 'sum(logdiff_source_events_total{event=~\"rotated|gone\"})'})
r = json.load(urllib.request.urlopen(u, timeout=5))['data']['result']
assert r and float(r[0]['value'][1]) >= 1, r"
check "the scrape target is up" python3 -c "
import json, urllib.request
r = json.load(urllib.request.urlopen('http://127.0.0.1:$PPORT/api/v1/query?query=up', timeout=5))['data']['result']
assert r and r[0]['value'][1] == '1', r"
# a second watch on the same port: a clear error, exit 2
run "metrics port in use: exit 2" 2 "$LOGDIFF" watch --metrics-listen "127.0.0.1:$MPORT" "$LIVE"
check "metrics port in use: said" grep -q "127.0.0.1:$MPORT" "$WORK/err"
finish
