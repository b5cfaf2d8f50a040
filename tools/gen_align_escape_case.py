#!/usr/bin/env python3
# gen_align_escape_case.py - the expected prompt text of test_align_mem_escaped_form
# (tests/replay/analysis/test_align_mem.c): the test's text as json.dumps(ensure_ascii=False)
# writes it inside a JSON string, printed as a C string literal to paste into the test.
# Standard library only.
#
#   python3 tools/gen_align_escape_case.py
import json

TEXT = ("say \"hi\" to C:\\tmp\nthen\r\ttab\b\f and \x01\x1f end, "
        "then a long stretch of plain words that needs no escape at all")


def c_literal(s):
    out = []
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20:
            out.append("\\x%02x" % ord(ch))
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


print(c_literal(json.dumps(TEXT, ensure_ascii=False)[1:-1]))
