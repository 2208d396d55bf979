"""The engine's own Qwen3 forward: a static per-slot KV cache over the weights of a stock HF checkpoint.

One call runs any number of slots, each appending its own number of new positions after its own cached
length: a prompt or a chunk of one (prefill), one token per slot (a batched decode step), or both at once. At batch 1 a decode step is
mostly per-op overhead and weight reads, so the forward packs each layer's projections into fewer matrices
(q|k|v and gate|up, as vLLM does), uses fused RMSNorm and a precomputed rotary table, and may keep the
output head, the largest matrix by far, in int8 (`int8_head`). The math is the checkpoint's own.

Every row attends to its own slot's cache and the int8 head's products are exact integers, so those never
depend on the batch. With `batch_invariant` each slot's projections run on their own too (`per_slot`): then a
seeded request samples the same codes under any load, at 1.5-2x the decode step's cost for 16 rows on an fp32
CPU (a matrix product's kernel, and with it a row's last bits, depends on how many rows it multiplies).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import partial

import torch
import torch.nn.functional as F
from transformers import Qwen3ForCausalLM


class Int8Head:
    """The output head (vocab x hidden: 3.5x the weights of all layers here) in int8: per-channel symmetric
    weights, each input row quantized with its own scale, an exact int32 product (torch._int_mm), fp32 out.
    Integer sums do not depend on the kernel's order, so a row's logits never depend on the rows beside it.
    Quantizing the layers too costs NLL (their activations have outliers); the head alone does not
    (docs/results/bench.md)."""

    def __init__(self, weight: torch.Tensor):
        weight = weight.detach().float()  # (V, H)
        self.scale = weight.abs().amax(dim=1).clamp_min(1e-12) / 127  # (V,)
        self.weight_t = torch.round(weight / self.scale[:, None]).to(torch.int8).t()  # (H, V)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """x (..., H) -> (..., V) fp32 logits."""
        rows = x.float().reshape(-1, x.shape[-1])  # (N, H)
        scale = rows.abs().amax(dim=1, keepdim=True).clamp_min(1e-12) / 127  # (N, 1)
        product = torch._int_mm(torch.round(rows / scale).to(torch.int8), self.weight_t)  # (N, V) int32
        return (product.float() * scale * self.scale).view(*x.shape[:-1], -1)


@dataclass
class PackedLayer:
    """One decoder layer's weights, projections that read the same input concatenated."""

    input_norm: torch.Tensor  # (H,)
    qkv: torch.Tensor  # ((heads + 2 kv_heads) * D, H)
    qk_norm: torch.Tensor  # (heads + kv_heads, D): q_norm's weight for each query head, then k_norm's
    o: torch.Tensor  # (H, heads * D)
    post_norm: torch.Tensor  # (H,)
    gate_up: torch.Tensor  # (2 I, H)
    down: torch.Tensor  # (H, I)

    @classmethod
    def of(cls, layer) -> "PackedLayer":
        a, mlp = layer.self_attn, layer.mlp
        heads, kv_heads = a.config.num_attention_heads, a.config.num_key_value_heads
        qk_norm = torch.cat([a.q_norm.weight.expand(heads, -1), a.k_norm.weight.expand(kv_heads, -1)])
        return cls(layer.input_layernorm.weight, torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight]),
                   qk_norm, a.o_proj.weight, layer.post_attention_layernorm.weight,
                   torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight]), mlp.down_proj.weight)


