"""A plain-PyTorch Llama-family decoder (Llama, Qwen2 with q/k/v biases, tied or untied head) with optional
LoRA on q,k,v,o,gate,up,down: the model of scripts/bench-train-torch.py, and gpu-peer.py's stand-in where
transformers is not installed. Not product code.

  model = TorchLlama(cfg, lora=True)          # cfg: the ModelConfig fields of bench-train.ts (vocabSize, ...)
  model = TorchLlama(cfg, lora=True, device="meta", dtype=torch.bfloat16).to_empty(device="cpu")  # no init (load next)
  load_safetensors(model, "dir/model.safetensors")   # Hugging Face names (a generator's HF folder)
  logits = model.logits(model.hidden(ids))
"""
import json
import math

import torch
import torch.nn.functional as F

RANK, ALPHA = 8, 16


def config_from_hf(hf):
    """The ModelConfig fields this model reads, from a Hugging Face config.json."""
    heads = hf["num_attention_heads"]
    return {
        "vocabSize": hf["vocab_size"], "hiddenSize": hf["hidden_size"], "intermediateSize": hf["intermediate_size"],
        "numLayers": hf["num_hidden_layers"], "numHeads": heads, "numKvHeads": hf.get("num_key_value_heads", heads),
        "headDim": hf.get("head_dim") or hf["hidden_size"] // heads, "rmsNormEps": hf["rms_norm_eps"],
        "ropeTheta": hf.get("rope_theta", 10000.0), "tieWordEmbeddings": hf.get("tie_word_embeddings", False),
        "attentionBias": hf.get("attention_bias", False) or hf.get("model_type") == "qwen2",
    }


class Linear(torch.nn.Module):
    def __init__(self, inp, out, bias, lora, std=0.02, **factory):
        super().__init__()
        self.lora = lora
        self.weight = torch.nn.Parameter(torch.randn(out, inp, **factory) * std, requires_grad=not lora)
        self.bias = torch.nn.Parameter(torch.zeros(out, **factory), requires_grad=not lora) if bias else None
        if lora:
            self.lora_a = torch.nn.Parameter(torch.empty(RANK, inp, **factory))
            self.lora_b = torch.nn.Parameter(torch.empty(out, RANK, **factory))
            self.reset_lora()

    def reset_lora(self):
        """PEFT's init: A kaiming-uniform-like, B zero."""
        with torch.no_grad():
            bound = 1 / math.sqrt(self.lora_a.shape[1])
            self.lora_a.uniform_(-bound, bound)
            self.lora_b.zero_()

    def forward(self, x):
        y = F.linear(x, self.weight, self.bias)
        if self.lora:
            y = y + (ALPHA / RANK) * F.linear(F.linear(x, self.lora_a), self.lora_b)
        return y


