"""The engine's own Qwen3 forward: a static per-slot KV cache over the weights of a stock HF checkpoint.

One call runs any number of slots, each appending T new positions after its own cached length: a prompt
(prefill, T = prompt length) or one token per slot (a batched decode step). No weights are copied.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from transformers import Qwen3ForCausalLM


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


class CachedLM:
    def __init__(self, hf: Qwen3ForCausalLM, slots: int, max_len: int):
        cfg = hf.config
        self.hf, self.max_len = hf, max_len
        self.kv_heads, self.head_dim = cfg.num_key_value_heads, cfg.head_dim
        self.groups = cfg.num_attention_heads // cfg.num_key_value_heads  # query heads per KV head (GQA)
        dtype = hf.model.embed_tokens.weight.dtype
        device = hf.model.embed_tokens.weight.device
        shape = (cfg.num_hidden_layers, slots, self.kv_heads, max_len, self.head_dim)
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)
        self.lengths = torch.zeros(slots, dtype=torch.long, device=device)

    @torch.inference_mode()
    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self.hf.model.embed_tokens(ids)

    def reset(self, slot: int) -> None:
        """Forget a slot's past (its cache rows are overwritten by the next prefill)."""
        self.lengths[slot] = 0

    @torch.inference_mode()
    def forward(self, x: torch.Tensor, slots: torch.Tensor) -> torch.Tensor:
        """x (B, T, H) input embeddings appended to slots (B,) -> (B, T, H) final hidden states."""
        batch, new, _ = x.shape
        start = self.lengths[slots]  # (B,)
        if int(start.max()) + new > self.max_len:
            raise ValueError(f"sequence longer than the engine's {self.max_len} positions")
        positions = start[:, None] + torch.arange(new, device=x.device)  # (B, T)
        span = int(start.max()) + new
        keys = torch.arange(span, device=x.device)
        mask = keys[None, None, :] <= positions[:, :, None]  # (B, T, S): causal, and only this slot's past
        cos, sin = self.hf.model.rotary_emb(x, positions)
        cos, sin = cos[:, None], sin[:, None]
        slot_idx = slots[:, None].expand(batch, new)
        h = x
        for i, layer in enumerate(self.hf.model.layers):
            attn = layer.self_attn
            a = layer.input_layernorm(h)
            q = attn.q_norm(attn.q_proj(a).view(batch, new, -1, self.head_dim)).transpose(1, 2)
            k = attn.k_norm(attn.k_proj(a).view(batch, new, -1, self.head_dim)).transpose(1, 2)
            v = attn.v_proj(a).view(batch, new, -1, self.head_dim).transpose(1, 2)
            q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
            self.k[i][slot_idx, :, positions] = k.transpose(1, 2).to(self.k.dtype)
            self.v[i][slot_idx, :, positions] = v.transpose(1, 2).to(self.v.dtype)
            keys_i, values_i = self.k[i][slots, :, :span], self.v[i][slots, :, :span]  # (B, kv_heads, S, D)
            out = F.scaled_dot_product_attention(q, keys_i.to(q.dtype), values_i.to(q.dtype), attn_mask=mask[:, None],
                                                 scale=attn.scaling, enable_gqa=self.groups > 1)
            h = h + attn.o_proj(out.transpose(1, 2).reshape(batch, new, -1))
            h = h + layer.mlp(layer.post_attention_layernorm(h))
        self.lengths[slots] = start + new
        return self.hf.model.norm(h)

    @torch.inference_mode()
    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.hf.lm_head(hidden)
