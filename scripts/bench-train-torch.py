#!/usr/bin/env python3
"""PyTorch peer of scripts/bench-train.ts: the same Llama-family decoder, shapes, optimizer and
threads, so that the two can be compared in one run. Not product code: the model is torch_llama.py's.

Usage: bench-train-torch.py '<json>' with keys
  config   the ModelConfig fields bench-train.ts uses (vocabSize, hiddenSize, ...)
  phase    "sft_full" | "sft_lora" | "rl_step"
  steps    measured optimizer steps (one warm-up step runs first, not counted)
  rows, length   sequences per micro-batch and tokens per sequence (SFT)
  threads  torch.set_num_threads
Prints one JSON object: tokens_per_second, seconds_per_step, peak_rss_mb, torch version.

Same as Hearth: fp32, weights normal(0, 0.02), AdamW (betas 0.9/0.999, eps 1e-8, no weight decay),
global-norm clipping at 1, LoRA rank 8 / alpha 16 on q,k,v,o,gate,up,down with the base frozen
(embedding and head included), logits only at trained positions, RL = one optimizer step over
8 micro-batches of 4 x 127 tokens with a CISPO loss.
"""
import json
import resource
import sys
import time

import torch
import torch.nn.functional as F

from torch_llama import TorchLlama

args = json.loads(sys.argv[1])
cfg = args["config"]
torch.set_num_threads(int(args["threads"]))
torch.manual_seed(0)

V, D = cfg["vocabSize"], cfg["hiddenSize"]
LORA = args["phase"] in ("sft_lora", "rl_step")

model = TorchLlama(cfg, lora=LORA)
trainable = [p for p in model.parameters() if p.requires_grad]
opt = torch.optim.AdamW(trainable, lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
gen = torch.Generator().manual_seed(42)


def rand_ids(rows, length):
    return torch.randint(3, V, (rows, length), generator=gen)


def sft_step():
    rows, length = args["rows"], args["length"]
    ids = rand_ids(rows, length + 1)
    h = model.hidden(ids[:, :-1])
    loss = F.cross_entropy(model.logits(h.reshape(-1, D)), ids[:, 1:].reshape(-1))
    loss.backward()
    return rows * length


def rl_step():
    # 8 micro-batches of 4 trajectories x 128 ids (64 prompt + 64 completion): 127 positions each,
    # logprobs only at the 64 completion targets; CISPO: -sg(clip(ratio, 0, 5)) * A * logprob.
    tokens = 0
    for _ in range(8):
        ids = rand_ids(4, 128)
        h = model.hidden(ids[:, :-1])[:, 63:]  # positions 63..126 predict ids 64..127
        logp = torch.log_softmax(model.logits(h.reshape(-1, D)), -1).gather(1, ids[:, 64:].reshape(-1, 1)).squeeze(1)
        old = torch.full_like(logp, -3.0)
        ratio = torch.exp(logp - old).clamp(0, 5).detach()
        adv = torch.tensor([1.0, -1.0, 0.5, -0.5]).repeat_interleave(64)
        loss = -(ratio * adv * logp).sum() / (32 * 64)
        loss.backward()
        tokens += 4 * 127
    return tokens


step = rl_step if args["phase"] == "rl_step" else sft_step
times, tokens = [], 0
for i in range(args["steps"] + 1):
    t0 = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    n = step()
    torch.nn.utils.clip_grad_norm_(trainable, 1.0)
    opt.step()
    if i > 0:
        times.append(time.perf_counter() - t0)
        tokens += n
print(json.dumps({
    "tokens_per_second": round(tokens / sum(times), 1),
    "seconds_per_step": round(sum(times) / len(times), 3),
    "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    "torch": torch.__version__,
    "threads": torch.get_num_threads(),
}))
