#!/usr/bin/env python3
"""gen_tpl_unit_cases.py - expected values for tests/replay/template/jinja/test_tpl_unit.c.

Renders each small template below with Python jinja2 set up as transformers
sets it up (ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True),
loopcontrols, json.dumps tojson, raise_exception, strftime_now pinned to
2024-07-26) and writes testdata/replay/tpl/cases.json:
[{"name", "template", "context", "expect"} or {..., "error": "<Type>: <msg>",
"error_line": N}].  A float in the context stays a float even when it is
whole (2.0): the C side reads the file with cJSON and keeps the number
literals with ld_tpl_json_keep_floats.
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
       "none": None, "t": True, "whole": 2.0,
       "tree": [{"name": "a", "children": [{"name": "b", "children": []}, {"name": "c", "children": [{"name": "d"}]}]},
                {"name": "e"}],
       "people": [{"name": "Ann", "city": "Oslo"}, {"name": "Bob", "city": "Rome"}, {"name": "Cy", "city": "Oslo"}]}

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
    # gaps found while building the differential corpus (tools/gen_tpl_corpus.py)
    ("expr_chained_compare", "{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 < 3 > 2 }} {{ 1 == 1 != 2 }} {{ n > 5 > f }} {{ 1 < n <= 7 < 8 }}"),
    ("scope_set_in_for_resets", "{% for i in [1,2,3] %}{% if i == 1 %}{% set x = 5 %}{% endif %}[{{ x }}]{% endfor %}"),
    ("scope_set_in_for_outer", "{% set x = 1 %}{% for i in [1,2] %}[{{ x }}]{% set x = i * 10 %}[{{ x }}]{% endfor %}{{ x }}"),
    ("loop_recursive", "{% for item in tree recursive %}<{{ item.name }}{{ loop.depth }}{{ loop.depth0 }}{% if item.children %}[{{ loop(item.children) }}]{% endif %}>{% endfor %}"),
    ("loop_recursive_index", "{% for item in tree recursive %}{{ loop.index }}{{ item.name }}{% if item.children %}({{ loop(item.children) | trim }}){% endif %} {% endfor %}"),
    ("loop_cycle", "{% for x in l %}{{ loop.cycle('odd', 'even') }}{{ loop.cycle(1, 2, 3) }} {% endfor %}"),
    ("macro_call_block", "{% macro wrap(t) %}<{{ t }}:{{ caller() }}>{% endmacro %}{% call wrap('a') %}body{{ n }}{% endcall %}"),
    ("macro_call_block_args", "{% macro each(xs) %}{% for x in xs %}{{ caller(x, loop.index) }}{% endfor %}{% endmacro %}{% call(x, i) each(l) %}[{{ i }}:{{ x }}]{% endcall %}"),
    ("stmt_filter_block", "{% filter upper %}abc {{ s | trim }}{% endfilter %}|{% filter replace('a', 'b') %}aaa{{ 'a' }}{% endfilter %}|{% filter trim | upper %}  x  {% endfilter %}"),
    ("stmt_raw", "{% raw %}{{ x }} {% if %}{# c #}{% endraw %}|\n  {%- raw %} a {% endraw -%}  |{% raw %}\n{{ y }}{% endraw %}"),
    ("f_tojson_sort_keys", "{{ d | tojson(sort_keys=true) }}|{{ {'b': {'z': 1, 'y': 2}, 'a': none} | tojson(sort_keys=true, indent=1) }}"),
    ("f_indent", "{{ 'a\nb\n\nc' | indent }}|{{ 'a\nb' | indent(2, true) }}|{{ 'a\n\nb\n' | indent(4, blank=true) }}|{{ 'x\ny' | indent('> ') }}|{{ 'x\ny' | indent(width=1, first=true) }}"),
    ("f_unique", "{{ [1, 2, 1, 3, 2] | unique | list }} {{ ['a', 'A', 'b'] | unique | list }} {{ ['a', 'A'] | unique(case_sensitive=true) | list }} {{ people | unique(attribute='city') | map(attribute='name') | list }}"),
    ("f_groupby", "{% for g in people | groupby('city') %}{{ g.grouper }}:{{ g.list | map(attribute='name') | join(',') }};{% endfor %}|{% for city, ps in people | groupby('city') %}{{ city }}={{ ps | length }} {% endfor %}"),
    ("f_case_unicode", "{{ 'éàç ÀÉÏ ñ' | upper }} {{ 'ΑΒΓ ΔΈΖ' | lower }} {{ 'привет МИР' | title }} {{ 'élan VITAL' | capitalize }} {{ 'ÿ Ω ж' | upper }}"),
    ("m_case_unicode", "{{ 'Ärger'.upper() }} {{ 'ΣΟΦΊΑ'.lower() }} {{ 'Ёлка'.lower() }} {{ 'åsa öberg'.title() }}"),
    ("f_title_words", "{{ \"they're 3rd-place (mc)donald x\tY ΟΔΟΣ\" | title }}|{{ \"they're 3rd-place (mc)donald ΟΔΟΣ\".title() }}|{{ 'straße'.upper() }} {{ 'ß'.capitalize() }} {{ 'ΟΔΟΣ ΣΑ'.lower() }}"),
    ("f_groupby_more", "{{ (people | groupby('city'))[0] }}|{% for g in [{'k': 'a'}, {'k': 'A'}, {'k': 'b'}, {}] | groupby('k', default='z') %}{{ g.grouper }}{{ g.list | length }} {% endfor %}|{% for g in [{'k': 'a'}, {'k': 'A'}] | groupby('k', case_sensitive=true) %}{{ g.grouper }}{% endfor %}|{% for g in [[1, 'x'], [0, 'y'], [1, 'z']] | groupby(0) %}{{ g.grouper }}:{{ g.list | map('last') | join }} {% endfor %}"),
    ("f_unique_more", "{{ ['b', 'B', 'a', 'b'] | unique | join(',') }} {{ [1, 1.0, true, 2] | unique | list }} {{ 'hello' | unique | join }}"),
    ("expr_chained_more", "{{ 1 < 2 in [true] }} {{ 1 < 2 in [2] }} {{ 'a' not in 'b' != false }} {{ (1 < 2) < 2 }} {{ 3 > 2 == 2 }}"),
    ("scope_set_in_for_nested", "{% for i in [1, 2] %}{% set x = i %}{% for j in [1, 2] %}{% if j == 1 %}{% set y = x * 10 %}{% endif %}{{ x }}{{ y }};{% endfor %}{% endfor %}|{% set ns = namespace(n=0) %}{% for i in [1, 2] %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}"),
    ("loop_recursive_else_filter", "{% for x in tree if x.name != 'e' recursive %}{{ x.name }}({{ loop(x.children) if x.children else '' }}){% else %}-{% endfor %}"),
    ("loop_cycle_nested", "{% for a in [1, 2] %}{% for b in [1, 2, 3] %}{{ loop.cycle('x', 'y') }}{% endfor %}{{ loop.cycle('A', 'B') }}{% endfor %}"),
    ("macro_call_block_scope", "{% macro box() %}[{{ caller() }}]{% endmacro %}{% for m in messages %}{% call box() %}{{ loop.index }}{{ m.role }}{% endcall %}{% endfor %}{% macro twice() %}{{ caller(1) }}{{ caller(2) }}{% endmacro %}{% call(k) twice() %}<{{ k }}{% call box() %}{{ k * 2 }}{% endcall %}>{% endcall %}"),
    ("stmt_filter_block_more", "{% filter indent(2, true) %}a\nb{% endfilter %}|{% filter upper %}{% filter replace('x', 'y') %}x{% set z = 1 %}{% endfilter %}x{% endfilter %}|{% filter title %}hello world{% endfilter %}"),
    ("stmt_raw_ws", "a\n  {% raw %}  {{ x }}\n  {% endraw %}\nb|{% raw -%}   y   {%- endraw %}|{%- raw %}z{% endraw +%}\n"),
    ("m_format_more", "{{ '{!r} {!s} {k!r}'.format('a', 'b', k=none) }} {{ '{0}{0}{1}'.format(1, 2) }} {{ '}}{{'.format() }} {{ '{}'.format(d) }}"),
    ("expr_repr_unprintable", "{{ ['nbsp\u00a0', 'zwj\u200d', '\x85', 'id\u3000', 'é', 'ls\u2028', 'bom\ufeff', 'pua\ue000', 'tab\t', 'x\x7f', 'emoji👍', \"it's\", 'a\\b'] }}"),
    # json.dumps' escapes at every place of strings around the 8- and
    # 16-byte steps tpl_escape.c scans in (and two in a row, and a tail)
    ("f_tojson_escape_places", "{% for n in [7, 8, 9, 15, 16, 17, 31, 33] %}{% for i in range(n) %}{% for c in ['\"', '\\n', '\x01', '\\\\'] %}{{ ('a' * i ~ c ~ 'é' * ((n - i - 1) // 2) ~ 'b' * ((n - i - 1) % 2)) | tojson }}{% endfor %}{% endfor %}{% endfor %}|{{ ('x' * 20 ~ '\"\\n\x1f' ~ 'y' * 13) | tojson }}"),
    ("f_tojson_ensure_ascii", "{{ ['é', '👍', 'x\x7f', 'ok', 'ß\n'] | tojson(ensure_ascii=true) }}|{{ {'ключ': 'é'} | tojson(ensure_ascii=false) }}"),
    ("f_format_printf", "{{ '%s-%d|%r|%%|%i' | format('a', 7, 'q', 3) }} {{ '%s' | format(none) }} {{ '%.2f' | format(f) }} {{ '%(x)s' | format(x=1) if false else 'ok' }}"),
    ("f_numbers", "{{ [3, 1, 2] | sum }} {{ l | sum(start=10) }} {{ people | sum(attribute='n', start=0) if false else '' }}{{ l | min }} {{ l | max }} {{ ['b', 'A', 'c'] | max }} {{ ['b', 'A', 'c'] | min(case_sensitive=true) }} {{ people | max(attribute='name') }} {{ [] | max }}|{{ 2.5 | round }} {{ 3.14159 | round(2) }} {{ 2.5 | round(0, 'floor') }} {{ 2.1 | round(0, 'ceil') }} {{ 7 | round }} {{ -0.5 | round }}"),
    ("f_seq_more", "{{ l | batch(2) | list }} {{ l | batch(2, 'x') | list }} {{ people | map(attribute='name') | list | batch(2) | map('join', '+') | join(' ') }} {{ messages[0] | attr('role') }}"),
    # the same past the 16-byte steps that copy as they scan, and for the
    # 1-15 bytes after them (the last 16 bytes read at once, or words)
    ("f_tojson_escape_places_more", "{% for n in [1, 2, 3, 5, 6, 10, 12, 14, 18, 23, 32, 48, 49] %}{% for i in range(n) %}{% for c in ['\"', '\x01'] %}{{ ('a' * i ~ c ~ 'b' * (n - i - 1)) | tojson }}{% endfor %}{% endfor %}{% endfor %}|{% for k in range(40) %}{{ ('\"' ~ 'x' * k ~ '\\\\\"') | tojson }}{{ ('\n' * (k % 3) ~ 'y' * k ~ '\t') | tojson }}{% endfor %}|{{ ('é' * 20 ~ '\"' ~ 'é' * 20) | tojson }}"),
    ("f_text_more", "{{ 'a b  c\nd' | wordcount }} [{{ 'ab' | center(6) }}] {{ '<a href=\"x\">&' | e }} {{ '<b>' | escape }} {{ 'hello world foo bar' | truncate(11) }} {{ 'hello' | truncate(3, true, '..', 0) }}"),
    ("m_string_more", "{{ ', '.join(['a', 'b']) }} {{ ''.join(l | map('string')) }} {{ 'abcabc'.rfind('b') }} {{ 'ab1'.isalnum() }} {{ 'ab'.isalpha() }} {{ 'AB'.isupper() }} {{ 'ab'.islower() }} {{ 'prefix_x'.removeprefix('prefix_') }} {{ 'x.txt'.removesuffix('.txt') }}"),
    ("expr_tuple_literals", "{{ () }} {{ (1,) }} {{ ('a', 1) }} {{ [('a', 1)] }} {{ {'a': (1,)} }} {{ () | length }}"),
    ("expr_int_literals", "{{ 1_000 + 0x10 }} {{ 0o17 }} {{ 0b101 }} {{ 0xFF_FF }}"),
    ("expr_repeat", "{{ 'x' * 3 }} {{ [1, 'a'] * 2 }} {{ 3 * 'y' }} {{ 2 * [0] }} {{ (1,) * 2 }}"),
    ("expr_neg_zero", "{{ -0.0 }} {{ -(0.0) }} {{ 0.0 * -1 }} {{ -f }} {{ -n }} {{ [-0.0] | tojson }}"),
    ("macro_varargs_kwargs", "{% macro f(a, b=2) %}{{ a }}{{ b }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ f(1) }}|{{ f(1, 3, 4, 5) }}|{{ f(1, c=9, b=0) }}"),
    ("m_rsplit", "{{ 'a b c'.rsplit(' ', 1) }} {{ '  a  b c  '.rsplit(none, 1) }} {{ 'a,b,,c'.rsplit(',') }} {{ 'a::b::c'.rsplit('::', 1) }} {{ 'abc'.rsplit('x') }}"),
    # json.dumps' escapes around the 32-byte steps (AVX2) and the 16-byte
    # and tail steps after them, every byte that is escaped (each control
    # byte, a quote, a backslash), and strings long enough to be written
    # into a filter's own buffer (a concatenation) or straight into the output
    ("f_tojson_escape_places_wide", "{% for n in [32, 33, 47, 48, 63, 64, 65, 95, 96, 97] %}{% for i in range(0, n, 3) %}{% for c in ['\"', '\\n', '\x1f'] %}{{ ('a' * i ~ c ~ 'b' * (n - i - 1)) | tojson }}{% endfor %}{% endfor %}{% endfor %}|{% for k in range(1, 70, 5) %}{{ ('x' * k ~ '\\\\' ~ 'é' * k ~ '\t\"') | tojson }}{{ '<' ~ (('y' * k ~ '\r') * 3) | tojson ~ '>' }}{% endfor %}"),
    # several escapes in one 32-byte step (all found from its one mask), at
    # every spacing, the plain bytes after them stored 32 at a time or, near
    # the string's end, copied exactly; strings of 0-16 bytes (one 16-byte
    # test) with an escape at every place; an elif chain (its conditions
    # followed in turn), and pieces of output of 14-35 bytes
    ("f_tojson_escapes_per_block", "{% for n in [32, 33, 40, 63, 64, 65, 70, 96, 100] %}{% for gap in [0, 1, 2, 5, 13, 31] %}{{ (('a' * gap ~ '\"') * 40)[:n] | tojson }}{{ (('\\n' ~ 'b' * gap ~ '\\\\') * 40)[:n] | tojson }}{{ (('é' * gap ~ '\\x01') * 40)[1:n] | tojson }}{% endfor %}{% endfor %}|{% for k in range(0, 40, 3) %}{{ ('x\"\\x01\\\\\\t' * 30)[k:k + 64 + k] | tojson }}{% endfor %}"),
    ("f_tojson_short_strings", "{% for n in range(17) %}{% for i in range(n) %}{{ ('a' * i ~ '\"' ~ 'b' * (n - i - 1)) | tojson }}{{ ('c' * i ~ '\\x1f' ~ 'é' * ((n - i - 1) // 2)) | tojson }}{% endfor %}{{ ('d' * n) | tojson }}{% endfor %}|{{ '' | tojson }}|{{ {'k' * 15: 'v' * 16, 'q\"': 'x\\ny', 'é': ['a' * 16, 'b' * 17]} | tojson(indent=2) }}"),
    ("stmt_elif_chain", "{% for x in range(7) %}{% if x == 0 %}a{% elif x == 1 %}b{% elif x == 2 %}{% if true %}c{% endif %}{% elif x == 3 %}d{% elif x == 5 %}{% else %}{% if x == 4 %}e{% else %}f{% endif %}{% endif %}{% endfor %}|{% for x in range(6) %}{% if x == 1 %}{% continue %}{% elif x == 4 %}{% break %}{% elif x == 2 %}[{{ x }}]{% endif %}{{ x }}{% endfor %}|{% if none %}1{% elif 0 %}2{% elif '' %}3{% endif %}."),
    ("out_pieces_17_32", "{% for k in range(14, 36) %}{{ 'x' * k }}|{{ 'y' * (k - 1) ~ 'z' }}|{% set s = 'w' * k %}{{ s + '!' }}{% endfor %}"),
    ("f_tojson_every_escape", "{{ ('\\x01\\x02\\x03\\x04\\x05\\x06\\x07\\x08\\t\\n\\x0b\\x0c\\r\\x0e\\x0f\\x10\\x11\\x12\\x13\\x14\\x15\\x16\\x17\\x18\\x19\\x1a\\x1b\\x1c\\x1d\\x1e\\x1f\\\"\\\\ok' * 3) | tojson }}|{{ 'x' ~ ('\\x1f\\r\\x01' * 40) | tojson }}|{{ ('\\x7f\\x20~\\r' * 12) | tojson }}"),
    # numbers and keys of every kind through json.dumps (with and without
    # indent and separators), and str() of ints at the ends of 64 bits
    ("f_tojson_scalars_keys", "{{ [0, -1, 7, -10, 100, 922337203685477580 * 10 + 7, -922337203685477580 * 10 - 8, true, false, none, 2.5, -0.0] | tojson }}|{{ {1: 'a', 2.5: 'b', true: 'c', none: 'd', 'e': [1, {'f': none}]} | tojson }}|{{ {'a': [1, 2], 'b': {}, 'c': []} | tojson(indent=3) }}|{{ {'a': [1, true], 'b': 'x'} | tojson(separators=('', '=')) }}|{{ {'a': [1, true]} | tojson(indent=0, separators=(';', ' -> ')) }}|{{ 922337203685477580 * 10 + 7 }} {{ -922337203685477580 * 10 - 8 }} {{ -42 }} {{ [-1, 0, 12345678901] }}"),
    # the comparisons a condition takes in one step (a key of a name against
    # a string, a string in a name) on every kind of value, and where the
    # key or the name is missing
    ("expr_cond_key_shapes", "{% set m = {'role': 'user', 'n': 3, 'z': none, 'l': ['user'], 'e': ''} %}{% set s = 'a tool_calls b' %}{% set ns = namespace(role='user', k=1) %}{% if m.role == 'user' %}1{% endif %}{% if m['role'] != 'user' %}2{% endif %}{% if m.n == 'user' %}3{% endif %}{% if m.n != '3' %}4{% endif %}{% if m.z == 'user' %}5{% endif %}{% if m.l == 'user' %}6{% endif %}{% if m.e == '' %}7{% endif %}{% if m.missing == 'user' %}8{% endif %}{% if m.missing != 'user' %}9{% endif %}{% if l.role == 'user' %}B{% endif %}{% if s.role != 'x' %}C{% endif %}{% if ns.role == 'user' %}D{% endif %}{% if m.role == 'use' %}E{% endif %}{% if m.items == 'x' %}F{% endif %}|{% if 'role' in m %}1{% endif %}{% if 'nope' in m %}2{% endif %}{% if 'nope' not in m %}3{% endif %}{% if 'tool' in s %}4{% endif %}{% if 'xyz' in s %}5{% endif %}{% if 'xyz' not in s %}6{% endif %}{% if 'user' in l %}8{% endif %}{% if '' in s %}A{% endif %}{% for message in messages %}{% if message.role == 'assistant' %}[{{ loop.index }}]{% endif %}{% if 'tool_calls' in message %}<{{ loop.index }}>{% endif %}{% endfor %}"),
    ("err_cond_in_none", "{% if 'x' in none %}y{% endif %}"),
    ("err_cond_in_namespace", "{% set ns = namespace(k=1) %}{% if 'k' in ns %}y{% endif %}"),
    ("err_in_namespace", "{% set ns = namespace(k=1) %}{{ 'k' in ns }}"),
    ("err_cond_key_of_undefined", "{% if nothing.role == 'user' %}y{% endif %}"),
    ("expr_cond_in_undefined", "{% if 'x' in nothing %}y{% else %}n{% endif %}{% if 'x' not in nothing %}y{% endif %}"),
    ("err_cond_in_int", "{% set m = {'a': 1} %}{% if 'x' in n %}y{% endif %}"),
    ("m_list_index_count", "{{ l.index(1) }} {{ [1, 2, 1].count(1) }} {{ messages.index(messages[1]) }}"),
    ("f_slice_dictsort_by", "{{ l | slice(2) | list }} {{ [1, 2, 3, 4] | slice(2, 0) | list }} {{ [1, 2, 3] | slice(2, 'x') | list }}|{{ {'b': 1, 'a': 2} | dictsort(by='value') }} {{ {'b': 1, 'a': 2} | dictsort(false, 'value', true) }}"),
    ("m_format_spec", "{{ '{:>5}|{:<5}|{:^6}|{:*^7}|{:5}|{:.2}'.format('a', 'b', 'c', 'd', 'e', 'xyz') }}|{{ '{:5d}|{:+d}|{: d}|{:05d}|{:#x}|{:X}|{:o}|{:#b}|{:c}|{:=+6d}'.format(42, 42, 42, -42, 255, 255, 8, 5, 65, 7) }}|{{ '{:.2f}|{:8.3f}|{:e}|{:.1e}|{:g}|{:.3g}|{:%}|{:.1%}|{:f}|{:10}|{:.3}|{}'.format(3.14159, 2.5, 12345.678, 0.000123, 0.0001, 1234567.0, 0.25, 0.125, 1, 2.5, 2.0, 1e20) }}|{{ '{!r:>6}|{!s:<4}|{:ñ>3}'.format('a', 1, 'b') }}"),
    ("err_format_spec_type", "{{ '{:d}'.format('x') }}"),
    ("m_format", "{{ '{} and {}'.format(1, 'b') }} {{ '{0}-{1}-{0}'.format('x', 'y') }} {{ '{name}!'.format(name='z') }} {{ '{{}}{}'.format(3) }} {{ '{}'.format(none) }} {{ '{}|{}'.format(f, [1]) }}"),
    ("expr_whole_float", "{{ whole }} {{ whole | tojson }} {{ [whole] }} {{ whole * 2 }} {{ whole | int }} {{ {'w': whole} | tojson }}"),
    # sizes past the old silent caps (center 100000, indent 256, format 511
    # bytes, tojson indent 64, strftime 255 bytes): the full text; a 300000
    # wide one summed up by its length and what is not padding
    ("f_center_wide", "[{{ 'ab' | center(1001) }}]|{% set x = 'ab' | center(300000) %}{{ x | length }}:{{ x.find('ab') }}:{{ x.strip() }}"),
    ("f_indent_wide", "{{ 'a\nb\n\nc' | indent(300) }}|{% set x = 'a\nb' | indent(300000, true) %}{{ x | length }}:{{ x | replace(' ', '') }}|{{ 'one line' | indent(1000000000) }}"),
    ("f_format_wide", "{{ '%600d|%-600s|%.600f|%.600d' | format(7, 'x', 1.5, -3) }}|{% set x = '%.300000f' | format(1.5) %}{{ x | length }}:{{ x[:4] }}:{{ x.count('0') }}|{% set y = '%300000s' | format('é') %}{{ y | length }}:{{ y.strip() }}"),
    ("f_format_flags", "{{ '%.3d|%5.1s|%-4d|%+d|%05d|%#o|%#x|%#05x|%05.3d|%+.3x|% d|%-+5d|%ld' | format(7, 'abc', 3, 4, -5, 8, 255, 7, 7, 7, 3, 7, 9) }}|{{ '%08.3f|%-8.2e|%+08.2f|%#.0f|%010.3g|%#g|%.1000g|%.1000000000g' | format(-2.5, 2.5, 2.5, 7, -2.5, 7, 0.1, 0.1) }}|{{ '%c|%c|%5c|%-3c|' | format(233, 'x', 65, 'é') }}"),
    ("f_tojson_indent_wide", "{{ {'a': [1, {'b': 2}]} | tojson(indent=100) }}|{{ {'a': 1} | tojson(indent=true) }}|{% set x = {'a': [1]} | tojson(indent=300000) %}{{ x | length }}:{{ x | replace(' ', '') | tojson }}"),
    ("m_format_wide", "{{ '{:>600}|{:.600f}|{:^601}|{:*<5}'.format('x', 1.5, 'é', 'ab') }}|{% set x = '{:>300000}'.format('x') %}{{ x | length }}:{{ x.strip() }}|{% set y = '{:.300000f}'.format(2.5) %}{{ y | length }}:{{ y.count('0') }}|{{ '{:.1000000000g}|{:c}'.format(0.1, 233) }}"),
    ("m_replace_sizes", "{{ 'aé'.replace('', '-') }}|{{ 'abc' | replace('', '-', 2) }}|{{ 'aaa' | replace('aa', 'b') }}|{{ 'xyxy'.replace('xy', '', 1) }}|{% set x = ('ab' * 1000) | replace('b', 'x' * 200) %}{{ x | length }}:{{ x.count('a') }}|{% set ns = namespace(s='a') %}{% for i in range(20) %}{% set ns.s = ns.s | replace('a', 'aa') %}{% endfor %}{{ ns.s | length }}"),
    ("g_strftime_long", "{{ strftime_now('%Y-%m-%d ' * 40) }}|{{ strftime_now('%Y' * 100000) | length }}|{{ strftime_now('%z|%Z|%f|%%z|%') }}"),
    # conversions to int: Python's syntax, no undefined behaviour at the
    # 64-bit edges (beyond them: test_tpl_unit.c, Python's ints are unbounded)
    ("f_int_conversions", "{{ '42.23' | int }} {{ ' 1_000.5 ' | int }} {{ '0x1f' | int }} {{ '0x1f' | int(base=16) }} {{ '0x_1f' | int(base=0) }} {{ '012' | int(base=0) }} {{ '1e3' | int }} {{ '.5' | int }} {{ '1__0' | int }} {{ 'x' | int(5) }} {{ 'inf' | int }} {{ '-1e400' | int(7) }} {{ 'nan' | int }} {{ none | int }} {{ true | int }} {{ 'z' | int(base=36) }} {{ '12' | int(base=1) }}"),
    ("f_int_edges", "{{ '-9223372036854775808' | int }} {{ '9223372036854775807' | int }} {{ 9.2e18 | int }} {{ -9.2e18 | int }} {{ -2.9 | int }} {{ '%d|%i' | format(-2.9, 9.2e18) }} {{ ((-2) ** 62) | abs }} {{ [2 ** 62 - 1, 2 ** 62] | sum }}"),
    ("f_float_conversions", "{{ '1_0' | float }} {{ '0x10' | float }} {{ 'x' | float(2) }} {{ ' -Infinity ' | float }} {{ '1e' | float }} {{ 7 | float }} {{ none | float }} {{ true | abs }} {{ -2.5 | abs }}"),
    # keys a dict or a namespace lacks: undefined at once when the key names
    # no method, a method when it does (x['items'])
    ("expr_missing_keys", "{% set ns = namespace(a=1) %}{{ d.zz is defined }}{{ d['zz'] is defined }}{{ d['items'] is defined }}{{ d.get is defined }}{{ ns.zz is defined }}{{ d.zz | default('D') }}{{ messages[0].tool_calls is defined }}{{ messages[2]['tool_calls'][0]['function'].name }}{{ loop is defined }}"),
    # constant indexes in key chains (x[0].key, x.0), answered at once from
    # a list that has the item; the rest (out of range, negative, not a
    # list, a dict with int keys, an undefined in the chain) as jinja2 says
    ("expr_index_chain", "{{ messages[0].role }}{{ messages[-1].role }}{{ messages.1.content }}{{ messages[2].tool_calls[0].function.arguments.x }}{{ messages[2].tool_calls[-1]['function']['name'] }}|{{ messages[3] is defined }}{{ messages[-4] is defined }}{{ messages[2].tool_calls[1] is defined }}{{ l[0] }}{{ l[-3] }}{{ l[3] is defined }}|{{ s[2] }}{{ s[-3] }}{{ d.a[4] }}{{ d.a[4][1] }}{{ d.a.1 }}{{ d[0] is defined }}|{% set dd = {0: 'z', 1: {'k': 'v'}} %}{{ dd[0] }}{{ dd[1].k }}{{ dd.1.k }}{% set tt = (['p', 'q'], 2) %}{{ tt[0][1] }}{{ tt[-1] }}|{% for m in messages %}{{ m.tool_calls[0].function.name if m.tool_calls is defined else m.role[0] }}{% endfor %}"),
    ("err_index_chain_undefined", "{{ messages[2].tool_calls[0].function.name }}\n{{ messages[0].tool_calls[0] is defined }}"),
    # `'key' in dict` and == of two ints, without the general calls
    ("expr_in_dict_int_eq", "{{ 'role' in messages[0] }}{{ 'tool_calls' in messages[0] }}{{ 'tool_calls' in messages[2] }}{{ 'a' in d }}{{ 'zz' in d }}{{ 1 in d }}{{ 'b' in {'b': 1} }}{{ 0 in {0: 1} }}|{{ l | length == 3 }}{{ l | length != 3 }}{{ n == 7 }}{{ n == 7.0 }}{{ t == 1 }}{{ 0 == false }}{{ 2 ** 62 == 2 ** 61 * 2 }}{{ 2 ** 62 == 2 ** 62 + 1 }}{{ -1 == -1 }}"),
    ("expr_slice_grid", "{% set l5 = [0, 1, 2, 3, 4] %}{% for st in [1, 2, 3, -1, -2, -4] %}{% for b in [none, -7, -1, 0, 2, 5, 9] %}{% for e in [none, -7, -2, 0, 3, 5, 9] %}{{ l5[b:e:st] | join(',') }}/{{ 'abcde'[b:e:st] }};{% endfor %}{% endfor %}{% endfor %}"),
    ("expr_int_range_edges", "{% set m = (2 ** 62 - 1) * 2 + 1 %}{{ range(m - 7, m, 5) | list }} {{ range(-m, m, 2 ** 62) | list }} {{ range(m, m - 10, -m) | list }} {{ [1, 2, 3][1::m] }} {{ [1, 2, 3][::-m] }} {{ 'abc' | truncate(m) }}"),
    # scopes as names bound by slot (eval/tpl_scope.c): what a macro, a
    # caller body, a recursive loop and nested loops see, and what comes back
    # when their scope ends
    ("scope_loop_var_restored", "{% set x = 'out' %}{% for x in [1, 2] %}{{ x }}{% endfor %}{{ x }}|{% for a, b in [(1, 2)] %}{{ a }}{{ b }}{% endfor %}{{ a is defined }}|{% for messages in [1] %}{{ messages }}{% endfor %}{{ messages | length }}"),
    ("scope_nested_same_name", "{% for x in [1, 2] %}{% for x in ['a', 'b'] %}{{ x }}{% endfor %}{{ x }}{% endfor %}|{% for i in [1, 2] %}{% for j in [5] %}{{ loop.index }}{{ j }}{% endfor %}{{ loop.index }}{% endfor %}"),
    ("scope_macro_sees_no_loop", "{% macro m() %}[{{ x is defined }}{{ i is defined }}{{ loop is defined }}{{ g }}]{% endmacro %}{% set g = 'G' %}{% for i in [1] %}{% set x = 'in' %}{{ m() }}{{ x }}{% endfor %}{{ m() }}"),
    ("scope_macro_set_no_leak", "{% macro m(a) %}{% set z = a %}{% set g = 'm' %}{{ z }}{{ g }}{% endmacro %}{% set g = 'top' %}{{ m(1) }}[{{ z is defined }}{{ g }}]{% for i in [1, 2] %}{{ m(i) }}{{ g }}{% endfor %}"),
    ("scope_macro_param_shadows", "{% macro m(messages, range=3) %}{{ messages }}{{ range }}{% endmacro %}{{ m(1) }}{{ messages | length }}{{ range(2) | list }}|{% set n = 99 %}{% macro k() %}{{ n }}{% endmacro %}{{ k() }}"),
    ("scope_macro_recursion", "{% macro f(k) %}{% if k > 0 %}{% set mine = k %}{{ k }}({{ f(k - 1) }}){{ mine }}{% endif %}{% endmacro %}{% for k in [3] %}{{ f(k) }}{{ k }}{% endfor %}"),
    ("scope_caller_sees_site", "{% macro w() %}{% for i in ['m'] %}{% set y = 'macro' %}<{{ caller() }}{{ i }}{{ y }}>{% endfor %}{% endmacro %}{% for i in [1, 2] %}{% set y = i * 2 %}{% call w() %}{{ i }}{{ y }}{{ loop.index }}{% endcall %}{% endfor %}"),
    ("scope_caller_sets_no_leak", "{% macro w() %}{% set y = 'macro' %}{{ caller() }}{{ y }}{% endmacro %}{% set y = 'top' %}{% call w() %}{% set y = 'body' %}{{ y }}{% endcall %}{{ y }}"),
    ("scope_recursive_loop", "{% set top = 'T' %}{% for x in tree recursive %}{% set seen = x.name %}{{ x.name }}{{ top }}{{ loop.depth }}{% if x.children %}({{ loop(x.children) }}){% endif %}{{ seen }};{% endfor %}"),
    ("scope_loop_of_nested", "{% for a in ['x', 'y'] %}{% for b in [1] %}{{ b }}{% endfor %}{{ loop.index }}{% for c in [loop.index * 10] %}{{ c }}{% endfor %}{% for d in [] %}{% else %}<{{ loop.index }}>{% endfor %}{% for e in [1, 2, 3] if e > loop.index %}{{ e }}{% endfor %};{% endfor %}"),
    ("scope_loop_iteration_rebind", "{% for x in [1, 2, 3] %}{{ x }}{% if x == 2 %}{% set y = 'Y' %}{% endif %}{{ y is defined }}{% set x = 9 %}{{ x }}{% endfor %}|{% for x in [7, 8] if x > 0 %}{{ x }}{{ loop.index }}{% endfor %}|{% for m in messages %}{% set r = m.role %}{% for x in [m.role] %}{{ x == r }}{% endfor %}{% endfor %}"),
    ("scope_undefined_then_set", "{{ u is defined }}{% set u = 1 %}{{ u is defined }}{% for i in [1] %}{{ v is defined }}{% set v = 2 %}{{ v }}{% endfor %}{{ v is defined }}|{% set range = 5 %}{{ range }}"),
    ("scope_set_block_in_loop", "{% for i in [1, 2] %}{% set b %}x{{ i }}{% endset %}{{ b }}{% endfor %}{{ b is defined }}|{% set ns = namespace(n=0) %}{% macro add(k) %}{% set ns.n = ns.n + k %}{% endmacro %}{% for i in [1, 2, 3] %}{{ add(i) }}{% endfor %}{{ ns.n }}"),
    # errors
    ("err_int_inf", "{% set b = 1e308 %}\n{{ (b * 10) | int }}"),
    ("err_format_c_range", "{{ '%c' | format(1114112) }}"),
    ("err_format_x_float", "{{ '%x' | format(1.5) }}"),
    ("err_format_d_nan", "{% set b = 1e308 %}{{ '%d' | format(b * 10 - b * 10) }}"),
    ("err_format_precision", "{{ '%.3000000000f' | format(1.0) }}"),
    ("err_missing_key_chain", "{{ d.b }}\n{{ d.zz.yy }}"),
    ("err_missing_ns_chain", "{% set ns = namespace(a=1) %}{{ ns.b.c }}"),
    ("err_missing_item_chain", "{{ messages[0]['zz']['yy'] }}"),
    ("err_tojson_undefined", "{{ 'a' }}\n{{ [1, nothing] | tojson }}"),
    ("err_for_loop_target", "{% for x in [1] %}{% endfor %}\n{% for a, loop in [[1, 2]] %}{% endfor %}"),
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
