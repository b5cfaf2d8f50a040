#!/usr/bin/env python3
"""gen_journal_live.py - a server log as journald keeps it, in parts, for a journal that grows while it is followed.

    gen_journal_live.py [--long BYTES] [--line-max N] OUT_DIR LOG...

sglang.service logs the LOG lines on one stream (request lines made about BYTES
long: journald cuts them into LineMax pieces, every one but the last marked
_LINE_BREAK=line-max, as gen_journal_fixtures.py writes them from journald's
documentation) and access lines on a second one (its stderr: another _STREAM_ID);
other.service logs the same LOG lines again, with the same rids, its entries
interleaved between sglang.service's: a reader that does not keep to the unit sees
every request twice (or pieces of two lines in one).  journald's export format
(journal-export(5)), in parts that systemd-journal-remote appends to a journal file
one after another:

  part1.export   up to the first piece of one of sglang.service's split request
                 lines, near a third of the way, and the access line after it on
                 the other stream (the split line's other pieces in part2)
  part2.export   up to the Receive line of a request near two thirds (its
                 Receive OpenAI line, split, before it; its Finish in part3)
  part3.export   the rest
  part4.export   the first piece of one more split request line (a Finish line,
                 rid live-cut-1), whose other pieces never come

plain.log: sglang.service's lines of parts 1-3, whole.  manifest.json: entries per
part, split lines, and "finished_by_part": the rids (health checks left out) whose
Finish line is whole by the end of each part.
"""
import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_capture_fixtures import lengthen, read_lines  # noqa: E402
from gen_journal_fixtures import T0, Service, export_entry, interleave  # noqa: E402

RID = re.compile(r"rid='([^']+)'")


def split_points(entries, main):
    """indices just after the first piece of main's split lines (a cut piece
    whose predecessor of the stream was not a cut one)"""
    points, prev_cut = [], False
    for i, (svc, (_, cut)) in enumerate(entries):
        if svc is not main:
            continue
        if cut and not prev_cut:
            points.append(i + 1)
        prev_cut = cut
    return points


def finished(entries, main, end):
    """rids whose Finish line of stream `main` is whole within entries[:end]"""
    rids, acc = [], []
    for svc, (piece, cut) in entries[:end]:
        if svc is not main:
            continue
        acc.append(piece)
        if cut:
            continue
        line = b"".join(acc).decode("utf-8", "replace")
        acc = []
        m = RID.search(line)
        if "Finish: obj=" in line and m and "HEALTH_CHECK" not in m.group(1):
            rids.append(m.group(1))
    return rids


def cut_line(lines, long_size, line_max):
    """the first piece of a copy of the first request line long enough to be cut"""
    for line in lengthen(lines, long_size, False):
        if "Finish: obj=" in line and len(line.encode()) > line_max:
            return RID.sub("rid='live-cut-1'", line, count=1).encode()[:line_max]
    raise SystemExit("gen_journal_live: no request line to cut")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--line-max", type=int, default=48 * 1024, help="journald's LineMax (48K)")
    ap.add_argument("--long", type=int, default=100000, help="make the request lines about this long")
    ap.add_argument("out")
    ap.add_argument("logs", nargs="+")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    lines = lengthen(read_lines(a.logs), a.long, False)
    access = ['INFO:     127.0.0.1:%d - "GET /health HTTP/1.1" 200 OK' % (50000 + k) for k in range(len(lines))]
    main_svc, stderr, other = (Service(0, lines, a.line_max), Service(2, access, a.line_max),
                               Service(1, lines, a.line_max))
    main_svc.unit, stderr.unit, other.unit = "sglang.service", "sglang.service", "other.service"
    entries = list(interleave([main_svc, stderr, other]))
    points = split_points(entries, main_svc)
    if len(points) < 3:
        raise SystemExit("gen_journal_live: too few split lines (use --long above --line-max)")
    first = next(i + 1 for i in range(points[len(points) // 3], len(entries)) if entries[i][0] is stderr)
    second = next(i + 1 for i in range(points[2 * len(points) // 3], len(entries))
                  if entries[i][0] is main_svc and b"Receive: obj=" in entries[i][1][0])
    bounds = [0, first, second, len(entries)]
    exports = [bytearray() for _ in range(3)]
    for t, (svc, (piece, cut)) in enumerate(entries):
        part = max(k for k in range(3) if bounds[k] <= t)
        exports[part] += export_entry(svc, piece, cut, T0 + 1000 * t)
    exports.append(bytearray(export_entry(main_svc, cut_line(read_lines(a.logs), a.long, a.line_max), True,
                                          T0 + 1000 * len(entries))))
    for k, data in enumerate(exports):
        with open(os.path.join(a.out, "part%d.export" % (k + 1)), "wb") as fh:
            fh.write(data)
    with open(os.path.join(a.out, "plain.log"), "wb") as fh:
        fh.write(b"".join(l.encode() + b"\n" for l in lines))
    manifest = {"entries_by_part": [bounds[k + 1] - bounds[k] for k in range(3)] + [1],
                "split_lines": len(points) // 2,
                "finished_by_part": [finished(entries, main_svc, b) for b in bounds[1:]]}
    with open(os.path.join(a.out, "manifest.json"), "w") as fh:
        json.dump(manifest, fh, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
