#!/usr/bin/env python3
# scan.py - the `logdiff scan` benchmark (driven by bench/scan.sh; see bench/README.md).
#
#   python3 bench/scan.py [--size-mb 100] [--runs 3] [--baseline-runs 1] [--keep]
#
# In one run, on the same machine and inputs: generates seeded SGLang level-3 logs with
# tools/gen_bench_log.py (text SIZE MB, text 2*SIZE MB, JSON SIZE MB) under build/bench/, then times
# the Python baseline (bench/baseline_scan.py) and `build/logdiff scan --json LOG > /dev/null`, both
# pinned to one core (taskset -c 0 where available), page cache warm, best of N runs, with peak RSS
# from /usr/bin/time -v (or wait4's rusage when /usr/bin/time is missing).  Prints one line per
# measurement, `name  baseline  logdiff  unit  ratio`, then the verdicts against the targets,
# then the machine and the inputs.  A target miss is reported, never an error: the exit status is 0
# unless something could not run (then 2, e.g. "logdiff scan not available").

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GEN = os.path.join(ROOT, "tools", "gen_bench_log.py")
BASELINE = os.path.join(ROOT, "bench", "baseline_scan.py")
MB = 1_000_000            # throughput and input sizes: MB = 10^6 bytes
MIB = 1 << 20             # memory: MiB
TARGET_MBPS = 2000.0         # text-mode scan, one core (issue 31)
TARGET_JSON_MBPS = 1000.0    # JSON-mode scan, one core
TARGET_JSON_LOADS = 10.0     # ... against json.loads of every line's object, same run
TARGET_ORJSON = 5.0          # ... against orjson.loads
TARGET_DIFF_SHARE = 0.9      # diff against scan
TARGET_RATIO = 20.0
RSS_BASE_MIB = 64.0
RUN_TIMEOUT_S = 1800


def say(msg):
    print("scan.py: " + msg, file=sys.stderr, flush=True)


def fmt_s(t):
    if t is None:
        return "n/a"
    return "%.1fs" % t if t >= 10 else "%.2fs" % t if t >= 1 else "%.3fs" % t


def fmt_x(a, b):
    return "%.1fx" % (a / b) if a and b else "n/a"


def json_anchor(parser, path, runs):
    """CPU seconds of parser.loads over every line's JSON object (bench/json_anchor.py), or why not."""
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "json_anchor.py"), "--parser", parser,
                        "--runs", str(runs), path], capture_output=True, text=True)
    out = r.stdout.strip()
    try:
        return float(out)
    except ValueError:
        return out or r.stderr.strip()[-200:]


class Runner:
    """Runs a command pinned to one core and measures wall time and peak RSS."""

    def __init__(self, core):
        self.time_bin = "/usr/bin/time" if os.access("/usr/bin/time", os.X_OK) and self._time_works() else None
        self.pin = []
        if core is not None and shutil.which("taskset"):
            if subprocess.run(["taskset", "-c", str(core), "true"], capture_output=True).returncode == 0:
                self.pin = ["taskset", "-c", str(core)]
        self.rss_source = "/usr/bin/time -v" if self.time_bin else "wait4 rusage"

    @staticmethod
    def _time_works():
        try:
            r = subprocess.run(["/usr/bin/time", "-v", "true"], capture_output=True, text=True, timeout=10)
            return "Maximum resident set size" in r.stderr
        except (OSError, subprocess.SubprocessError):
            return False

    def run(self, cmd, stdout=subprocess.DEVNULL):
        """-> (rc, wall seconds, peak RSS in KiB or None, stderr tail)."""
        with tempfile.TemporaryDirectory() as tmp:
            tfile = os.path.join(tmp, "time.txt")
            efile = os.path.join(tmp, "stderr.txt")
            full = self.pin + cmd
            if self.time_bin:
                full = [self.time_bin, "-v", "-o", tfile] + full
            with open(efile, "wb") as err:
                t0 = time.perf_counter()
                p = subprocess.Popen(full, stdout=stdout, stderr=err)
                try:
                    _, status, ru = os.wait4(p.pid, 0) if hasattr(os, "wait4") else (None, None, None)
                except ChildProcessError:
                    status, ru = None, None
                wall = time.perf_counter() - t0
                if status is not None:
                    p.returncode = os.waitstatus_to_exitcode(status) if hasattr(os, "waitstatus_to_exitcode") \
                        else (status >> 8)
                else:
                    p.wait(timeout=RUN_TIMEOUT_S)
            rss = ru.ru_maxrss if ru is not None else None         # KiB on Linux
            if self.time_bin and os.path.exists(tfile):
                with open(tfile, errors="replace") as fh:
                    m = re.search(r"Maximum resident set size \(kbytes\):\s*(\d+)", fh.read())
                if m:
                    rss = int(m.group(1))
            with open(efile, "rb") as fh:
                tail = fh.read()[-2000:].decode("utf-8", "replace")
            return p.returncode, wall, rss, tail

    def best(self, cmd, runs):
        """Best wall time and the largest peak RSS over `runs` runs; (None, None, msg) on failure."""
        return self.best_interleaved([cmd], runs)[0]

    def best_interleaved(self, cmds, runs):
        """best() of each command, their runs taken in turn (a, b, a, b, ...): a shared machine's
        speed drifts by tens of percent over minutes, and a ratio of two commands is only fair
        when both are timed in the same moments.  -> [(best, max_rss, err)] in cmds' order."""
        out = [[None, None, None] for _ in cmds]
        for _ in range(runs):
            for cmd, o in zip(cmds, out):
                if o[2]:
                    continue
                rc, wall, rss, tail = self.run(cmd)
                if rc not in (0, 1):
                    o[0], o[1], o[2] = None, None, "rc=%s: %s" % (rc, tail.strip().splitlines()[-1:] or "")
                    continue
                o[0] = wall if o[0] is None else min(o[0], wall)
                if rss is not None:
                    o[1] = rss if o[1] is None else max(o[1], rss)
        return [tuple(o) for o in out]


