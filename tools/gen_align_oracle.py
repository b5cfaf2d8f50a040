#!/usr/bin/env python3
# gen_align_oracle.py - which parts of which messages each real chat template keeps or drops,
# decided by jinja2 itself (sentinel substitution), for tests/replay/analysis/test_align.c.
#
# Usage (developers, not CI; needs jinja2 3.1.x):
#   python3 tools/gen_align_oracle.py [SHARED_DIR] > testdata/replay/align/oracle.json
# SHARED_DIR defaults to ../shared next to the repository.
#
# Method: every template in SHARED/templates/ (and orig/) is rendered exactly as
# SHARED/tools/render_goldens.py does (its environment setup is copied below; that script runs
# main() at import time, so it cannot be imported).  For every golden case whose render succeeded,
# and every part of every message (visible content, reasoning, each tool call's name and arguments,
# tool result content), the conversation is re-rendered with that one part replaced by a unique
# sentinel.  The part is "kept" when the sentinel appears in the output, "dropped" when it does not,
# "error" when the substituted render raises.  "verbatim" says whether the output with the sentinel
# put back equals the golden render (the template printed the part unchanged).
import copy, datetime, json, os, sys

import jinja2, jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

SENT = "ZQXSENTINEL7"

# ---- copied from shared/tools/render_goldens.py (keep in sync) --------------------------------
FIXED_DATE = datetime.datetime(2024, 7, 26)
def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)
def tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
def strftime_now(fmt):
    return FIXED_DATE.strftime(fmt)
env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
env.filters['tojson'] = tojson
env.globals['raise_exception'] = raise_exception
env.globals['strftime_now'] = strftime_now
SPECIAL = {
 'deepseek': ('<｜begin▁of▁sentence｜>', '<｜end▁of▁sentence｜>'),
 'Qwen': (None, '<|im_end|>'),
 'llama': ('<|begin_of_text|>', '<|eot_id|>'),
 'istral': ('<s>', '</s>'),
 'gpt-oss': ('<|startoftext|>', '<|return|>'),
 'Kimi': ('[BOS]', '[EOS]'),
 'GLM': (None, '<|endoftext|>'),
 'gemma': ('<bos>', '<eos>'),
 'Phi': ('<s>', '<|endoftext|>'),
}
def special(name):
    for k, v in SPECIAL.items():
        if k in name: return v
    return ('', '')
# ------------------------------------------------------------------------------------------------


def sentinel_leaves(v):
    """Replace every string leaf of a JSON value by the sentinel (the whole value if it has none)."""
    found = [False]
    def walk(x):
        if isinstance(x, dict): return {k: walk(y) for k, y in x.items()}
        if isinstance(x, list): return [walk(y) for y in x]
        if isinstance(x, str):
            found[0] = True
            return SENT
        return x
    out = walk(v)
    return out if found[0] else {"value": SENT}


def variants(msg):
    """Yield (part_name, substituted message, original text of the part) for every part of msg."""
    c = msg.get('content')
    if msg.get('role') == 'tool':
        if isinstance(c, str) and c:
            yield 'tool_result', dict(msg, content=SENT), c
    elif isinstance(c, str) and c:
        k = c.rfind('</think>')
        if k >= 0:
            head, vis = c[:k + len('</think>')], c[k + len('</think>'):]
            if vis.strip():
                lead = vis[:len(vis) - len(vis.lstrip())]
                yield 'content', dict(msg, content=head + lead + SENT), vis.strip()
            o = head.find('<think>')
            body = head[o + len('<think>') if o >= 0 else 0:k]
            if body.strip():
                pre = head[:o + len('<think>')] if o >= 0 else ''
                yield 'reasoning', dict(msg, content=pre + '\n' + SENT + '\n</think>' + c[k + 8:]), body.strip()
        else:
            yield 'content', dict(msg, content=SENT), c
    r = msg.get('reasoning_content')
    if isinstance(r, str) and r:
        yield 'reasoning', dict(msg, reasoning_content=SENT), r
    for i, tc in enumerate(msg.get('tool_calls') or []):
        fn = tc.get('function', {})
        m = copy.deepcopy(msg)
        m['tool_calls'][i]['function']['name'] = SENT
        yield f'tool_calls[{i}].name', m, fn.get('name')
        a = fn.get('arguments')
        m = copy.deepcopy(msg)
        if isinstance(a, str):
            try:
                m['tool_calls'][i]['function']['arguments'] = json.dumps(sentinel_leaves(json.loads(a)))
            except ValueError:
                m['tool_calls'][i]['function']['arguments'] = SENT
        else:
            m['tool_calls'][i]['function']['arguments'] = sentinel_leaves(a)
        yield f'tool_calls[{i}].arguments', m, None


def main(shared):
    tdir = os.path.join(shared, 'templates')
    summary = json.load(open(os.path.join(tdir, 'goldens', 'SUMMARY.json'), encoding='utf-8'))
    cases, results = summary['cases'], summary['results']
    out = {'generated_by': 'tools/gen_align_oracle.py', 'jinja2': jinja2.__version__,
           'sentinel': SENT, 'templates': {}}
    for name in sorted(results):
        path = os.path.join(tdir, name.replace('__', '/') + '.jinja')
        tpl = env.from_string(open(path, encoding='utf-8').read())
        bos, eos = special(name)
        tout = {}
        for cname, status in results[name].items():
            if not status.startswith('ok'):
                continue
            case = cases[cname]
            def render(msgs):
                kw = copy.deepcopy(case)
                kw['messages'] = msgs
                kw.update(bos_token=bos, eos_token=eos)
                return tpl.render(**kw)
            golden = open(os.path.join(tdir, 'goldens', name, cname + '.txt'), encoding='utf-8').read()
            base = render(copy.deepcopy(case['messages']))
            if base != golden:
                raise SystemExit(f'{name}/{cname}: render differs from the golden; environment out of sync')
            mout = []
            for i, msg in enumerate(case['messages']):
                parts = {}
                for pname, sub, orig in variants(msg):
                    msgs = copy.deepcopy(case['messages'])
                    msgs[i] = sub
                    try:
                        r = render(msgs)
                    except Exception as e:  # the template rejects the substituted value
                        parts[pname] = {'state': 'error', 'error': f'{type(e).__name__}: {str(e)[:100]}'}
                        continue
                    kept = SENT in r
                    ent = {'state': 'kept' if kept else 'dropped'}
                    if kept and orig is not None:
                        ent['verbatim'] = r.replace(SENT, orig) == golden
                    parts[pname] = ent
                mout.append({'role': msg.get('role'), 'parts': parts})
            tout[cname] = mout
        out['templates'][name] = tout
    json.dump(out, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write('\n')


if __name__ == '__main__':
    here = os.path.dirname(os.path.abspath(__file__))
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, '..', '..', 'shared'))
