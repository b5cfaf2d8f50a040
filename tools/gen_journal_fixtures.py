#!/usr/bin/env python3
"""gen_journal_fixtures.py - a plain server log as journald keeps it, printed by journalctl.

    gen_journal_fixtures.py [--line-max N] [--long BYTES] [--seam-text] [--one-service] OUT_DIR LOG...

Two SGLang servers run as systemd services (sglang-0.service gets the first LOG,
sglang-1.service the others; --one-service: one gets them all); each one's stdout is one journald stream.  What
journald stores of a stream, written from its documentation (systemd-journald(8),
journald.conf(5) LineMax=, systemd.journal-fields(7) _LINE_BREAK=, _STREAM_ID=) and
not from logdiff's code: one entry a line, and a line longer than LineMax (48 KiB)
cut into entries of exactly LineMax bytes, every one but the last marked
_LINE_BREAK=line-max.  The two services' entries interleave in time, the other
service's between the pieces of a split line.

That is written in journald's export format (journal-export(5): a field that is
not printable UTF-8 in its binary form) to OUT_DIR/journal.export, turned into a
real journal file by systemd's own systemd-journal-remote (OUT_DIR/sglang.journal),
and printed by journalctl --file in each output format a person uses:

  short.log short-iso.log short-precise.log short-unix.log   -o short...
  cat.log                                                      -o cat of sglang-0.service (its lines,
                                                               unmarked); plain-0.log: its lines
  cat-both.log                                                 -o cat of both: pieces of the two
                                                               services' lines interleave, unmarked
  json.log json-seq.log                                        -o json / json-seq --all
  json-noall.log                                               -o json without --all: MESSAGE over
                                                               4096 bytes printed as null
  export.log                                                   -o export
  short-noall.log                                              -o short without --all (a piece that
                                                               is not valid UTF-8: "[48.0K blob data]")
  plain.log                                                    the lines themselves, in journal order

manifest.json: entries, lines split, their pieces, entries that are not valid UTF-8.
Exits 77 when systemd-journal-remote or journalctl is missing (a test skips).
"""
import argparse
import datetime
import json
import os
import shutil
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_capture_fixtures import lengthen, read_lines  # noqa: E402

REMOTE = "/lib/systemd/systemd-journal-remote"
T0 = int(datetime.datetime(2026, 11, 20, 9, 14, tzinfo=datetime.timezone.utc).timestamp() * 1e6)
FORMATS = {"short.log": ["-o", "short", "-a"], "short-iso.log": ["-o", "short-iso", "-a"],
           "short-precise.log": ["-o", "short-precise", "-a"], "short-unix.log": ["-o", "short-unix", "-a"],
           "short-noall.log": ["-o", "short"], "cat.log": ["-o", "cat", "-a", "_SYSTEMD_UNIT=sglang-0.service"],
           "cat-both.log": ["-o", "cat", "-a"], "json.log": ["-o", "json", "-a"],
           "json-seq.log": ["-o", "json-seq", "-a"], "json-noall.log": ["-o", "json"],
           "export.log": ["-o", "export"]}


def field(name, value):
    """one field of the export format: `NAME=value`, or binary where the value
    is not printable UTF-8 (journal-export(5))"""
    try:
        printable = value.decode("utf-8").isprintable()
    except UnicodeDecodeError:
        printable = False
    if printable:
        return name.encode() + b"=" + value + b"\n"
    return name.encode() + b"\n" + struct.pack("<Q", len(value)) + value + b"\n"


def stream_entries(lines, line_max):
    """what journald stores of one stream: (text, line-max?) a piece"""
    for line in lines:
        data = line.encode("utf-8")
        cuts = [data[i:i + line_max] for i in range(0, len(data), line_max)] or [b""]
        for j, piece in enumerate(cuts):
            yield piece, j < len(cuts) - 1


class Service:
    def __init__(self, k, lines, line_max):
        self.unit, self.pid, self.stream = "sglang-%d.service" % k, str(4242 + k), "%032x" % (0x5eed + k)
        self.entries = list(stream_entries(lines, line_max))


