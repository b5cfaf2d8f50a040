#!/usr/bin/env python3
"""gen_replay_fixtures.py - a log for `logdiff replay`, with transformers' numbers to check it by.

Run by developers (not by CI), from the repository root, in the venv of engine/README.md:
    /tmp/engvenv/bin/python tools/gen_replay_fixtures.py [--shared ../shared]

The model is the tiny random-weight Qwen3 of testdata/models/qwen3 (tools/gen_tiny_models.py),
run by transformers in fp32 with eager attention.  For a fixed prompt of token ids, transformers
decodes greedily (argmax of the last position's logits, token after token, no stop token), and
the requests are logged the way SGLang's request logger writes them (../shared/tools/
sglang_render.py: `Receive:` and `Finish:` lines carrying `input_ids` and out['output_ids']):

  rp-greedy      the true greedy output                            -> replay.consistent
  rp-altered     the greedy output up to P, then at every position
                 from P on the token transformers ranks last        -> replay.divergent at P
  rp-no-output   a Receive line only (no Finish yet)                -> greedy continuation
  rp-bad-id      input_ids[5] = 300, outside the vocabulary of 300  -> error
  rp-ids-cut     as rp-text-only, with input_ids cut by the logger ([..] ... [..]): the same
  rp-text-only   a Finish line with the prompt text and no ids, its output the greedy decoding of
                 that text as HF tokenizers tokenizes it (special tokens parsed, nothing added)
                                                                    -> error without a tokenizer;
                                                                       consistent with model/

testdata/replay/replaylog/model/ is the same Qwen3 (config.json and model.safetensors link to
testdata/models/qwen3) with a tokenizer.json: a byte-level BPE of 256 byte tokens, a few merges
and the special tokens <|im_start|> <|im_end|>, built here with HF tokenizers (pinned below).

testdata/replay/replaylog/hidden-rp-greedy.{json,f32} hold transformers' hidden states of rp-greedy's
sequence (the prompt, then the logged output: position p holds token p) at a few positions, for
`logdiff replay --dump-layers` (tests/cli/replay_dump.sh): [planes, positions, hidden] raw little-endian
float32, planes the embeddings, the output of each decoder layer and of the final norm (forward hooks,
as tools/gen_tiny_models.py), the whole sequence run in one forward pass.

--out DIR writes everything into DIR instead of the fixture directory (to check that a rerun gives
the same bytes before copying what changed).

testdata/replay/replaylog/expect.json holds, per request with an output, transformers' teacher-
forced numbers at each output position (log_softmax of the logged token, its rank, the top-1
token and its log-probability, the margin between the top two logits), the divergence position,
and the greedy continuations.  Every expected value comes from transformers, none from logdiff.
"""
import argparse
import json
import os
import sys

import tokenizers
import torch
import transformers
from transformers import AutoModelForCausalLM

PINNED = {"torch": "2.15.0", "transformers": "5.23.0", "tokenizers": "0.23.3"}
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODEL = os.path.join(ROOT, "testdata", "models", "qwen3")
OUT = os.path.join(ROOT, "testdata", "replay", "replaylog")

PROMPT = [1, 17, 254, 3, 99, 42, 42, 7, 288, 150, 61, 5, 200, 33]
N_OUT = 12         # greedy tokens logged
P = 4              # rp-altered differs from here on
N_CONT = 8         # greedy continuation checked


def logits_of(model, ids):
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].to(torch.float64)


def greedy(model, prefix, n):
    """transformers' greedy decoding: argmax of the last position, n times (no stop token)."""
    ids, margins = list(prefix), []
    for _ in range(n):
        last = logits_of(model, ids)[-1]
        top2 = torch.topk(last, 2)
        margins.append(float(top2.values[0] - top2.values[1]))
        ids.append(int(torch.argmax(last)))
    return ids[len(prefix):], min(margins)


HIDDEN_POS = [0, 6, 13, 14, 19, 25]   # rp-greedy: prompt start, middle, last; output first, middle, last


def hidden_states(model, ids, positions):
    """transformers' hidden states of ids at positions: [embed, layer 0 .. layer L-1, final norm]."""
    inner, caught, hooks = model.model, {}, []

    def grab(key):
        def hook(_mod, _inp, out):
            caught[key] = (out[0] if isinstance(out, tuple) else out).detach()
        return hook
    names = ["embed"] + ["layer.%d" % i for i in range(len(inner.layers))] + ["norm"]
    mods = [inner.embed_tokens] + list(inner.layers) + [inner.norm]
    for name, mod in zip(names, mods):
        hooks.append(mod.register_forward_hook(grab(name)))
    with torch.no_grad():
        model(torch.tensor([ids]))
    for h in hooks:
        h.remove()
    planes = [caught[n].reshape(len(ids), -1)[positions].float() for n in names]
    return names, torch.stack(planes)