def warm(path):
    """Read the file once so every timed run starts with it in the page cache."""
    with open(path, "rb", buffering=0) as fh:
        while fh.read(8 << 20):
            pass


def generate(path, size_mb, seed, fmt):
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, GEN, "--size-mb", str(size_mb), "--seed", str(seed), "--format", fmt,
                        "--stats", path], capture_output=True, text=True)
    if r.returncode != 0:
        print("generator failed, nothing measured: " + (r.stderr.strip().splitlines() or ["rc=%d" % r.returncode])[-1])
        sys.exit(2)
    stats = json.loads(r.stderr.strip().splitlines()[-1])
    stats["gen_s"] = time.perf_counter() - t0
    return stats


def count_lines(cmd, runner):
    with tempfile.TemporaryFile() as out:
        rc, _, _, tail = runner.run(cmd, stdout=out)
        out.seek(0)
        lines = [ln for ln in out.read().splitlines() if ln.strip()]
    return rc, lines, tail


def check_logdiff(logdiff, small, runner):
    """None if `logdiff scan --json` works on a small log, else the reason it is not available."""
    if not os.access(logdiff, os.X_OK):
        return "%s not found or not executable" % os.path.relpath(logdiff, ROOT)
    rc, lines, tail = count_lines([logdiff, "scan", "--json", small], runner)
    if rc not in (0, 1):
        return "%s scan --json exited with %s (%s)" % (os.path.relpath(logdiff, ROOT), rc,
                                                      " ".join(tail.strip().splitlines()[-1:]) or "no message")
    if not lines:
        return "%s scan --json printed nothing (rc=%s)" % (os.path.relpath(logdiff, ROOT), rc)
    try:
        json.loads(lines[0])
    except ValueError:
        return "%s scan --json did not print JSON: %r" % (os.path.relpath(logdiff, ROOT), lines[0][:80])
    return None


def loadavg():
    """1-minute load average: other work on the machine makes the timings noisy."""
    try:
        return "%.2f" % os.getloadavg()[0]
    except OSError:
        return "?"


LOAD_START = loadavg()


def machine_lines(runner, logdiff):
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as fh:
            m = re.search(r"^model name\s*:\s*(.*)$", fh.read(), re.M)
            model = m.group(1).strip() if m else model
    except OSError:
        pass
    build_type = "?"
    cache = os.path.join(os.path.dirname(logdiff), "CMakeCache.txt")
    if os.path.exists(cache):
        with open(cache, errors="replace") as fh:
            m = re.search(r"^CMAKE_BUILD_TYPE:\w+=(.*)$", fh.read(), re.M)
            build_type = (m.group(1) or "(empty: RelWithDebInfo default)") if m else "?"
    return ["machine: nproc=%d  cpu=%s  kernel=%s  python=%s" % (os.cpu_count() or 0, model, platform.release(),
                                                                 platform.python_version()),
            "setup: pinned=%s  rss=%s  logdiff build type=%s  loadavg start/end=%s/%s  date=%s" % (
                " ".join(runner.pin) or "no (taskset missing)", runner.rss_source, build_type,
                LOAD_START, loadavg(), time.strftime("%Y-%m-%d %H:%M:%S %Z"))]


