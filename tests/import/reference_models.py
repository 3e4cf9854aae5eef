"""PyTorch references for the architectures that transformers 4.40 lacks,
written from their published modeling code (read, not copied) so that
tfenc-import's maps of them can be checked on random weights:

- NomicBERT: nomic-ai/contrastors, models/huggingface/modeling_hf_nomic_bert.py
  (NomicBertModel with prenorm = False, rotary positions, SwiGLU);
- ModernBERT: transformers 4.48 modeling_modernbert.py (eager attention),
  and its ModernBertForSequenceClassification (pooling, ModernBertPredictionHead,
  classifier);
- JinaBERT v2: jinaai/jina-bert-implementation (ALiBi, GEGLU MLP with its
  own residual and LayerNorm);
- Qwen3: transformers 4.51 modeling_qwen3.py (Qwen3Model, eager attention):
  Qwen2 with RMSNorm over head_dim on each head of Q and K before RoPE;
- Gemma3 text as EmbeddingGemma runs it: transformers 4.56
  modeling_gemma3.py (Gemma3TextModel, use_bidirectional_attention = true);
- GTE v1.5 and mGTE (model_type new): Alibaba-NLP/new-impl modeling.py
  (NewModel, eager attention; tests/import/gte.py describes it).

Module names follow each checkpoint's tensor names, so that state_dict()
is what the published code saves. Each forward takes one unpadded
sequence of ids [1, L] and returns its hidden states [1, L, d]; ModernBERT
also takes padded batches [B, L] with their attention mask, as its
classifier is checked on both."""
import math

import torch
import torch.nn.functional as F
from torch import nn


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rotate_pairs(x):
    """rotate_half's interleaved form: dims 2i and 2i + 1 turn together."""
    return torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1).flatten(-2)


def rotary(x, base, rotary_dims, interleaved=False):
    """x [1, heads, L, head_dim]: the first rotary_dims of each head turned
    by position (GPT-NeoX pairs i, i + rotary_dims / 2; interleaved,
    flash-attention's rotary.py with interleaved = True: GPT-J pairs 2i,
    2i + 1), in float32 as both published codes compute it."""
    length = x.shape[2]
    inverse = 1.0 / (base ** (torch.arange(0, rotary_dims, 2, dtype=torch.int64).float()
                              / rotary_dims))
    angles = torch.outer(torch.arange(length, dtype=torch.float32), inverse)
    if interleaved:
        cos, sin = angles.cos().repeat_interleave(2, -1), angles.sin().repeat_interleave(2, -1)
    else:
        cos = torch.cat((angles.cos(), angles.cos()), dim=-1)
        sin = torch.cat((angles.sin(), angles.sin()), dim=-1)
    turned, rest = x[..., :rotary_dims], x[..., rotary_dims:]
    rotated = rotate_pairs(turned) if interleaved else rotate_half(turned)
    return torch.cat((turned * cos + rotated * sin, rest), dim=-1)


