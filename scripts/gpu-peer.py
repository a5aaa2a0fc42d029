#!/usr/bin/env python3
"""PyTorch peer of scripts/gpu-check.ts: the same work as Hearth on the same generated weights (the HF folder
src/models/synthetic-files.ts writes), on the same machine. Not product code.

  gpu-peer.py '{"task": "infer", "model_dir": D, "device": "cuda"|"cpu", "decode_tokens": 64}'
  gpu-peer.py '{"task": "train", "model_dir": D, "device": ..., "sft_tokens": 512,
                "rl": {"groups": 2, "trajectories": 4, "promptTokens": 64, "completionTokens": 64}}'

With transformers (and peft for training) importable, the model is AutoModelForCausalLM in bf16 on CUDA
(fp32 on the CPU), decoding through generate() with the KV cache, and training LoRA r8/alpha 16 on
q,k,v,o,gate,up,down through peft; without them, torch_llama.py's plain model (no KV cache: a functional
stand-in for the CPU test, not a speed peer). "impl" in the output says which ran.

infer: load_s; prefill_512_tok_s (one 512-token forward); decode_1_tok_s and decode_8_tok_s: greedy tokens
after a 64-token prompt, from generate(N + 1 new tokens) minus generate(1 new token), with 1 and 8 prompts.
train: the SFT step over one sequence of sft_tokens tokens (next-token loss on all), and the RL step over
groups x trajectories sequences of prompt + completion tokens (a CISPO-style loss on completion tokens),
each an AdamW step with clipping at 1; the second of two steps is reported, like Hearth's.
Prints one JSON line.
"""
import json
import os
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

args = json.loads(sys.argv[1])
device = args["device"] if args["device"] == "cpu" or torch.cuda.is_available() else "cpu"
dtype = torch.bfloat16 if device != "cpu" else torch.float32
torch.manual_seed(0)

try:
    import transformers  # noqa: F401
    from transformers import AutoModelForCausalLM
    HAVE_TRANSFORMERS = True
except ImportError:
    HAVE_TRANSFORMERS = False


def sync():
    if device != "cpu":
        torch.cuda.synchronize()


def now():
    sync()
    return time.perf_counter()


def load(lora):
    """(model, impl, vocab, forward(ids) -> logits) for the folder, with LoRA adapters when asked."""
    cfg_path = os.path.join(args["model_dir"], "config.json")
    with open(cfg_path) as f:
        hf = json.load(f)
    if HAVE_TRANSFORMERS and (not lora or _have_peft()):
        # transformers 4.56+ names it dtype; older ones torch_dtype.
        key = "dtype" if tuple(int(x) for x in transformers.__version__.split(".")[:2]) >= (4, 56) else "torch_dtype"
        # On CUDA the weights load straight into GPU memory (device_map, through accelerate), not through a CPU copy.
        placement = {"device_map": device} if device != "cpu" else {}
        model = AutoModelForCausalLM.from_pretrained(args["model_dir"], **{key: dtype}, **placement)
        if not placement:
            model = model.to(device)
        impl = f"transformers {transformers.__version__} {type(model).__name__}"
        if lora:
            import peft
            from peft import LoraConfig, get_peft_model
            model = get_peft_model(model, LoraConfig(
                r=8, lora_alpha=16, lora_dropout=0.0, bias="none", task_type="CAUSAL_LM",
                target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]))
            impl += f" + peft {peft.__version__} LoRA r8"
        return model, impl, hf["vocab_size"], lambda ids: model(input_ids=ids, use_cache=False).logits
    from torch_llama import TorchLlama, config_from_hf, load_safetensors
    model = TorchLlama(config_from_hf(hf), lora=lora)
    load_safetensors(model, os.path.join(args["model_dir"], "model.safetensors"))
    model = model.to(device=device, dtype=dtype)
    impl = "plain torch (torch_llama.py" + (", LoRA r8" if lora else ", no KV cache") + "; transformers not installed)"
    return model, impl, hf["vocab_size"], lambda ids: model.logits(model.hidden(ids))