def main():
    ap = argparse.ArgumentParser(description="Benchmark `logdiff scan --json` against the Python baseline.")
    ap.add_argument("--size-mb", type=float, default=100, help="base log size in MB (default 100)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--runs", type=int, default=7,
                    help="logdiff runs per input, best taken (default 7: shared machines are noisy)")
    ap.add_argument("--baseline-runs", type=int, default=1, help="baseline runs per input (default 1: it is slow)")
    ap.add_argument("--logdiff", default=os.path.join(ROOT, "build", "logdiff"))
    ap.add_argument("--workdir", default=os.path.join(ROOT, "build", "bench"))
    ap.add_argument("--core", type=int, default=0, help="core to pin to (default 0)")
    ap.add_argument("--keep", action="store_true", help="keep the generated logs in --workdir")
    args = ap.parse_args()

    os.makedirs(args.workdir, exist_ok=True)
    runner = Runner(args.core)
    size = args.size_mb
    label = lambda mb: ("%g" % mb) + "MB"                                   # noqa: E731
    inputs = [("scan_text_" + label(size), "text", size),
              ("scan_text_" + label(2 * size), "text", 2 * size),
              ("scan_json_" + label(size), "json", size)]
    problems = []

    small = os.path.join(args.workdir, "scan_check_1MB.log")
    generate(small, 1, args.seed, "text")
    reason = check_logdiff(args.logdiff, small, runner)
    notes = []
    if reason:
        problems.append("logdiff scan not available: " + reason)
        say(problems[-1] + " (measuring the baseline only)")
    else:
        # not a correctness test (tests/ does that), just a hint when the two disagree wildly
        _, base_out, _ = count_lines([sys.executable, BASELINE, small], runner)
        _, ld_out, _ = count_lines([args.logdiff, "scan", "--json", small], runner)
        notes.append("check (1 MB log): baseline printed %d records (one per request line), logdiff scan --json printed %d lines"
                     % (len(base_out), len(ld_out)))

    results, stats, diffs, anchors = [], {}, [], {}
    for name, fmt, mb in inputs:
        path = os.path.join(args.workdir, "%s_seed%d.%s" % (name, args.seed, "jsonl" if fmt == "json" else "log"))
        say("generating %s (%s, %g MB)" % (os.path.relpath(path, ROOT), fmt, mb))
        st = stats[name] = generate(path, mb, args.seed, fmt)
        warm(path)
        say("baseline on %s (%d run(s))" % (name, args.baseline_runs))
        bt, brss, berr = runner.best([sys.executable, BASELINE, path], args.baseline_runs)
        if berr:
            problems.append("baseline failed on %s: %s" % (name, berr))
        lt = lrss = None
        if not reason:
            warm(path)
            cmds = [[args.logdiff, "scan", "--json", path]]
            if fmt == "text":  # diff against scan (issue 31: >= 90%), their runs interleaved
                cmds.append([args.logdiff, "diff", "--json", path])
            what = "scan and diff, interleaved" if len(cmds) > 1 else "scan"
            say("logdiff %s on %s (%d runs each)" % (what, name, args.runs))
            timed = runner.best_interleaved(cmds, args.runs)
            lt, lrss, lerr = timed[0]
            if lerr:
                problems.append("logdiff scan failed on %s: %s" % (name, lerr))
            if fmt == "text":
                dt, drss, derr = timed[1]
                if derr:
                    problems.append("logdiff diff failed on %s: %s" % (name, derr))
                diffs.append((name, lt, dt, drss))
        if fmt == "json":
            for parser in ("json", "orjson"):
                say("anchor %s.loads on %s" % (parser, name))
                anchors[parser] = json_anchor(parser, path, args.baseline_runs)
        results.append((name, st, bt, brss, lt, lrss))
        if not args.keep:
            os.unlink(path)
    if not args.keep:
        os.unlink(small)

    # ---- one line per measurement: name  baseline  logdiff  unit  ratio
    print("# name  baseline  logdiff  unit  ratio   (time: baseline best of %d, logdiff best of %d; rss: peak, MiB)"
          % (args.baseline_runs, args.runs))
    for name, st, bt, brss, lt, lrss in results:
        print("%s  %s  %s  s  %s" % (name, fmt_s(bt), fmt_s(lt), fmt_x(bt, lt)))
    for name, st, bt, brss, lt, lrss in results:
        b = "%.1fMiB" % (brss / 1024) if brss else "n/a"
        l_ = "%.1fMiB" % (lrss / 1024) if lrss else "n/a"
        print("rss_%s  %s  %s  MiB  %s" % (name[len("scan_"):], b, l_, fmt_x(brss, lrss)))
    for name, st, bt, brss, lt, lrss in results:
        print("throughput_%s  %s  %s  MB/s  %s" % (name[len("scan_"):],
              "%.1fMB/s" % (st["bytes"] / MB / bt) if bt else "n/a",
              "%.0fMB/s" % (st["bytes"] / MB / lt) if lt else "n/a", fmt_x(lt and 1 / lt, bt and 1 / bt)))

    # diff against scan: "baseline" = scan here
    for name, lt, dt, drss in diffs:
        print("diff_%s  %s  %s  s  %s" % (name[len("scan_"):], fmt_s(lt), fmt_s(dt), fmt_x(lt, dt)))
        print("rss_diff_%s  -  %s  MiB  -" % (name[len("scan_"):], "%.1fMiB" % (drss / 1024) if drss else "n/a"))

    # ---- verdicts against the targets
    def verdict(ok):
        return "PASS" if ok else "MISS"
    main_name, main_st, main_bt, _, main_lt, _ = results[0]
    if main_lt:
        mbps = main_st["bytes"] / MB / main_lt
        print("throughput_text  %.0f MB/s  target>=%d MB/s: %s" % (mbps, TARGET_MBPS, verdict(mbps >= TARGET_MBPS)))
    else:
        print("throughput_text  n/a  target>=%d MB/s: NOT RUN" % TARGET_MBPS)
    # The "Python way" is ast.literal_eval of text-mode lines; the JSON-mode baseline is
    # json.loads (a C parser), so its ratio is shown for information and not held to the target.
    ratios = [(bt / lt, name) for name, st, bt, brss, lt, lrss in results if bt and lt and "_text_" in name]
    if ratios:
        worst, worst_name = min(ratios)
        print("ratio vs python: %.1fx (text, lowest: %s)  target>=%dx: %s" % (worst, worst_name, TARGET_RATIO,
                                                                            verdict(worst >= TARGET_RATIO)))
    else:
        print("ratio vs python: n/a  target>=%dx: NOT RUN" % TARGET_RATIO)
    for name, st, bt, brss, lt, lrss in results:
        if "_json_" not in name or not lt:
            continue
        mbps = st["bytes"] / MB / lt
        print("throughput_json  %.0f MB/s  target>=%d MB/s: %s" % (mbps, TARGET_JSON_MBPS,
                                                              verdict(mbps >= TARGET_JSON_MBPS)))
        for parser, target in (("json", TARGET_JSON_LOADS), ("orjson", TARGET_ORJSON)):
            at = anchors.get(parser)
            if isinstance(at, float):
                print("ratio vs %s.loads (parse alone, CPU): %.2f s / %.2f s = %.1fx  target>=%gx: %s"
                      % (parser, at, lt, at / lt, target, verdict(at / lt >= target)))
            else:
                print("ratio vs %s.loads: %s" % (parser, at or "NOT RUN"))
    longest = max(st["longest_line"] for _, st, *_ in results)
    limit = RSS_BASE_MIB + 2 * longest / MIB
    rss_all = [lrss for *_, lrss in results if lrss]
    if rss_all:
        peak = max(rss_all) / 1024
        print("peak_rss %.1f MiB  limit %.1f MiB (64 + 2 x longest line of %.2f MiB): %s"
              % (peak, limit, longest / MIB, verdict(peak <= limit)))
        r1, r2 = results[0][5], results[1][5]
        if r1 and r2:
            print("rss_growth %s -> %s: %.1f -> %.1f MiB (%+.1f MiB)" % (
                label(size), label(2 * size), r1 / 1024, r2 / 1024, (r2 - r1) / 1024))
    else:
        print("peak_rss n/a  limit %.1f MiB: NOT RUN" % limit)
    if diffs and diffs[0][1] and diffs[0][2]:
        share = diffs[0][1] / diffs[0][2]
        print("diff vs scan throughput: %.0f%%  target>=%d%%: %s" % (100 * share, 100 * TARGET_DIFF_SHARE,
                                                                    verdict(share >= TARGET_DIFF_SHARE)))
        if len(diffs) > 1 and diffs[0][3] and diffs[1][3]:
            print("diff rss_growth %s -> %s: %.1f -> %.1f MiB" % (label(size), label(2 * size),
                  diffs[0][3] / 1024, diffs[1][3] / 1024))
    for p in notes + problems:
        print(p)

    # ---- machine and inputs
    for line in machine_lines(runner, args.logdiff):
        print(line)
    for name, st, *_ in results:
        print("input %s: %d bytes (%.1f MB), %d request lines (%d requests), line %d..%d bytes (mean %d), "
              "generated in %.1fs" % (name, st["bytes"], st["bytes"] / MB, st["request_lines"], st["requests"],
                                      st["min_line"], st["longest_line"], st["mean_line"], st["gen_s"]))
    return 2 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
