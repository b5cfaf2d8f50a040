#!/usr/bin/env bash
# service.sh - docs/ops/logdiff-watch.service through systemd-analyze
# verify: every directive known and valid (any warning naming the unit
# fails the test), the unit's ExecStart pointed at a binary that exists
# here (the build's logdiff, else /bin/true) since verify checks it.  Also
# that it runs what the README says it runs.  Skips (77) without
# systemd-analyze.
set -u
src=${LD_SOURCE_DIR:-$(dirname "$0")/../../..}
unit=$src/docs/ops/logdiff-watch.service
want='ExecStart=/usr/local/bin/logdiff watch --json --state /var/lib/logdiff/watch.state --metrics-listen 127.0.0.1:9464 /var/log/sglang/server.log'
if ! grep -qxF "$want" "$unit"; then
    echo "FAIL: $unit does not run: $want"
    exit 1
fi
for d in 'After=network.target sglang.service' 'DynamicUser=yes' 'StateDirectory=logdiff' 'Restart=on-failure'; do
    grep -qxF "$d" "$unit" || { echo "FAIL: $unit lacks $d"; exit 1; }
done
if ! command -v systemd-analyze >/dev/null 2>&1; then
    echo "skipped: systemd-analyze not found (Debian: apt-get install systemd)"
    exit 77
fi
bin=/bin/true
[ -x "${LD_BUILD_DIR:-}/logdiff" ] && bin=$LD_BUILD_DIR/logdiff
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sed "s|^ExecStart=/usr/local/bin/logdiff|ExecStart=$bin|" "$unit" >"$tmp/logdiff-watch.service"
out=$(cd "$tmp" && systemd-analyze verify ./logdiff-watch.service 2>&1)
rc=$?
if [ $rc -ne 0 ] && printf '%s\n' "$out" | grep -qi 'failed to setup\|not booted\|Failed to initialize\|No such file or directory.*/run/systemd'; then
    echo "skipped: systemd-analyze verify cannot run here: $out"
    exit 77
fi
problems=$(printf '%s\n' "$out" | grep 'logdiff-watch.service')
if [ $rc -ne 0 ] || [ -n "$problems" ]; then
    echo "FAIL: systemd-analyze verify (exit $rc):"
    printf '%s\n' "$out"
    exit 1
fi
echo "1 passed, 0 failed"
