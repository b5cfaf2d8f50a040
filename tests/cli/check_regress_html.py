#!/usr/bin/env python3
"""check_regress_html.py - what a person sees in the HTML report of `logdiff regress`, as a real
browser shows it: the DOM chromium built from the page (--dump-dom) and its screenshot (PNG).

Usage: check_regress_html.py DOM.html SHOT.png EXPECT.json
Checks, from the fixture's planted facts (EXPECT.json, tools/gen_regress_fixtures.py):
  * the first row of the summary table is the regressed request, marked "regressed";
  * its section shows the message array and the templated prompt side by side, the tool
    message marked "dropped", every other message's span in the prompt coloured by role, and a
    marker in the prompt where the tool result is missing;
  * the other request that is not ok links its conversation's earlier request;
  * the screenshot is a real rendering: the regression red and the role colours are on screen.
"""
import json
import struct
import sys
import zlib
from html.parser import HTMLParser


class Dom(HTMLParser):
    """Elements with their classes, ids and text, in document order."""

    def __init__(self):
        super().__init__()
        self.stack, self.elems = [], []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        e = {"tag": tag, "cls": (a.get("class") or "").split(), "id": a.get("id"),
             "href": a.get("href"), "title": a.get("title"), "text": "", "parents": list(self.stack)}
        self.elems.append(e)
        if tag not in ("br", "meta", "img", "link", "input"):
            self.stack.append(e)

    def handle_endtag(self, tag):
        while self.stack:
            if self.stack.pop()["tag"] == tag:
                break

    def handle_data(self, data):
        for e in self.stack:
            e["text"] += data


def png_pixels(path):
    """(width, height, rows of (r, g, b)) of an 8-bit RGB/RGBA PNG."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, hdr = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    w, h, depth, ctype = hdr[0], hdr[1], hdr[2], hdr[3]
    assert depth == 8 and ctype in (2, 6), hdr
    bpp = 3 if ctype == 2 else 4
    raw, stride, rows, prev = zlib.decompress(idat), w * bpp, [], bytearray(w * bpp)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if f == 1: line[i] = (line[i] + a) & 255
            elif f == 2: line[i] = (line[i] + b) & 255
            elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    return w, h, [[tuple(r[x * bpp:x * bpp + 3]) for x in range(w)] for r in rows]


def main():
    dom_path, png_path, expect_path = sys.argv[1:4]
    want = json.load(open(expect_path, encoding="utf-8"))
    (reg,) = want["regressed"]
    d = Dom()
    d.feed(open(dom_path, encoding="utf-8").read())
    rows = [e for e in d.elems if e["tag"] == "tr" and any(p["tag"] == "tbody" for p in e["parents"])]
    assert reg in rows[0]["text"] and "regressed" in rows[0]["text"], rows[0]["text"]
    assert "regressed" in rows[0]["cls"]
    assert sum("regressed" in r["cls"] for r in rows) == 1
    sec = [e for e in d.elems if e["tag"] == "section" and reg in e["text"]][0]
    inside = [e for e in d.elems if sec in e["parents"]]
    msgs = [e for e in inside if "msg" in e["cls"]]
    roles = [next(c for c in m["cls"] if c.startswith("role-")) for m in msgs]
    assert roles == ["role-system", "role-user", "role-assistant", "role-tool"], roles
    assert "dropped" in msgs[3]["cls"] and "dropped" in msgs[3]["text"], msgs[3]["text"][:200]
    assert all("dropped" not in m["cls"] for m in msgs[:3])
    assert '"rain_mm": 14' in msgs[3]["text"]
    spans = [e for e in inside if "span" in e["cls"] and e["title"]]
    span_roles = {next(c for c in s["cls"] if c.startswith("role-")) for s in spans}
    assert {"role-system", "role-user", "role-assistant"} <= span_roles, span_roles
    assert "role-tool" not in span_roles, "the lost tool result has no span in the prompt"
    assert any("Should I take an umbrella" in s["text"] for s in spans if "role-user" in s["cls"])
    markers = [e for e in inside if "marker" in e["cls"] and "dropped" in e["cls"]]
    assert markers and "message 3 (tool)" in markers[0]["text"], markers
    assert markers[0]["href"] == "#" + msgs[3]["id"]
    prompt = [e for e in inside if "prompt" in e["cls"]][0]
    assert "<|im_start|>assistant" in prompt["text"] and "tool_response" not in prompt["text"]
    harness = [k for k, v in want["after"].items() if v["verdict"] == "harness"][0]
    hsec = [e for e in d.elems if e["tag"] == "section" and e["text"].lstrip().startswith(harness)][0]
    links = [e for e in d.elems if hsec in e["parents"] and e["tag"] == "a" and e["href"]]
    assert any("conversation" in p["cls"] for l in links for p in l["parents"]) or \
        "earlier requests: demo-interrupted-1" in hsec["text"], hsec["text"][:300]
    w, h, px = png_pixels(png_path)
    seen = {p for row in px[::2] for p in row[::2]}
    # the regression badge red, and the system, user and assistant span colours
    for colour in [(0xc6, 0x28, 0x28), (0xbb, 0xde, 0xfb), (0xc8, 0xe6, 0xc9), (0xe1, 0xbe, 0xe7)]:
        assert any(sum(abs(a - b) for a, b in zip(colour, p)) <= 12 for p in seen), \
            "colour #%02x%02x%02x not on screen" % colour
    print("html: %d table rows, %d messages, %d prompt spans, %dx%d screenshot" %
          (len(rows), len(msgs), len(spans), w, h))


if __name__ == "__main__":
    main()