class CachedLM:
    @torch.no_grad()
    def __init__(self, hf: Qwen3ForCausalLM, slots: int, max_len: int, int8_head: bool = False,
                 batch_invariant: bool = False):
        cfg = hf.config
        dtype = hf.model.embed_tokens.weight.dtype
        device = hf.model.embed_tokens.weight.device
        self.hf, self.max_len, self.eps, self.device = hf, max_len, cfg.rms_norm_eps, device
        self.batch_invariant = batch_invariant
        self.heads, self.kv_heads, self.head_dim = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        self.layers = [PackedLayer.of(layer) for layer in hf.model.layers]
        self.head = Int8Head(hf.lm_head.weight) if int8_head else None
        cos, sin = hf.model.rotary_emb(torch.zeros(1, dtype=dtype, device=device),
                                       torch.arange(max_len, device=device)[None])
        self.cos, self.sin = cos[0], sin[0]  # (max_len, D)
        self.kv = torch.zeros(cfg.num_hidden_layers, slots, 2 * self.kv_heads, max_len, self.head_dim, dtype=dtype,
                              device=device)  # per layer and slot: the keys' heads, then the values'
        self.lengths = torch.zeros(slots, dtype=torch.long, device=device)

    @torch.inference_mode()
    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self.hf.model.embed_tokens(ids)

    def reset(self, slot: int) -> None:
        """Forget a slot's past (its cache rows are overwritten by the next prefill)."""
        self.lengths[slot] = 0

    def forward(self, x: torch.Tensor, slots: torch.Tensor) -> torch.Tensor:
        """x (B, T, H) input embeddings appended to slots (B,) -> (B, T, H) final hidden states."""
        batch, new, hidden = x.shape
        return self.forward_ragged(x.reshape(batch * new, hidden), slots, [new] * batch).view(batch, new, hidden)

    @torch.inference_mode()
    def forward_ragged(self, x: torch.Tensor, slots: torch.Tensor, counts: list[int]) -> torch.Tensor:
        """x (N, H) input embeddings, counts[b] new positions for slot b one after the other (sum N; e.g. one
        token for each decoding slot and a prompt chunk for another, in one pass over the weights) -> (N, H)
        final hidden states. Each row attends to its own slot's cache through a view (no gather, no padding
        to the longest row); with `batch_invariant` each slot's positions are multiplied on their own
        (`per_slot`), so their bits never depend on the other slots'."""
        tokens, hidden = x.shape
        starts, sizes = self.lengths[slots], torch.tensor(counts, device=x.device)  # (B,), (B,)
        ends = starts + sizes
        if int(ends.max()) > self.max_len:
            raise ValueError(f"sequence longer than the engine's {self.max_len} positions")
        rows = list(zip(slots.tolist(), starts.tolist(), counts))
        firsts = sizes.cumsum(0) - sizes  # (B,) each slot's first row in x
        positions = torch.repeat_interleave(starts - firsts, sizes) + torch.arange(tokens, device=x.device)  # (N,)
        cos, sin = self.cos[positions][:, None], self.sin[positions][:, None]  # (N, 1, D)
        linear = partial(per_slot, counts=counts) if self.batch_invariant and len(counts) > 1 else F.linear
        d, heads, kv_heads = self.head_dim, self.heads, self.kv_heads
        h = x
        for i, w in enumerate(self.layers):
            qkv = linear(F.rms_norm(h, (hidden,), w.input_norm, self.eps), w.qkv).view(tokens, -1, d)
            qk = F.rms_norm(qkv[:, : heads + kv_heads], (d,), eps=self.eps) * w.qk_norm  # (N, heads + kv, D)
            qk = qk * cos + rotate_half(qk) * sin
            fresh = torch.cat([qk[:, heads:], qkv[:, heads + kv_heads:]], dim=1).transpose(0, 1)  # (2kv, N, D)
            queries = qk[:, :heads].transpose(0, 1)  # (heads, N, D)
            outs, offset = [], 0
            for slot, past, n in rows:
                outs.append(self._attend(i, slot, past, queries[None, :, offset: offset + n],
                                         fresh[:, offset: offset + n]))
                offset += n
            out = outs[0] if len(outs) == 1 else torch.cat(outs, dim=2)  # (1, heads, N, D)
            h = h + linear(out[0].transpose(0, 1).reshape(tokens, -1), w.o)
            gate, up = linear(F.rms_norm(h, (hidden,), w.post_norm, self.eps), w.gate_up).chunk(2, dim=-1)
            h = h + linear(F.silu(gate) * up, w.down)
        self.lengths[slots] = ends
        return F.rms_norm(h, (hidden,), self.hf.model.norm.weight, self.eps)

    def _attend(self, layer: int, slot: int, past: int, query: torch.Tensor, fresh: torch.Tensor) -> torch.Tensor:
        """Write one slot's new keys and values, fresh (2 kv_heads, T, D), after its `past` cached positions;
        attend with query (1, heads, T, D) to all of them, causally -> (1, heads, T, D)."""
        new, device = query.shape[2], query.device
        cache = self.kv[layer, slot, :, : past + new]  # (2 kv_heads, S, D): a view
        cache[:, past:] = fresh
        mask = None if new == 1 else (  # (T, S): the new positions see the past and each other causally
            torch.arange(past + new, device=device)[None] <= past + torch.arange(new, device=device)[:, None])
        return F.scaled_dot_product_attention(query, cache[None, : self.kv_heads], cache[None, self.kv_heads:],
                                              attn_mask=mask, enable_gqa=self.heads != self.kv_heads)  # scale D^-0.5

    @torch.inference_mode()
    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """(B, ..., H) final hidden states -> (B, ..., V) logits (fp32 from the int8 head), each b as it would
        be alone when the head is int8 or `batch_invariant`."""
        if self.head is not None:
            return self.head(hidden)
        return (rowwise if self.batch_invariant and len(hidden) > 1 else F.linear)(hidden, self.hf.lm_head.weight)


def rowwise(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """F.linear(x, weight) for x (..., K), computed for each row on its own (a batched product of single-row
    products), so that a row's bits never depend on the other rows."""
    rows = x.reshape(-1, 1, x.shape[-1])  # (N, 1, K)
    out = torch.bmm(rows, weight.t().expand(len(rows), -1, -1))  # (N, 1, M)
    return out.view(*x.shape[:-1], weight.shape[0])


def per_slot(x: torch.Tensor, weight: torch.Tensor, counts: list[int]) -> torch.Tensor:
    """F.linear(x, weight) for x (N, K) holding counts[b] positions of slot b one after the other, each slot's
    positions multiplied on their own (a prompt chunk in one product, as it would be alone; neighbouring
    one-position slots in one `rowwise` product), so that no slot's bits depend on the others."""
    out, start = [], 0
    for single, group in itertools.groupby(counts, key=lambda n: n == 1):
        sizes = list(group)
        for n in [len(sizes)] if single else sizes:
            out.append((rowwise if single else F.linear)(x[start: start + n], weight))
            start += n
    return torch.cat(out)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)