class Block(torch.nn.Module):
    def __init__(self, c, lora, **factory):
        super().__init__()
        D, FFN, H, KV, HD, bias = c["hiddenSize"], c["intermediateSize"], c["numHeads"], c["numKvHeads"], c["headDim"], c["attentionBias"]
        self.c = c
        out_std = 0.02 / math.sqrt(2 * c["numLayers"])
        f = factory
        self.ln1 = torch.nn.Parameter(torch.ones(D, **f), requires_grad=not lora)
        self.ln2 = torch.nn.Parameter(torch.ones(D, **f), requires_grad=not lora)
        self.q, self.k, self.v = Linear(D, H * HD, bias, lora, **f), Linear(D, KV * HD, bias, lora, **f), Linear(D, KV * HD, bias, lora, **f)
        self.o = Linear(H * HD, D, False, lora, std=out_std, **f)
        self.gate, self.up, self.down = Linear(D, FFN, False, lora, **f), Linear(D, FFN, False, lora, **f), Linear(FFN, D, False, lora, std=out_std, **f)

    def forward(self, x, cos, sin, mask):
        c = self.c
        H, KV, HD, EPS = c["numHeads"], c["numKvHeads"], c["headDim"], c["rmsNormEps"]
        B, T, _ = x.shape
        h = rms_norm(x, self.ln1, EPS)
        q = self.q(h).view(B, T, H, HD).transpose(1, 2)
        k = self.k(h).view(B, T, KV, HD).transpose(1, 2)
        v = self.v(h).view(B, T, KV, HD).transpose(1, 2)
        rot = lambda t: torch.cat((-t[..., HD // 2:], t[..., : HD // 2]), -1)
        q, k = q * cos + rot(q) * sin, k * cos + rot(k) * sin
        k, v = k.repeat_interleave(H // KV, 1), v.repeat_interleave(H // KV, 1)
        att = torch.softmax((q @ k.transpose(-1, -2)) / math.sqrt(HD) + mask, -1)
        x = x + self.o((att @ v).transpose(1, 2).reshape(B, T, H * HD))
        h = rms_norm(x, self.ln2, EPS)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


class TorchLlama(torch.nn.Module):
    def __init__(self, c, lora=False, device=None, dtype=None):
        """device="meta" builds without allocating or initializing (then .to_empty(device="cpu"), load, reset_lora)."""
        super().__init__()
        self.c = c
        f = {"device": device, "dtype": dtype}
        V, D = c["vocabSize"], c["hiddenSize"]
        self.embed = torch.nn.Parameter(torch.randn(V, D, **f) * 0.02, requires_grad=not lora)
        self.blocks = torch.nn.ModuleList(Block(c, lora, **f) for _ in range(c["numLayers"]))
        self.norm = torch.nn.Parameter(torch.ones(D, **f), requires_grad=not lora)
        self.head = None if c["tieWordEmbeddings"] else torch.nn.Parameter(torch.randn(V, D, **f) * 0.02, requires_grad=not lora)

    def reset_lora(self):
        for m in self.modules():
            if isinstance(m, Linear) and m.lora:
                m.reset_lora()

    def hidden(self, ids):
        c = self.c
        T, HD = ids.shape[1], c["headDim"]
        dev = ids.device
        inv = 1.0 / (c["ropeTheta"] ** (torch.arange(0, HD, 2, device=dev).float() / HD))
        freqs = torch.outer(torch.arange(T, device=dev).float(), inv)
        emb = torch.cat((freqs, freqs), -1)
        dtype = self.embed.dtype
        cos, sin = emb.cos().to(dtype), emb.sin().to(dtype)
        mask = torch.full((T, T), -1e9, device=dev).triu(1).to(dtype)
        x = self.embed[ids]
        for b in self.blocks:
            x = b(x, cos, sin, mask)
        return rms_norm(x, self.norm, c["rmsNormEps"])

    def logits(self, h):
        return h @ (self.embed if self.head is None else self.head).t()


def _hf_to_local(name):
    """A Hugging Face tensor name → this model's parameter name."""
    if name == "model.embed_tokens.weight":
        return "embed"
    if name == "model.norm.weight":
        return "norm"
    if name == "lm_head.weight":
        return "head"
    parts = name.split(".")  # model.layers.{i}.{self_attn|mlp}.{x}_proj.{weight|bias} or model.layers.{i}.{x}_layernorm.weight
    i, leaf = parts[2], parts[3:]
    if leaf[0] == "input_layernorm":
        return f"blocks.{i}.ln1"
    if leaf[0] == "post_attention_layernorm":
        return f"blocks.{i}.ln2"
    short = {"q_proj": "q", "k_proj": "k", "v_proj": "v", "o_proj": "o", "gate_proj": "gate", "up_proj": "up", "down_proj": "down"}[leaf[1]]
    return f"blocks.{i}.{short}.{leaf[2]}"


DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}
DTYPE_BYTES = {"F32": 4, "F16": 2, "BF16": 2}


def read_safetensors(path):
    """{name: tensor} of a safetensors file, without the safetensors package (Debian's python3-torch has none)."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(n))
        data = bytearray(f.read())
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        t = torch.frombuffer(data, dtype=DTYPES[e["dtype"]], count=(end - b) // DTYPE_BYTES[e["dtype"]], offset=b) if end > b else torch.empty(0)
        out[name] = t.reshape(e["shape"])
    return out


def load_safetensors(model, path):
    params = dict(model.named_parameters())
    for name, t in read_safetensors(path).items():
        p = params[_hf_to_local(name)]
        with torch.no_grad():
            p.copy_(t.to(p.dtype))
