#!/usr/bin/env python3
"""PyTorch peer of scripts/bench-train.ts: the same Llama-family decoder, shapes, optimizer and
threads, so that the two can be compared in one run. Not product code: the model is torch_llama.py's.

Usage: bench-train-torch.py '<json>' with keys
  config   the ModelConfig fields bench-train.ts uses (vocabSize, hiddenSize, ...)
  phase    "sft_full" | "sft_lora" | "rl_step"
  steps    measured optimizer steps (one warm-up step runs first, not counted, unless warmup is false)
  rows, length   sequences per micro-batch and tokens per sequence (SFT)
  threads  torch.set_num_threads
  dtype    (optional) "float32" (default) or "bfloat16": every parameter and activation in it
  weights_cmd  (optional) argv of a command whose stdout streams the base (bench-train.ts --dump-weights: per
           tensor a JSON line {name, shape, bytes} then its float32 bytes, Hugging Face names and layout): the
           model is built without initializing (meta device), filled from the stream chunk by chunk (never a
           float32 copy of the whole base), and its LoRA adapters initialized after. Without it: random weights.
  max_projected_seconds  (optional, with weights_cmd) skip, before loading, when the base does not fit in
           MemAvailable or a GEMM probe in `dtype` projects the step past this many seconds
Prints one JSON object: tokens_per_second, seconds_per_step, peak_rss_mb, torch version; or {"skipped": reason}.

Same as Hearth: fp32 (the 8B phase: bf16, its base streamed from Hearth), weights normal(0, 0.02), AdamW (betas 0.9/0.999, eps 1e-8, no weight decay),
global-norm clipping at 1, LoRA rank 8 / alpha 16 on q,k,v,o,gate,up,down with the base frozen
(embedding and head included), logits only at trained positions, RL = one optimizer step over
8 micro-batches of 4 x 127 tokens with a CISPO loss.
"""
import json
import resource
import subprocess
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

DTYPE = getattr(torch, args.get("dtype", "float32"))
T0 = time.perf_counter()


def skip(reason):
    print(json.dumps({"skipped": reason, "torch": torch.__version__}))
    sys.exit(0)


def mem_available():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return None


def matmul_parameters(c):
    """Parameters that take part in a product per token: the layers' seven projections and the LM head."""
    D, FFN, HD = c["hiddenSize"], c["intermediateSize"], c["headDim"]
    attn = D * c["numHeads"] * HD * 2 + D * c["numKvHeads"] * HD * 2
    return c["numLayers"] * (attn + 3 * D * FFN) + c["vocabSize"] * D


def preflight():
    """Whether the base fits in memory in DTYPE and a step is projected to finish in time (else skip with why)."""
    D, V = cfg["hiddenSize"], cfg["vocabSize"]
    stored = matmul_parameters(cfg) + (0 if cfg["tieWordEmbeddings"] else V * D)
    # + activations, logits, optimizer, and the streaming process's one float32 tensor (the embedding: 2.1 GB at 8B)
    need = stored * torch.finfo(DTYPE).bits // 8 + 2 * 2**30 + V * D * 4
    avail = mem_available()
    if avail is not None and need > avail:
        skip(f"the {DTYPE} base and its activations need ~{need / 2**30:.1f} GiB, {avail / 2**30:.1f} GiB available")
    a = torch.randn(args["rows"] * args["length"], D).to(DTYPE)
    w = torch.randn(cfg["intermediateSize"], D).to(DTYPE)
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        F.linear(a, w)
        best = min(best, time.perf_counter() - t)
    rate = 2 * a.shape[0] * D * w.shape[0] / best
    # forward + the input gradient of every frozen product (the LoRA base has no weight gradient)
    projected = 4 * matmul_parameters(cfg) * args["rows"] * args["length"] / rate
    if projected > args.get("max_projected_seconds", float("inf")):
        skip(f"a {DTYPE} GEMM probe ran {rate / 1e9:.1f} GFLOP/s: one step projects to {projected / 60:.0f} min")
    return round(rate / 1e9, 1), round(projected)