def export_entry(svc, piece, line_max_cut, t):
    out = b"".join(field(n, v.encode()) for n, v in (
        ("__REALTIME_TIMESTAMP", str(t)), ("__MONOTONIC_TIMESTAMP", str(t - T0 + 1000)),
        ("_BOOT_ID", "0123456789abcdef0123456789abcdef"), ("_HOSTNAME", "gpu-node-1"), ("_TRANSPORT", "stdout"),
        ("PRIORITY", "6"), ("SYSLOG_FACILITY", "3"), ("SYSLOG_IDENTIFIER", "python3"), ("_PID", svc.pid),
        ("_COMM", "python3"), ("_SYSTEMD_UNIT", svc.unit), ("_STREAM_ID", svc.stream)))
    if line_max_cut:
        out += field("_LINE_BREAK", b"line-max")
    return out + field("MESSAGE", piece) + b"\n"


def interleave(services):
    """round robin over the services' entries, one at a time"""
    idx = [0] * len(services)
    while any(i < len(s.entries) for i, s in zip(idx, services)):
        for k, s in enumerate(services):
            if idx[k] < len(s.entries):
                yield s, s.entries[idx[k]]
                idx[k] += 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--line-max", type=int, default=48 * 1024, help="journald's LineMax (48K)")
    ap.add_argument("--long", type=int, default=0, help="make the demo's request lines about this long")
    ap.add_argument("--seam-text", action="store_true", help="a filler of 3-byte characters")
    ap.add_argument("--one-service", action="store_true", help="every LOG from one service")
    ap.add_argument("out")
    ap.add_argument("logs", nargs="+")
    a = ap.parse_args()
    if not os.access(REMOTE, os.X_OK) or not shutil.which("journalctl"):
        print("gen_journal_fixtures: needs systemd-journal-remote (Debian package systemd-journal-remote) "
              "and journalctl", file=sys.stderr)
        return 77
    os.makedirs(a.out, exist_ok=True)
    split = len(a.logs) if a.one_service else 1
    groups = [read_lines(a.logs[:split]), read_lines(a.logs[split:]) if len(a.logs) > split else []]
    if a.long:
        groups = [lengthen(g, a.long, a.seam_text) for g in groups]
    services = [Service(k, g, a.line_max) for k, g in enumerate(groups) if g]
    export, plain, plain0, joined = bytearray(), [], [], {}
    stats = {"entries": 0, "split_lines": 0, "split_pieces": 0, "binary_entries": 0, "lines": 0}
    for t, (svc, (piece, cut)) in enumerate(interleave(services)):
        export += export_entry(svc, piece, cut, T0 + 1000 * t)
        stats["entries"] += 1
        try:
            piece.decode("utf-8")
        except UnicodeDecodeError:
            stats["binary_entries"] += 1
        acc = joined.setdefault(svc.unit, [])
        acc.append(piece)
        if not cut:
            plain.append(b"".join(acc))
            if svc is services[0]:
                plain0.append(plain[-1])
            stats["lines"] += 1
            if len(acc) > 1:
                stats["split_lines"] += 1
                stats["split_pieces"] += len(acc)
            acc.clear()
    with open(os.path.join(a.out, "journal.export"), "wb") as fh:
        fh.write(export)
    for name, ls in (("plain.log", plain), ("plain-0.log", plain0)):
        with open(os.path.join(a.out, name), "wb") as fh:
            fh.write(b"".join(l + b"\n" for l in ls))
    jfile = os.path.join(a.out, "sglang.journal")
    if os.path.exists(jfile):
        os.remove(jfile)
    subprocess.run([REMOTE, "-o", jfile, "-"], input=bytes(export), check=True, stderr=subprocess.DEVNULL)
    for name, args in FORMATS.items():
        with open(os.path.join(a.out, name), "wb") as fh:
            subprocess.run(["journalctl", "--file", jfile, "--no-pager", *args], stdout=fh, check=True)
    with open(os.path.join(a.out, "manifest.json"), "w") as fh:
        json.dump(stats, fh, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