def teacher_forced(model, prompt, out):
    """Per output position: the logged token's log_softmax and rank, the top-1 and its
    log-probability, the margin between the top two logits."""
    lg = logits_of(model, prompt + out)
    rows = []
    for i, tok in enumerate(out):
        row = lg[len(prompt) - 1 + i]
        lp = torch.log_softmax(row, dim=-1)
        top = torch.topk(row, 2)
        rows.append({"id": tok, "logprob": float(lp[tok]),
                     "rank": 1 + int((row > row[tok]).sum()),
                     "top1": int(torch.argmax(row)), "top1_logprob": float(lp.max()),
                     "margin": float(top.values[0] - top.values[1])})
    return rows


TEXT = "<|im_start|>user\nhello there, the log<|im_end|>\n<|im_start|>assistant\n"
MERGES = [("h", "e"), ("l", "l"), ("he", "ll"), ("Ġ", "t"), ("Ġt", "he"), ("Ġ", "l"), ("o", "g")]


def byte_level_tokenizer():
    """A byte-level BPE over the model's 300 ids: 256 byte tokens (GPT-2's byte-to-unicode
    alphabet), MERGES, and two special tokens at 290 and 291."""
    alphabet = tokenizers.pre_tokenizers.ByteLevel.alphabet()
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    cs, n = list(bs), 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    byte_char = dict(zip(bs, (chr(c) for c in cs)))
    assert set(byte_char.values()) == set(alphabet)
    vocab = {byte_char[b]: b for b in range(256)}
    for a, b in MERGES:
        vocab[a + b] = len(vocab)
    while len(vocab) < 290:   # unreachable fillers, so that the special tokens are 290 and 291
        vocab["<unused%d>" % len(vocab)] = len(vocab)
    model = tokenizers.models.BPE(vocab=vocab, merges=MERGES)
    tok = tokenizers.Tokenizer(model)
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = tokenizers.decoders.ByteLevel()
    specials = ["<|im_start|>", "<|im_end|>"]
    tok.add_special_tokens([tokenizers.AddedToken(t, special=True, normalized=False) for t in specials])
    assert tok.token_to_id("<|im_end|>") == 291
    return tok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    ap.add_argument("--out", default=OUT)
    args = ap.parse_args()
    out_dir = args.out
    got = {"torch": torch.__version__.split("+")[0], "transformers": transformers.__version__,
           "tokenizers": tokenizers.__version__}
    if got != PINNED:
        sys.exit("expected %s, found %s" % (PINNED, got))
    sys.path.insert(0, os.path.join(args.shared, "tools"))
    import sglang_render as sr  # noqa: E402

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(MODEL, dtype=torch.float32,
                                                 attn_implementation="eager").eval()
    vocab = model.config.vocab_size

    true_out, min_margin = greedy(model, PROMPT, N_OUT)
    # a near-tie in the greedy path would make the fixture depend on rounding
    assert min_margin > 1e-3, min_margin
    altered = list(true_out[:P])
    for _ in range(P, N_OUT):
        last = logits_of(model, PROMPT + altered)[-1]
        altered.append(int(torch.argmin(last)))
    cont_p, _ = greedy(model, PROMPT + true_out[:P], N_CONT)
    cont_0, _ = greedy(model, PROMPT, N_CONT)

    tok = byte_level_tokenizer()
    text_ids = tok.encode(TEXT, add_special_tokens=False).ids
    assert text_ids.count(290) == 2 and max(text_ids) < vocab
    text_out, text_margin = greedy(model, text_ids, N_OUT)
    assert text_margin > 1e-3, text_margin

    lines, t = [], [0]

    def stamp():
        t[0] += 1
        return "[2026-11-29 12:00:%02d] " % t[0]

    sp = {"temperature": 0.0, "max_new_tokens": N_OUT}

    def receive(rid, ids, text=None):
        fields = [("rid", rid), ("text", text)]
        if ids is not None:
            fields.append(("input_ids", ids))
        fields.append(("sampling_params", sp))
        lines.append(stamp() + "Receive: obj=" + sr.text_render(sr.Record("GenerateReqInput", fields), sr.BIG))

    def finish(rid, ids, out_ids, text=None):
        fields = [("rid", rid), ("text", text)]
        if ids is not None:
            fields.append(("input_ids", ids))
        fields.append(("sampling_params", sp))
        out = {"text": "", "output_ids": out_ids, "meta_info": {
            "id": rid, "finish_reason": {"type": "length", "length": len(out_ids)},
            "prompt_tokens": len(ids) if isinstance(ids, list) else 0, "completion_tokens": len(out_ids)}}
        lines.append(stamp() + "Finish: obj=" + sr.text_render(sr.Record("GenerateReqInput", fields), sr.BIG)
                     + ", out=" + sr.text_render(out, sr.BIG))

    receive("rp-greedy", PROMPT)
    finish("rp-greedy", PROMPT, true_out)
    receive("rp-altered", PROMPT)
    finish("rp-altered", PROMPT, altered)
    bad = list(PROMPT)
    bad[5] = vocab
    receive("rp-bad-id", bad)
    finish("rp-bad-id", bad, true_out)
    finish("rp-text-only", None, text_out, text=TEXT)

    class CutIds:   # the id list as a logger with a limit of 10 prints it, the text kept whole
        def __str__(self):
            return sr.text_render(text_ids, 10)
    finish("rp-ids-cut", CutIds(), text_out, text=TEXT)
    receive("rp-no-output", PROMPT)   # last: the request is still open when the log ends

    tf_true = teacher_forced(model, PROMPT, true_out)
    tf_alt = teacher_forced(model, PROMPT, altered)
    tf_text = teacher_forced(model, text_ids, text_out)
    assert all(r["rank"] == 1 for r in tf_true)
    assert all(r["rank"] == vocab for r in tf_alt[P:])
    expect = {
        "generator": "tools/gen_replay_fixtures.py",
        "versions": got,
        "model": "testdata/models/qwen3",
        "vocab": vocab,
        "prompt": PROMPT,
        "requests": {
            "rp-greedy": {"verdict": "replay.consistent", "divergence": None,
                          "output_ids": true_out, "positions": tf_true},
            "rp-altered": {"verdict": "replay.divergent", "divergence": P,
                           "output_ids": altered, "positions": tf_alt,
                           "greedy_from_divergence": cont_p},
            "rp-no-output": {"verdict": "replay.no_output", "greedy_from_prompt": cont_0},
            "rp-bad-id": {"error": "input_ids[5]"},
            "rp-ids-cut": {"error": "the logger cut the input_ids list", "verdict_with_tokenizer": "replay.consistent",
                           "prompt_ids": text_ids, "output_ids": text_out},
            "rp-text-only": {"error": "no input_ids", "verdict_with_tokenizer": "replay.consistent",
                             "prompt_ids": text_ids, "output_ids": text_out, "positions": tf_text},
        },
    }
    seq = PROMPT + true_out
    names, hidden = hidden_states(model, seq, HIDDEN_POS)
    hidden_index = {
        "generator": "tools/gen_replay_fixtures.py",
        "versions": got,
        "model": "testdata/models/qwen3",
        "rid": "rp-greedy",
        "sequence": seq,
        "positions": HIDDEN_POS,
        "tokens": [seq[p] for p in HIDDEN_POS],
        "planes": names,
        "file": "hidden-rp-greedy.f32",
        "shape": list(hidden.shape),
        "dtype": "<f4",
    }

    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "hidden-rp-greedy.f32"), "wb") as fh:
        fh.write(hidden.numpy().astype("<f4").tobytes())
    with open(os.path.join(out_dir, "hidden-rp-greedy.json"), "w", encoding="utf-8") as fh:
        json.dump(hidden_index, fh, indent=1)
        fh.write("\n")
    mdir = os.path.join(out_dir, "model")
    os.makedirs(mdir, exist_ok=True)
    for name in ("config.json", "model.safetensors"):
        link = os.path.join(mdir, name)
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(os.path.join("..", "..", "..", "models", "qwen3", name), link)
    tok.save(os.path.join(mdir, "tokenizer.json"))
    with open(os.path.join(out_dir, "server.log"), "w", encoding="utf-8", newline="\n") as fh:
        fh.write("\n".join(lines) + "\n")
    with open(os.path.join(out_dir, "expect.json"), "w", encoding="utf-8") as fh:
        json.dump(expect, fh, indent=1)
        fh.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
