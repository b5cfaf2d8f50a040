#!/usr/bin/env python3
"""gen_tpl_unit_cases.py - expected values for tests/replay/test_tpl_unit.c.

Renders each small template below with Python jinja2 set up as transformers
sets it up (ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True),
loopcontrols, json.dumps tojson, raise_exception, strftime_now pinned to
2024-07-26) and writes testdata/replay/tpl/cases.json:
[{"name", "template", "context", "expect"} or {..., "error": "<Type>: <msg>",
"error_line": N}].  Note: floats in the context must not be integral (the C
side reads the JSON with cJSON, which cannot tell 2.0 from 2).
Usage: python3 tools/gen_tpl_unit_cases.py > testdata/replay/tpl/cases.json
"""
import datetime
import json
import sys

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

CTX = {"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "Hi"},
                    {"role": "assistant", "content": "A", "tool_calls": [{"function": {"name": "f", "arguments": {"x": 1}}}]}],
       "s": "  Hello World  ", "n": 7, "f": 2.5, "l": [3, 1, 2], "d": {"b": 1, "a": [1, 2.5, None, True, "x\"y"]},
       "none": None, "t": True}

CASES = [
    # lexer whitespace rules
    ("ws_trim_blocks", "{% if true %}\nA\n{% endif %}\nB"),
    ("ws_lstrip_blocks", "x\n    {% if true %}\n    y\n    {% endif %}\nz"),
    ("ws_dash", "a  \n {{- 'b' -}}  \n c"),
    ("ws_block_dash", "a\n  {%- if true -%}\n  b  {%- endif %}  c"),
    ("ws_var_no_trim", "{{ 'a' }}\nb"),
    ("ws_plus", "x\n  {%+ if true %}y{% endif %}"),
    ("ws_comment", "a\n  {# note #}\nb{#- x -#}  c"),
    ("ws_trailing_newline", "a\n"),
    ("ws_crlf", "a\r\nb\r\n{% if true %}\r\nc{% endif %}"),
    # loops
    ("loop_vars", "{% for x in l %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }}|{% endfor %}"),
    ("loop_else", "{% for x in [] %}x{% else %}empty{% endfor %}"),
    ("loop_break_continue", "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x > 5 %}{% break %}{% endif %}{{ x }}{% endfor %}"),
    ("loop_filter", "{% for m in messages if m.role != 'system' %}{{ loop.index }}{{ m.role }}{% endfor %}"),
    ("loop_items", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}"),
    ("loop_prev_next", "{% for x in l %}{{ loop.previtem }}<{{ x }}>{{ loop.nextitem }}|{% endfor %}"),
    # scoping
    ("scope_set_in_for", "{% set x = 1 %}{% for i in l %}{% set x = i %}{% endfor %}{{ x }}"),
    ("scope_namespace", "{% set ns = namespace(x=1) %}{% for i in l %}{% set ns.x = ns.x + i %}{% endfor %}{{ ns.x }}"),
    ("scope_if_no_scope", "{% if true %}{% set y = 5 %}{% endif %}{{ y }}"),
    ("macro_call", "{% macro m(a, b='B') %}[{{ a }}{{ b }}]{% endmacro %}{{ m(1) }}{{ m(2, b=3) }}{{ m('x', 'y') }}"),
    # expressions
    ("expr_arith", "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 1 + 2 * 3 }} {{ f * 2 }}"),
    ("expr_compare", "{{ 1 < 2 }} {{ 'a' == 'a' }} {{ 1 == 1.0 }} {{ 'b' in 'abc' }} {{ 4 not in l }} {{ 'a' in d }}"),
    ("expr_logic", "{{ none or 'x' }} {{ 0 and 1 }} {{ not t }} {{ 'y' if n > 3 else 'z' }}"),
    ("expr_concat", "{{ 'a' ~ 1 ~ none ~ t ~ undefined_var }}"),
    ("expr_slices", "{{ l[::-1] }} {{ l[1:] }} {{ l[-1] }} {{ s[2:7] }} {{ 'abc'[::-1] }} {{ l[:-1] }} {{ l[::2] }}"),
    ("expr_literals", "{{ [1, 'a', none, true, 1.5] }} {{ {'k': 'v', 'n': [1]} }} {{ (1, 2) }}"),
    ("expr_print", "{{ d }} {{ none }} {{ t }} {{ f }} {{ 1e-7 }} {{ 1e20 }} {{ \"it's\" }}"),
    ("expr_attr_item", "{{ messages[0]['role'] }}{{ messages[1].content }}{{ d.b }}{{ d['a'][1] }}{{ messages[2].tool_calls[0].function.name }}"),
    ("expr_string_escapes", "{{ 'a\\nb\\t\\'c\\\\' }}{{ \"\\u00e9\" }}"),
    # tests
    ("tests", "{{ x is defined }}{{ none is none }}{{ s is string }}{{ d is mapping }}{{ l is iterable }}{{ s is iterable }}{{ n is number }}{{ l is sequence }}{{ t is boolean }}{{ false is false }}{{ y is undefined }}{{ n is odd }}{{ none is not none }}"),
    # filters
    ("f_tojson", "{{ d | tojson }}|{{ messages[2] | tojson(indent=2) }}|{{ 'é<>&' | tojson }}|{{ d | tojson(separators=(',', ':')) }}"),
    ("f_trim_length", "[{{ s | trim }}] {{ s | length }} {{ l | length }} {{ d | length }}"),
    ("f_join", "{{ l | join(', ') }} {{ messages | map(attribute='role') | join('/') }}"),
    ("f_default", "{{ x | default('dflt') }} {{ none | default('no') }} {{ '' | default('e', true) }}"),
    ("f_items", "{% for k, v in d | items %}{{ k }}{% endfor %}"),
    ("f_case_replace", "{{ 'AbC' | lower }} {{ 'AbC' | upper }} {{ 'a-b-c' | replace('-', '+') }}"),
    ("f_string_first_last_list", "{{ 5 | string ~ 'x' }} {{ l | first }} {{ l | last }} {{ 'abc' | list }}"),
    ("f_select", "{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | list }} {{ messages | rejectattr('role', 'in', ['system']) | list | length }} {{ [0, 1, 2] | select | list }}"),
    ("f_dictsort_sort", "{{ d | dictsort }} {{ l | sort }} {{ l | sort(reverse=true) }}"),
    # methods
    ("m_string", "{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ 'a,b,c'.split(',') }}|{{ 'a b  c'.split() }}|{{ 'a,b,c'.split(',', 1) }}|{{ s.startswith('  He') }}|{{ s.endswith('x') }}|{{ 'xxaxx'.strip('x') }}"),
    ("m_dict", "{{ d.get('b') }} {{ d.get('zz', 'no') }} {{ d.get('zz') }} {{ d.keys() | list }} {{ d.items() | list }}"),
    ("g_strftime", "{{ strftime_now('%d %b %Y') }} {{ strftime_now('%Y-%m-%d %A') }}"),
    # errors
    ("err_raise", "line1\n  {{ raise_exception('boom here') }}"),
    ("err_append", "{% set x = [] %}{{ x.append(1) }}"),
    ("err_syntax", "{% if %}"),
    ("err_unclosed", "{% for x in l %}"),
    ("err_type", "{{ 'a' + 1 }}"),
    ("err_undefined_call", "{{ foo() }}"),
]


def main():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def strftime_now(fmt):
        return datetime.datetime(2024, 7, 26).strftime(fmt)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    out = []
    for name, src in CASES:
        case = {"name": name, "template": src, "context": CTX}
        try:
            case["expect"] = env.from_string(src).render(**CTX)
        except Exception as e:  # the C renderer must fail too
            case["error"] = f"{type(e).__name__}: {e}"
            line = getattr(e, "lineno", None)
            tb = e.__traceback__
            while tb is not None:  # runtime errors: the template frame's line
                if tb.tb_frame.f_code.co_filename == "<template>":
                    line = tb.tb_lineno
                tb = tb.tb_next
            if line:
                case["error_line"] = line
        out.append(case)
    json.dump(out, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