def split_heads(x, heads):
    batch, length, width = x.shape
    return x.view(batch, length, heads, width // heads).transpose(1, 2)


def attend(q, k, v, bias=None, scale=None):
    """q, k, v [1, heads, L, head_dim] -> [1, L, heads * head_dim]; scores
    scaled by `scale`, default 1 / sqrt(head_dim)."""
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = (q @ k.transpose(-1, -2)) * scale
    if bias is not None:
        scores = scores + bias
    context = scores.softmax(dim=-1) @ v
    return context.transpose(1, 2).reshape(q.shape[0], q.shape[2], -1)


def rotary_self_attention(qkv, heads, base, interleaved=False):
    """qkv [1, L, 3 d], a fused projection's Q, K, V of every head in turn
    -> the context [1, L, d], Q and K turned by RoPE over whole heads."""
    q, k, v = qkv.chunk(3, dim=-1)
    head_dim = q.shape[-1] // heads
    q = rotary(split_heads(q, heads), base, head_dim, interleaved)
    k = rotary(split_heads(k, heads), base, head_dim, interleaved)
    return attend(q, k, split_heads(v, heads))


class Holder(nn.Module):
    """A named container, so that state_dict() keys read like the checkpoint's."""


def bert_embeddings(c):
    """BERT's embeddings without a position table (JinaBERT's, GTE's):
    word_embeddings, token_type_embeddings when type_vocab_size > 0, LayerNorm."""
    d = c["hidden_size"]
    embeddings = Holder()
    embeddings.word_embeddings = nn.Embedding(c["vocab_size"], d)
    if c["type_vocab_size"] > 0:
        embeddings.token_type_embeddings = nn.Embedding(c["type_vocab_size"], d)
    embeddings.LayerNorm = nn.LayerNorm(d, eps=c["layer_norm_eps"])
    return embeddings


# ---------------------------------------------------------------- NomicBERT

class NomicBert(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        d, f = c["n_embd"], c["n_inner"]
        self.embeddings = Holder()
        self.embeddings.word_embeddings = nn.Embedding(c["vocab_size"], d)
        self.embeddings.token_type_embeddings = nn.Embedding(c["type_vocab_size"], d)
        self.emb_ln = nn.LayerNorm(d, eps=c["layer_norm_epsilon"])
        self.encoder = Holder()
        self.encoder.layers = nn.ModuleList()
        for _ in range(c["n_layer"]):
            layer = Holder()
            layer.attn = Holder()
            layer.attn.Wqkv = nn.Linear(d, 3 * d, bias=c["qkv_proj_bias"])
            layer.attn.out_proj = nn.Linear(d, d, bias=c["qkv_proj_bias"])
            layer.mlp = Holder()
            layer.mlp.fc11 = nn.Linear(d, f, bias=c["mlp_fc1_bias"])
            layer.mlp.fc12 = nn.Linear(d, f, bias=c["mlp_fc1_bias"])
            layer.mlp.fc2 = nn.Linear(f, d, bias=c["mlp_fc2_bias"])
            layer.norm1 = nn.LayerNorm(d, eps=c["layer_norm_epsilon"])
            layer.norm2 = nn.LayerNorm(d, eps=c["layer_norm_epsilon"])
            self.encoder.layers.append(layer)

    def forward(self, ids):
        c = self.c
        heads = c["n_head"]
        head_dim = c["n_embd"] // heads
        rotary_dims = int(head_dim * c["rotary_emb_fraction"])
        x = self.embeddings.word_embeddings(ids)
        x = x + self.embeddings.token_type_embeddings(torch.zeros_like(ids))
        x = self.emb_ln(x)
        for layer in self.encoder.layers:
            # Wqkv rows: Q of every head, then K, then V ("(three h d)").
            q, k, v = (split_heads(part, heads) for part in layer.attn.Wqkv(x).chunk(3, dim=-1))
            interleaved = c["rotary_emb_interleaved"]
            q = rotary(q, c["rotary_emb_base"], rotary_dims, interleaved)
            k = rotary(k, c["rotary_emb_base"], rotary_dims, interleaved)
            x = layer.norm1(layer.attn.out_proj(attend(q, k, v)) + x)
            # NomciBertGatedMLP with SwiGLU: fc11(x) * silu(fc12(x))
            hidden = layer.mlp.fc11(x) * F.silu(layer.mlp.fc12(x))
            x = layer.norm2(layer.mlp.fc2(hidden) + x)
        return x


# --------------------------------------------------------------- ModernBERT

class BiasFreeLayerNorm(nn.Module):
    """nn.LayerNorm(bias=False), which torch 1.13 lacks."""

    def __init__(self, width, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.eps = eps

    def forward(self, x):
        return F.layer_norm(x, (x.shape[-1],), self.weight, None, self.eps)


def modernbert_norm(c):
    """ModernBERT's nn.LayerNorm(hidden_size, eps=norm_eps, bias=norm_bias)."""
    if c.get("norm_bias", False):
        return nn.LayerNorm(c["hidden_size"], eps=c["norm_eps"])
    return BiasFreeLayerNorm(c["hidden_size"], c["norm_eps"])


def modernbert_layer(c, i):
    """(global, RoPE base) of layer i, as transformers 5's ModernBertConfig
    derives them: layer_types when given, else every
    global_attn_every_n_layers-th layer from 0 is global; each type's base
    from rope_parameters when given, else global_rope_theta (160000) and
    local_rope_theta (10000), as 4.48 read them."""
    types = c.get("layer_types") or [
        "full_attention" if i % c.get("global_attn_every_n_layers", 3) == 0
        else "sliding_attention" for i in range(c["num_hidden_layers"])]
    kind = types[i]
    defaults = {"full_attention": c.get("global_rope_theta", 160000.0),
                "sliding_attention": c.get("local_rope_theta", 10000.0)}
    parameters = (c.get("rope_parameters") or {}).get(kind, {})
    return kind == "full_attention", parameters.get("rope_theta", defaults[kind])


class ModernBert(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        d, f = c["hidden_size"], c["intermediate_size"]
        attention_bias, mlp_bias = c.get("attention_bias", False), c.get("mlp_bias", False)

        self.embeddings = Holder()
        self.embeddings.tok_embeddings = nn.Embedding(c["vocab_size"], d)
        self.embeddings.norm = modernbert_norm(c)
        self.layers = nn.ModuleList()
        for i in range(c["num_hidden_layers"]):
            layer = Holder()
            # Layer 0 has nn.Identity() as its attention norm.
            layer.attn_norm = modernbert_norm(c) if i > 0 else nn.Identity()
            layer.attn = Holder()
            layer.attn.Wqkv = nn.Linear(d, 3 * d, bias=attention_bias)
            layer.attn.Wo = nn.Linear(d, d, bias=attention_bias)
            layer.mlp_norm = modernbert_norm(c)
            layer.mlp = Holder()
            layer.mlp.Wi = nn.Linear(d, 2 * f, bias=mlp_bias)
            layer.mlp.Wo = nn.Linear(f, d, bias=mlp_bias)
            self.layers.append(layer)
        self.final_norm = modernbert_norm(c)

    def forward(self, ids, mask=None):
        """ids [B, L]; mask [B, L] (1 for a token, 0 for padding) or None.
        As ModernBertModel._update_attention_mask: padded keys get the
        float32 minimum, and local layers also the keys farther than
        local_attention // 2 (eager attention adds the mask to the scores)."""
        c = self.c
        heads = c["num_attention_heads"]
        head_dim = c["hidden_size"] // heads
        batch, length = ids.shape
        smallest = torch.finfo(torch.float32).min
        x = self.embeddings.norm(self.embeddings.tok_embeddings(ids))
        rows = torch.arange(length)
        distance = (rows[None, :] - rows[:, None]).abs()
        outside = distance > c["local_attention"] // 2
        if mask is None:
            global_bias = None
            window = torch.zeros(length, length).masked_fill(outside, smallest)
        else:
            padded = (mask == 0)[:, None, None, :].expand(batch, 1, length, length)
            global_bias = torch.zeros(batch, 1, length, length).masked_fill(padded, smallest)
            window = global_bias.masked_fill(outside, smallest)
        for i, layer in enumerate(self.layers):
            is_global, base = modernbert_layer(c, i)
            h = layer.attn_norm(x)
            # Wqkv viewed as (3, heads, head_dim)
            q, k, v = (split_heads(part, heads) for part in layer.attn.Wqkv(h).chunk(3, dim=-1))
            q, k = rotary(q, base, head_dim), rotary(k, base, head_dim)
            x = x + layer.attn.Wo(attend(q, k, v, global_bias if is_global else window))
            # ModernBertMLP: input, gate = Wi(x).chunk(2); Wo(act(input) * gate)
            activated, gate = layer.mlp.Wi(layer.mlp_norm(x)).chunk(2, dim=-1)
            x = x + layer.mlp.Wo(F.gelu(activated) * gate)
        return self.final_norm(x)


# transformers' ACT2FN entries a classifier_activation may name.
ACTIVATIONS = {
    "gelu": F.gelu,
    "gelu_new": lambda x: 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi)
                                                       * (x + 0.044715 * torch.pow(x, 3.0)))),
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "relu": F.relu,
    "tanh": torch.tanh,
    "silu": F.silu,
}


class ModernBertPredictionHead(nn.Module):
    """norm(act(dense(x))): dense with a bias only when classifier_bias,
    classifier_activation, the encoder's norm (its bias only when
    norm_bias); state_dict names dense.* and norm.*."""

    def __init__(self, c):
        super().__init__()
        d = c["hidden_size"]
        self.dense = nn.Linear(d, d, bias=c["classifier_bias"])
        self.norm = modernbert_norm(c)
        self.act = ACTIVATIONS[c["classifier_activation"]]

    def forward(self, x):
        return self.norm(self.act(self.dense(x)))


class ModernBertForSequenceClassification(nn.Module):
    """The encoder as `model`, then on its last hidden state (final_norm
    applied): the [CLS] row (classifier_pooling cls) or the masked mean
    (mean); ModernBertPredictionHead: norm(act(dense(pooled))) with dense's
    bias only when classifier_bias, the norm's only when norm_bias; dropout
    (none at inference); classifier, with its bias. c holds num_labels."""

    def __init__(self, c):
        super().__init__()
        self.c = c
        d = c["hidden_size"]
        self.model = ModernBert(c)
        self.head = ModernBertPredictionHead(c)
        self.classifier = nn.Linear(d, c["num_labels"])

    def forward(self, ids, mask=None):
        """ids [B, L], mask [B, L] or None -> logits [B, num_labels]."""
        if mask is None:
            mask = torch.ones_like(ids)
        hidden = self.model(ids, mask)
        if self.c["classifier_pooling"] == "cls":
            pooled = hidden[:, 0]
        else:
            pooled = (hidden * mask.unsqueeze(-1)).sum(dim=1) / mask.sum(dim=1, keepdim=True)
        return self.classifier(self.head(pooled))


class ModernBertForMaskedLM(nn.Module):
    """ModernBertForMaskedLM (transformers 4.48), as SPLADE runs it: the
    encoder as `model` (final_norm applied), ModernBertPredictionHead on
    every token, norm(act(dense(x))) with dense's bias only when
    classifier_bias and the norm's only when norm_bias, then `decoder`,
    whose weight is tied to model.embeddings.tok_embeddings and whose bias
    exists when decoder_bias (save_pretrained keeps the tied weight once)."""

    def __init__(self, c):
        super().__init__()
        self.c = c
        d = c["hidden_size"]
        self.model = ModernBert(c)
        self.head = ModernBertPredictionHead(c)
        self.decoder = nn.Linear(d, c["vocab_size"], bias=c["decoder_bias"])
        self.decoder.weight = self.model.embeddings.tok_embeddings.weight

    def forward(self, ids, mask=None):
        """ids [B, L], mask [B, L] or None -> logits [B, L, vocab_size]."""
        if mask is None:
            mask = torch.ones_like(ids)
        return self.decoder(self.head(self.model(ids, mask)))


# -------------------------------------------------------------- JinaBERT v2

def alibi_slopes(heads):
    """The ALiBi paper's slopes (and JinaBERT's _get_alibi_head_slopes)."""
    def power_of_two(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start ** i for i in range(n)]
    if math.log2(heads).is_integer():
        return power_of_two(heads)
    closest = 2 ** math.floor(math.log2(heads))
    return power_of_two(closest) + alibi_slopes(2 * closest)[0::2][:heads - closest]


class JinaBert(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        d, f, eps = c["hidden_size"], c["intermediate_size"], c["layer_norm_eps"]
        self.embeddings = bert_embeddings(c)
        self.encoder = Holder()
        self.encoder.layer = nn.ModuleList()
        for _ in range(c["num_hidden_layers"]):
            layer = Holder()
            layer.attention = Holder()
            setattr(layer.attention, "self", Holder())
            attention = getattr(layer.attention, "self")
            attention.query = nn.Linear(d, d)
            attention.key = nn.Linear(d, d)
            attention.value = nn.Linear(d, d)
            layer.attention.output = Holder()
            layer.attention.output.dense = nn.Linear(d, d)
            layer.attention.output.LayerNorm = nn.LayerNorm(d, eps=eps)
            layer.mlp = Holder()
            layer.mlp.gated_layers = nn.Linear(d, 2 * f, bias=False)
            layer.mlp.wo = nn.Linear(f, d)
            layer.mlp.layernorm = nn.LayerNorm(d, eps=eps)
            self.encoder.layer.append(layer)

    def forward(self, ids):
        c = self.c
        heads, f = c["num_attention_heads"], c["intermediate_size"]
        length = ids.shape[1]
        x = self.embeddings.word_embeddings(ids)
        x = x + self.embeddings.token_type_embeddings(torch.zeros_like(ids))
        x = self.embeddings.LayerNorm(x)
        rows = torch.arange(length)
        distance = (rows[None, :] - rows[:, None]).abs()
        bias = -torch.tensor(alibi_slopes(heads))[:, None, None] * distance[None]
        for layer in self.encoder.layer:
            attention = getattr(layer.attention, "self")
            q, k, v = (split_heads(linear(x), heads)
                       for linear in (attention.query, attention.key, attention.value))
            output = layer.attention.output
            x = output.LayerNorm(output.dense(attend(q, k, v, bias[None])) + x)
            # JinaBertGLUMLP: act(first half) * second half, then wo and its
            # own residual LayerNorm.
            hidden = layer.mlp.gated_layers(x)
            hidden = F.gelu(hidden[..., :f]) * hidden[..., f:]
            x = layer.mlp.layernorm(layer.mlp.wo(hidden) + x)
        return x


# ------------------------------------------------------------ Qwen3, Gemma3

class RMSNorm(nn.Module):
    """Qwen3RMSNorm (offset 0): weight * x / rms(x); Gemma3RMSNorm (offset
    1): x / rms(x) * (1 + weight), the weight stored as the difference
    from 1. Both normalise in float32."""

    def __init__(self, width, eps, offset=0.0):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(width) if offset else torch.ones(width))
        self.eps = eps
        self.offset = offset

    def forward(self, x):
        x32 = x.float()
        normed = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        if self.offset:
            return (normed * (self.offset + self.weight.float())).type_as(x)
        return self.weight * normed.type_as(x)


def decoder_attention(layer, d, c, norm_offset):
    """q/k/v/o projections and the per-head q_norm, k_norm of Qwen3 and
    Gemma3 (head_dim may make Q wider than hidden_size)."""
    heads, kv_heads, head_dim = (c["num_attention_heads"], c["num_key_value_heads"],
                                 c["head_dim"])
    bias = c.get("attention_bias", False)
    layer.self_attn = Holder()
    attention = layer.self_attn
    attention.q_proj = nn.Linear(d, heads * head_dim, bias=bias)
    attention.k_proj = nn.Linear(d, kv_heads * head_dim, bias=bias)
    attention.v_proj = nn.Linear(d, kv_heads * head_dim, bias=bias)
    attention.o_proj = nn.Linear(heads * head_dim, d, bias=bias)
    attention.q_norm = RMSNorm(head_dim, c["rms_norm_eps"], norm_offset)
    attention.k_norm = RMSNorm(head_dim, c["rms_norm_eps"], norm_offset)


def decoder_attend(attention, h, c, base, bias, scale):
    """One attention sublayer: Q and K normalised per head, then turned by
    RoPE; key/value head h // (heads / kv_heads) serves query head h."""
    heads, kv_heads, head_dim = (c["num_attention_heads"], c["num_key_value_heads"],
                                 c["head_dim"])
    length = h.shape[1]

    def project(linear, norm, count):
        x = linear(h).view(1, length, count, head_dim)
        return (norm(x) if norm is not None else x).transpose(1, 2)

    q = rotary(project(attention.q_proj, attention.q_norm, heads), base, head_dim)
    k = rotary(project(attention.k_proj, attention.k_norm, kv_heads), base, head_dim)
    v = project(attention.v_proj, None, kv_heads)
    k = k.repeat_interleave(heads // kv_heads, dim=1)
    v = v.repeat_interleave(heads // kv_heads, dim=1)
    return attention.o_proj(attend(q, k, v, bias, scale))


def gated_mlp(layer, d, f):
    layer.mlp = Holder()
    layer.mlp.gate_proj = nn.Linear(d, f, bias=False)
    layer.mlp.up_proj = nn.Linear(d, f, bias=False)
    layer.mlp.down_proj = nn.Linear(f, d, bias=False)


class Qwen3(nn.Module):
    """Qwen3Model as Qwen3-Embedding runs it: causal, last-token pooled by
    sentence-transformers."""

    def __init__(self, c):
        super().__init__()
        self.c = c
        d, f, eps = c["hidden_size"], c["intermediate_size"], c["rms_norm_eps"]
        self.embed_tokens = nn.Embedding(c["vocab_size"], d)
        self.layers = nn.ModuleList()
        for _ in range(c["num_hidden_layers"]):
            layer = Holder()
            layer.input_layernorm = RMSNorm(d, eps)
            decoder_attention(layer, d, c, 0.0)
            layer.post_attention_layernorm = RMSNorm(d, eps)
            gated_mlp(layer, d, f)
            self.layers.append(layer)
        self.norm = RMSNorm(d, eps)

    def forward(self, ids):
        c = self.c
        length = ids.shape[1]
        x = self.embed_tokens(ids)
        causal = torch.full((length, length), torch.finfo(torch.float32).min).triu(1)
        for layer in self.layers:
            x = x + decoder_attend(layer.self_attn, layer.input_layernorm(x), c,
                                   c["rope_theta"], causal, None)
            h = layer.post_attention_layernorm(x)
            x = x + layer.mlp.down_proj(F.silu(layer.mlp.gate_proj(h)) * layer.mlp.up_proj(h))
        return self.norm(x)


class Gemma3Text(nn.Module):
    """Gemma3TextModel with use_bidirectional_attention (EmbeddingGemma):
    embeddings times sqrt(hidden_size) in the weights' dtype, (1 + weight)
    RMSNorms before and after each sublayer, sliding layers that see
    |i - j| < sliding_window in both directions with rope_local_base_freq,
    full layers that see everything with rope_theta, scores scaled by
    query_pre_attn_scalar^-0.5, GeGLU with the tanh GELU."""

    def __init__(self, c):
        super().__init__()
        self.c = c
        d, f, eps = c["hidden_size"], c["intermediate_size"], c["rms_norm_eps"]
        self.embed_tokens = nn.Embedding(c["vocab_size"], d)
        self.layers = nn.ModuleList()
        for _ in range(c["num_hidden_layers"]):
            layer = Holder()
            layer.input_layernorm = RMSNorm(d, eps, 1.0)
            decoder_attention(layer, d, c, 1.0)
            layer.post_attention_layernorm = RMSNorm(d, eps, 1.0)
            layer.pre_feedforward_layernorm = RMSNorm(d, eps, 1.0)
            gated_mlp(layer, d, f)
            layer.post_feedforward_layernorm = RMSNorm(d, eps, 1.0)
            self.layers.append(layer)
        self.norm = RMSNorm(d, eps, 1.0)

    def forward(self, ids):
        c = self.c
        length = ids.shape[1]
        weight = self.embed_tokens.weight
        x = self.embed_tokens(ids) * torch.tensor(c["hidden_size"] ** 0.5, dtype=weight.dtype)
        rows = torch.arange(length)
        distance = (rows[None, :] - rows[:, None]).abs()
        window = torch.zeros(length, length)
        window[distance >= c["sliding_window"]] = torch.finfo(torch.float32).min
        scale = c["query_pre_attn_scalar"] ** -0.5
        for layer, kind in zip(self.layers, c["layer_types"]):
            sliding = kind == "sliding_attention"
            base = c["rope_local_base_freq"] if sliding else c["rope_theta"]
            attended = decoder_attend(layer.self_attn, layer.input_layernorm(x), c, base,
                                      window if sliding else None, scale)
            x = x + layer.post_attention_layernorm(attended)
            h = layer.pre_feedforward_layernorm(x)
            mlp = layer.mlp.down_proj(F.gelu(layer.mlp.gate_proj(h), approximate="tanh")
                                      * layer.mlp.up_proj(h))
            x = x + layer.post_feedforward_layernorm(mlp)
        return self.norm(x)


# ---------------------------------------------------------------------- GTE

def gte_rope_rates(config):
    """The rates NTKScalingRotaryEmbedding (or RotaryEmbedding without
    rope_scaling) ends with, computed step by step as it does, in float32."""
    dim = config["hidden_size"] // config["num_attention_heads"]
    base = config["rope_theta"]
    pairs = torch.arange(0, dim, 2).float() / dim
    scaling = config.get("rope_scaling")
    if scaling is None:
        return 1.0 / (base ** pairs)
    factor, mixed_b = scaling["factor"], scaling.get("mixed_b")
    # The table built at creation covers max_position_embeddings x factor
    # positions, beyond max_position_embeddings when factor > 1: the
    # scaled branch, whose rates every later length reuses.
    assert config["max_position_embeddings"] * factor > config["max_position_embeddings"]
    rates = 1.0 / ((base * (factor if mixed_b is None else 1)) ** pairs)
    if mixed_b is None:
        rates = rates / factor ** (2 / dim)
    else:
        a = torch.tensor(factor).log() / (dim / 2) ** mixed_b
        rates = rates / (a * torch.arange(1, dim // 2 + 1).float() ** mixed_b).exp()
    # The NTK property both forms are built for: the slowest pair ends
    # exactly `factor` times slower (interpolated), the fastest only
    # factor^((2/dim)^b) (b = 1 for the fixed form; extrapolated).
    plain = 1.0 / (base ** pairs)
    assert abs(float(plain[-1] / rates[-1]) / factor - 1) < 1e-5, "slowest rate"
    fastest = factor ** ((2 / dim) ** (1 if mixed_b is None else mixed_b))
    assert abs(float(plain[0] / rates[0]) / fastest - 1) < 1e-5, "fastest rate"
    return rates


class Gte(nn.Module):
    """NewModel (eager attention, inputs not unpadded)."""
    def __init__(self, c):
        super().__init__()
        self.c = c
        d, f = c["hidden_size"], c["intermediate_size"]
        eps = c["layer_norm_eps"]
        self.embeddings = bert_embeddings(c)
        self.encoder = Holder()
        self.encoder.layer = nn.ModuleList()
        for _ in range(c["num_hidden_layers"]):
            layer = Holder()
            layer.attention = Holder()
            layer.attention.qkv_proj = nn.Linear(d, 3 * d)
            layer.attention.o_proj = nn.Linear(d, d)
            layer.mlp = Holder()
            layer.mlp.up_gate_proj = nn.Linear(d, 2 * f, bias=False)
            layer.mlp.down_proj = nn.Linear(f, d)
            layer.attn_ln = nn.LayerNorm(d, eps=eps)
            layer.mlp_ln = nn.LayerNorm(d, eps=eps)
            self.encoder.layer.append(layer)

    def forward(self, ids, mask=None):
        """ids [B, L] (mask [B, L], 1 for tokens) -> hidden states [B, L, d]."""
        c = self.c
        batch, length = ids.shape
        heads, d, f = c["num_attention_heads"], c["hidden_size"], c["intermediate_size"]
        head_dim = d // heads
        if mask is None:
            mask = torch.ones_like(ids)
        x = self.embeddings.word_embeddings(ids)
        if c["type_vocab_size"] > 0:
            x = x + self.embeddings.token_type_embeddings(torch.zeros_like(ids))
        x = self.embeddings.LayerNorm(x)
        angles = torch.einsum("i,j->ij", torch.arange(length, dtype=torch.float32),
                              gte_rope_rates(c))
        table = torch.cat((angles, angles), dim=-1)
        cos, sin = table.cos()[None, :, None, :], table.sin()[None, :, None, :]
        # get_extended_attention_mask: (1 - mask) x the dtype's minimum
        bias = (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
        act = {"gelu": F.gelu, "gelu_new": lambda t: F.gelu(t, approximate="tanh"),
               "silu": F.silu}[c["hidden_act"]]
        for layer in self.encoder.layer:
            q, k, v = (t.view(batch, length, heads, head_dim)
                       for t in layer.attention.qkv_proj(x).split(d, dim=-1))
            q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
            scores = q.transpose(1, 2) @ k.transpose(1, 2).transpose(-1, -2)
            scores = scores / math.sqrt(head_dim) + bias
            context = (scores.softmax(dim=-1) @ v.transpose(1, 2)).permute(0, 2, 1, 3)
            x = layer.attn_ln(x + layer.attention.o_proj(context.reshape(batch, length, d)))
            up, gate = layer.mlp.up_gate_proj(x).split(f, dim=-1)
            x = layer.mlp_ln(x + layer.mlp.down_proj(act(gate) * up))
        return x