def stream_weights(model, argv):
    """Fill the model from argv's stdout (bench-train.ts --dump-weights), 64 MB at a time."""
    from torch_llama import _hf_to_local
    params = dict(model.named_parameters())
    chunk = bytearray(64 << 20)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE)
    f = proc.stdout
    while True:
        head = json.loads(f.readline())
        if head.get("end"):
            break
        flat = params[_hf_to_local(head["name"])].data.view(-1)
        if head["bytes"] != flat.numel() * 4:
            raise ValueError(f"{head['name']}: {head['bytes']} bytes for {flat.numel()} values")
        done = 0
        while done < head["bytes"]:
            k = min(len(chunk), head["bytes"] - done)
            view = memoryview(chunk)[:k]
            got = 0
            while got < k:
                n = f.readinto(view[got:])
                if not n:
                    raise EOFError(f"the weight stream ended inside {head['name']}")
                got += n
            flat[done // 4:(done + k) // 4].copy_(torch.frombuffer(chunk, dtype=torch.float32, count=k // 4))
            done += k
    if proc.wait() != 0:
        raise RuntimeError(f"{argv} exited with {proc.returncode}")


probe = None
if args.get("weights_cmd"):
    probe = preflight()
    model = TorchLlama(cfg, lora=LORA, device="meta", dtype=DTYPE).to_empty(device="cpu")
    with torch.no_grad():
        stream_weights(model, args["weights_cmd"])
    model.reset_lora()
else:
    model = TorchLlama(cfg, lora=LORA, dtype=DTYPE)
LOAD_SECONDS = time.perf_counter() - T0
trainable = [p for p in model.parameters() if p.requires_grad]
opt = torch.optim.AdamW(trainable, lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
gen = torch.Generator().manual_seed(42)


def rand_ids(rows, length):
    return torch.randint(3, V, (rows, length), generator=gen)


def sft_step():
    rows, length = args["rows"], args["length"]
    ids = rand_ids(rows, length + 1)
    h = model.hidden(ids[:, :-1])
    loss = F.cross_entropy(model.logits(h.reshape(-1, D)).float(), ids[:, 1:].reshape(-1))
    loss.backward()
    return rows * length


def rl_step():
    # 8 micro-batches of 4 trajectories x 128 ids (64 prompt + 64 completion): 127 positions each,
    # logprobs only at the 64 completion targets; CISPO: -sg(clip(ratio, 0, 5)) * A * logprob.
    tokens = 0
    for _ in range(8):
        ids = rand_ids(4, 128)
        h = model.hidden(ids[:, :-1])[:, 63:]  # positions 63..126 predict ids 64..127
        logp = torch.log_softmax(model.logits(h.reshape(-1, D)).float(), -1).gather(1, ids[:, 64:].reshape(-1, 1)).squeeze(1)
        old = torch.full_like(logp, -3.0)
        ratio = torch.exp(logp - old).clamp(0, 5).detach()
        adv = torch.tensor([1.0, -1.0, 0.5, -0.5]).repeat_interleave(64)
        loss = -(ratio * adv * logp).sum() / (32 * 64)
        loss.backward()
        tokens += 4 * 127
    return tokens


step = rl_step if args["phase"] == "rl_step" else sft_step
times, tokens = [], 0
WARMUP = 1 if args.get("warmup", True) else 0
for i in range(args["steps"] + WARMUP):
    t0 = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    n = step()
    torch.nn.utils.clip_grad_norm_(trainable, 1.0)
    opt.step()
    if i >= WARMUP:
        times.append(time.perf_counter() - t0)
        tokens += n
print(json.dumps({
    "tokens_per_second": round(tokens / sum(times), 1),
    "seconds_per_step": round(sum(times) / len(times), 3),
    "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    "torch": torch.__version__,
    "threads": torch.get_num_threads(),
    "dtype": str(DTYPE).replace("torch.", ""),
    **({"load_seconds": round(LOAD_SECONDS, 1), "gemm_probe_gflops": probe[0], "projected_step_seconds": probe[1]} if probe else {}),
}))