def _have_peft():
    try:
        import peft  # noqa: F401
        return True
    except ImportError:
        return False


def ids_of(rows, n, vocab, offset=0):
    g = torch.Generator().manual_seed(1234 + offset)
    return torch.randint(3, vocab - 10, (rows, n), generator=g).to(device)


def infer():
    t = now()
    model, impl, vocab, forward = load(lora=False)
    model.eval()
    out = {"impl": impl, "load_s": round(now() - t, 2)}
    with torch.no_grad():
        forward(ids_of(1, 512, vocab, 1))  # warm-up at the timed shape
        t = now()
        forward(ids_of(1, 512, vocab))
        out["prefill_512_tok_s"] = round(512 / (now() - t), 1)
        # The stand-in recomputes the whole sequence per token: a few tokens show it works.
        n = args["decode_tokens"] if HAVE_TRANSFORMERS else min(4, args["decode_tokens"])
        out["decode_tokens"] = n
        for rows in (1, 8):
            prompt = ids_of(rows, 64, vocab, rows)
            gen = lambda k: generate(model, forward, prompt, k)
            gen(2)  # warm-up
            t0 = now(); gen(1); t1 = now(); gen(n + 1); t2 = now()
            out[f"decode_{rows}_tok_s"] = round(rows * n / max(1e-9, (t2 - t1) - (t1 - t0)), 1)
    return out


def generate(model, forward, prompt, new_tokens):
    if HAVE_TRANSFORMERS:
        # Exactly new_tokens greedy tokens: min = max, no sampling, the KV cache on.
        return model.generate(input_ids=prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                              do_sample=False, num_beams=1, use_cache=True, pad_token_id=0)
    ids = prompt
    for _ in range(new_tokens):  # no cache: recompute the whole sequence each token
        ids = torch.cat([ids, forward(ids)[:, -1].argmax(-1, keepdim=True)], 1)
    return ids


def train():
    model, impl, vocab, forward = load(lora=True)
    model.train()
    trainable = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(trainable, lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)

    def step(loss_fn):
        t = now()
        opt.zero_grad(set_to_none=True)
        tokens = loss_fn()
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        opt.step()
        return tokens, now() - t

    def sft():
        ids = ids_of(1, args["sft_tokens"], vocab)
        logits = forward(ids[:, :-1]).float()
        F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1)).backward()
        return ids.shape[1]

    rl_spec = args["rl"]
    groups, trajs, p, c = rl_spec["groups"], rl_spec["trajectories"], rl_spec["promptTokens"], rl_spec["completionTokens"]

    def rl():
        # One micro-batch per group (its trajectories as rows); CISPO: -sg(clip(ratio, 0, 5)) * A * logprob.
        tokens = 0
        for g in range(groups):
            ids = ids_of(trajs, p + c, vocab, 100 + g)
            logits = forward(ids[:, :-1])[:, p - 1:].float()
            logp = torch.log_softmax(logits, -1).gather(2, ids[:, p:].unsqueeze(2)).squeeze(2)
            ratio = torch.exp(logp - (-3.0)).clamp(0, 5).detach()
            adv = torch.tensor([1.0 if t % 2 else -1.0 for t in range(trajs)], device=device).unsqueeze(1)
            (-(ratio * adv * logp).sum() / (groups * trajs * c)).backward()
            tokens += trajs * (p + c)
        return tokens

    out = {"impl": impl}
    for name, fn in (("sft", sft), ("rl", rl)):
        step(fn)  # warm-up step
        tokens, seconds = step(fn)
        out[name] = {"tokens": tokens, "tokens_per_second": round(tokens / seconds, 1), "step_s": round(seconds, 3)}
    return out


result = infer() if args["task"] == "infer" else train()
result.update({
    "torch": torch.__version__, "device": device, "dtype": str(dtype).replace("torch.", ""),
    "gpu": torch.cuda.get_device_name(0) if device != "cpu" else None,
    "peak_gpu_mem_mib": round(torch.cuda.max_memory_allocated() / 2**20) if device != "cpu" else None,
    "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
})
print(json.dumps(result))
