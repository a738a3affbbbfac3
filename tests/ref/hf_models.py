#!/usr/bin/python3
"""hf_models — pure-PyTorch copies of HuggingFace `BertModel` and `GPT2Model`.

Mirrors **transformers 4.30.2** (modeling_bert.py, modeling_gpt2.py,
pytorch_utils.Conv1D, activations.GELUActivation / NewGELUActivation) for
the configuration the zoo uses, in eval mode, without the library:

* the same class names, module tree, attribute names and registration
  order, so `print(model)` is byte-for-byte the library's and
  `state_dict()` has the same keys, shapes, dtypes and order;
* the same buffers with the same persistence as 4.30.2:
    - `BertEmbeddings.position_ids`  int64 [1, 512], **persistent**
      (in the state_dict as `embeddings.position_ids`; 4.31 made it
      non-persistent),
    - `BertEmbeddings.token_type_ids` int64 [1, 512], non-persistent,
    - `GPT2Attention.bias` bool [1, 1, 1024, 1024] (the causal mask, lower
      triangle True) and `GPT2Attention.masked_bias` float32 scalar -1e4,
      both non-persistent (not in the state_dict);
* the same forward arithmetic, op for op, so outputs agree with the library
  to the last bit on the same weights (tests/ref/check_hf_ref.py checks all
  of this against the real package in a throwaway venv);
* the library's initialisation scheme (`_init_weights`: N(0, 0.02) for
  Linear/Conv1D/Embedding weights, zero biases, zero padding row, ones/zeros
  LayerNorm, GPT-2's scaled `c_proj.weight`), from torch's global generator;
  the numbers drawn differ from the library's (different draw order), which
  does not matter: tests copy one state_dict into both.

Only what the zoo needs is kept: no past_key_values, head_mask,
cross-attention, relative position embeddings or gradient checkpointing.
Forward signatures:

    BertModel(cfg)(input_ids, attention_mask=None, token_type_ids=None)
        -> (last_hidden_state [N, S, 768], pooler_output [N, 768])
    GPT2Model(cfg)(input_ids) -> last_hidden_state [N, S, 768]

`attention_mask` is 1 for tokens to keep, 0 for padding (any integer or
float dtype), turned into the additive mask (1 - m) * finfo(dtype).min as
`get_extended_attention_mask` does.  Dropout modules are present (they
print) and are identities in eval mode.

    bert = hf_models.bert(num_hidden_layers=2)   # BertConfig() defaults otherwise
    gpt2 = hf_models.gpt2(n_layer=2)             # GPT2Config() defaults otherwise
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn

TRANSFORMERS_VERSION = "4.30.2"

__all__ = ["TRANSFORMERS_VERSION", "BertConfig", "GPT2Config", "BertModel", "GPT2Model",
           "Conv1D", "GELUActivation", "NewGELUActivation", "bert", "gpt2"]


# ---------------------------------------------------------------------------
# Configurations (the defaults of BertConfig() / GPT2Config() in 4.30.2)
# ---------------------------------------------------------------------------

class BertConfig:
    def __init__(self, vocab_size=30522, hidden_size=768, num_hidden_layers=12,
                 num_attention_heads=12, intermediate_size=3072, hidden_act="gelu",
                 hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
                 max_position_embeddings=512, type_vocab_size=2, initializer_range=0.02,
                 layer_norm_eps=1e-12, pad_token_id=0, position_embedding_type="absolute"):
        if hidden_act != "gelu":
            raise ValueError("only hidden_act='gelu' is mirrored")
        if position_embedding_type != "absolute":
            raise ValueError("only absolute position embeddings are mirrored")
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.intermediate_size = intermediate_size
        self.hidden_act = hidden_act
        self.hidden_dropout_prob = hidden_dropout_prob
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.max_position_embeddings = max_position_embeddings
        self.type_vocab_size = type_vocab_size
        self.initializer_range = initializer_range
        self.layer_norm_eps = layer_norm_eps
        self.pad_token_id = pad_token_id
        self.position_embedding_type = position_embedding_type


class GPT2Config:
    def __init__(self, vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12,
                 n_inner=None, activation_function="gelu_new", resid_pdrop=0.1, embd_pdrop=0.1,
                 attn_pdrop=0.1, layer_norm_epsilon=1e-5, initializer_range=0.02,
                 scale_attn_weights=True):
        if activation_function != "gelu_new":
            raise ValueError("only activation_function='gelu_new' is mirrored")
        self.vocab_size = vocab_size
        self.n_positions = n_positions
        self.n_embd = n_embd
        self.n_layer = n_layer
        self.n_head = n_head
        self.n_inner = n_inner
        self.activation_function = activation_function
        self.resid_pdrop = resid_pdrop
        self.embd_pdrop = embd_pdrop
        self.attn_pdrop = attn_pdrop
        self.layer_norm_epsilon = layer_norm_epsilon
        self.initializer_range = initializer_range
        self.scale_attn_weights = scale_attn_weights

    # the attribute_map of GPT2Config
    hidden_size = property(lambda self: self.n_embd)
    max_position_embeddings = property(lambda self: self.n_positions)
    num_attention_heads = property(lambda self: self.n_head)
    num_hidden_layers = property(lambda self: self.n_layer)


# ---------------------------------------------------------------------------
# Shared pieces (transformers.activations, transformers.pytorch_utils)
# ---------------------------------------------------------------------------

class GELUActivation(nn.Module):
    """activations.GELUActivation: F.gelu (erf).  No extra_repr: `GELUActivation()`."""

    def __init__(self):
        super().__init__()
        self.act = nn.functional.gelu

    def forward(self, input):
        return self.act(input)


class NewGELUActivation(nn.Module):
    """activations.NewGELUActivation: the tanh approximation, written out."""

    def forward(self, input):
        return 0.5 * input * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) *
                                               (input + 0.044715 * torch.pow(input, 3.0))))


class Conv1D(nn.Module):
    """pytorch_utils.Conv1D: a Linear whose weight is [in (nx), out (nf)].
    4.30.2 has no extra_repr, so it prints `Conv1D()`."""

    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.empty(nx, nf))
        self.bias = nn.Parameter(torch.zeros(nf))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, x):
        size_out = x.size()[:-1] + (self.nf,)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        x = x.view(size_out)
        return x


def _dtype(module: nn.Module) -> torch.dtype:
    """ModuleUtilsMixin.dtype: the dtype of the first floating parameter."""
    for p in module.parameters():
        if p.is_floating_point():
            return p.dtype
    return torch.float32


# ---------------------------------------------------------------------------
# BERT (modeling_bert.py)
# ---------------------------------------------------------------------------

class BertEmbeddings(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size,
                                            padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.position_embedding_type = config.position_embedding_type
        self.register_buffer("position_ids", torch.arange(config.max_position_embeddings).expand((1, -1)))
        self.register_buffer("token_type_ids", torch.zeros(self.position_ids.size(), dtype=torch.long),
                             persistent=False)

    def forward(self, input_ids, token_type_ids=None):
        input_shape = input_ids.size()
        seq_length = input_shape[1]
        position_ids = self.position_ids[:, 0:seq_length]
        if token_type_ids is None:
            token_type_ids = self.token_type_ids[:, :seq_length].expand(input_shape[0], seq_length)
        inputs_embeds = self.word_embeddings(input_ids)
        token_type_embeddings = self.token_type_embeddings(token_type_ids)
        embeddings = inputs_embeds + token_type_embeddings
        position_embeddings = self.position_embeddings(position_ids)
        embeddings += position_embeddings
        embeddings = self.LayerNorm(embeddings)
        embeddings = self.dropout(embeddings)
        return embeddings


class BertSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_attention_heads = config.num_attention_heads
        self.attention_head_size = int(config.hidden_size / config.num_attention_heads)
        self.all_head_size = self.num_attention_heads * self.attention_head_size
        self.query = nn.Linear(config.hidden_size, self.all_head_size)
        self.key = nn.Linear(config.hidden_size, self.all_head_size)
        self.value = nn.Linear(config.hidden_size, self.all_head_size)
        self.dropout = nn.Dropout(config.attention_probs_dropout_prob)
        self.position_embedding_type = config.position_embedding_type
        self.is_decoder = False

    def transpose_for_scores(self, x):
        new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        x = x.view(new_x_shape)
        return x.permute(0, 2, 1, 3)

    def forward(self, hidden_states, attention_mask=None):
        mixed_query_layer = self.query(hidden_states)
        key_layer = self.transpose_for_scores(self.key(hidden_states))
        value_layer = self.transpose_for_scores(self.value(hidden_states))
        query_layer = self.transpose_for_scores(mixed_query_layer)
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        attention_scores = attention_scores / math.sqrt(self.attention_head_size)
        if attention_mask is not None:
            attention_scores = attention_scores + attention_mask
        attention_probs = nn.functional.softmax(attention_scores, dim=-1)
        attention_probs = self.dropout(attention_probs)
        context_layer = torch.matmul(attention_probs, value_layer)
        context_layer = context_layer.permute(0, 2, 1, 3).contiguous()
        new_context_layer_shape = context_layer.size()[:-2] + (self.all_head_size,)
        context_layer = context_layer.view(new_context_layer_shape)
        return context_layer


class BertSelfOutput(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states, input_tensor):
        hidden_states = self.dense(hidden_states)
        hidden_states = self.dropout(hidden_states)
        hidden_states = self.LayerNorm(hidden_states + input_tensor)
        return hidden_states


class BertAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.self = BertSelfAttention(config)
        self.output = BertSelfOutput(config)
        self.pruned_heads = set()

    def forward(self, hidden_states, attention_mask=None):
        self_output = self.self(hidden_states, attention_mask)
        return self.output(self_output, hidden_states)


class BertIntermediate(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)
        self.intermediate_act_fn = GELUActivation()

    def forward(self, hidden_states):
        hidden_states = self.dense(hidden_states)
        hidden_states = self.intermediate_act_fn(hidden_states)
        return hidden_states


class BertOutput(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.intermediate_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, hidden_states, input_tensor):
        hidden_states = self.dense(hidden_states)
        hidden_states = self.dropout(hidden_states)
        hidden_states = self.LayerNorm(hidden_states + input_tensor)
        return hidden_states


class BertLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.chunk_size_feed_forward = 0
        self.seq_len_dim = 1
        self.attention = BertAttention(config)
        self.is_decoder = False
        self.add_cross_attention = False
        self.intermediate = BertIntermediate(config)
        self.output = BertOutput(config)

    def forward(self, hidden_states, attention_mask=None):
        attention_output = self.attention(hidden_states, attention_mask)
        return self.feed_forward_chunk(attention_output)

    def feed_forward_chunk(self, attention_output):
        intermediate_output = self.intermediate(attention_output)
        layer_output = self.output(intermediate_output, attention_output)
        return layer_output


class BertEncoder(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.layer = nn.ModuleList([BertLayer(config) for _ in range(config.num_hidden_layers)])
        self.gradient_checkpointing = False

    def forward(self, hidden_states, attention_mask=None):
        for layer_module in self.layer:
            hidden_states = layer_module(hidden_states, attention_mask)
        return hidden_states


class BertPooler(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.activation = nn.Tanh()

    def forward(self, hidden_states):
        first_token_tensor = hidden_states[:, 0]
        pooled_output = self.dense(first_token_tensor)
        pooled_output = self.activation(pooled_output)
        return pooled_output


class BertModel(nn.Module):
    def __init__(self, config, add_pooling_layer=True):
        super().__init__()
        self.config = config
        self.embeddings = BertEmbeddings(config)
        self.encoder = BertEncoder(config)
        self.pooler = BertPooler(config) if add_pooling_layer else None
        self.apply(self._init_weights)

    def _init_weights(self, module):
        std = self.config.initializer_range
        with torch.no_grad():
            if isinstance(module, nn.Linear):
                module.weight.normal_(mean=0.0, std=std)
                if module.bias is not None:
                    module.bias.zero_()
            elif isinstance(module, nn.Embedding):
                module.weight.normal_(mean=0.0, std=std)
                if module.padding_idx is not None:
                    module.weight[module.padding_idx].zero_()
            elif isinstance(module, nn.LayerNorm):
                module.bias.zero_()
                module.weight.fill_(1.0)

    @property
    def dtype(self):
        return _dtype(self)

    def get_extended_attention_mask(self, attention_mask):
        """ModuleUtilsMixin.get_extended_attention_mask for a 2-D mask, encoder."""
        dtype = self.dtype
        extended_attention_mask = attention_mask[:, None, None, :]
        extended_attention_mask = extended_attention_mask.to(dtype=dtype)
        extended_attention_mask = (1.0 - extended_attention_mask) * torch.finfo(dtype).min
        return extended_attention_mask

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        input_shape = input_ids.size()
        batch_size, seq_length = input_shape
        device = input_ids.device
        if attention_mask is None:
            attention_mask = torch.ones((batch_size, seq_length), device=device)
        if token_type_ids is None:
            buffered = self.embeddings.token_type_ids[:, :seq_length]
            token_type_ids = buffered.expand(batch_size, seq_length)
        extended_attention_mask = self.get_extended_attention_mask(attention_mask)
        embedding_output = self.embeddings(input_ids=input_ids, token_type_ids=token_type_ids)
        sequence_output = self.encoder(embedding_output, attention_mask=extended_attention_mask)
        pooled_output = self.pooler(sequence_output) if self.pooler is not None else None
        return sequence_output, pooled_output


# ---------------------------------------------------------------------------
# GPT-2 (modeling_gpt2.py)
# ---------------------------------------------------------------------------

class GPT2Attention(nn.Module):
    def __init__(self, config, layer_idx=None):
        super().__init__()
        max_positions = config.max_position_embeddings
        self.register_buffer(
            "bias",
            torch.tril(torch.ones((max_positions, max_positions), dtype=torch.bool)).view(
                1, 1, max_positions, max_positions),
            persistent=False,
        )
        self.register_buffer("masked_bias", torch.tensor(-1e4), persistent=False)
        self.embed_dim = config.hidden_size
        self.num_heads = config.num_attention_heads
        self.head_dim = self.embed_dim // self.num_heads
        self.split_size = self.embed_dim
        self.scale_attn_weights = config.scale_attn_weights
        self.is_cross_attention = False
        self.scale_attn_by_inverse_layer_idx = False
        self.layer_idx = layer_idx
        self.reorder_and_upcast_attn = False
        self.c_attn = Conv1D(3 * self.embed_dim, self.embed_dim)
        self.c_proj = Conv1D(self.embed_dim, self.embed_dim)
        self.attn_dropout = nn.Dropout(config.attn_pdrop)
        self.resid_dropout = nn.Dropout(config.resid_pdrop)
        self.pruned_heads = set()

    def _attn(self, query, key, value):
        attn_weights = torch.matmul(query, key.transpose(-1, -2))
        if self.scale_attn_weights:
            attn_weights = attn_weights / torch.full(
                [], value.size(-1) ** 0.5, dtype=attn_weights.dtype, device=attn_weights.device)
        query_length, key_length = query.size(-2), key.size(-2)
        causal_mask = self.bias[:, :, key_length - query_length: key_length, :key_length]
        mask_value = torch.finfo(attn_weights.dtype).min
        mask_value = torch.full([], mask_value, dtype=attn_weights.dtype).to(attn_weights.device)
        attn_weights = torch.where(causal_mask, attn_weights.to(attn_weights.dtype), mask_value)
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        attn_weights = attn_weights.type(value.dtype)
        attn_weights = self.attn_dropout(attn_weights)
        attn_output = torch.matmul(attn_weights, value)
        return attn_output

    def _split_heads(self, tensor, num_heads, attn_head_size):
        new_shape = tensor.size()[:-1] + (num_heads, attn_head_size)
        tensor = tensor.view(new_shape)
        return tensor.permute(0, 2, 1, 3)

    def _merge_heads(self, tensor, num_heads, attn_head_size):
        tensor = tensor.permute(0, 2, 1, 3).contiguous()
        new_shape = tensor.size()[:-2] + (num_heads * attn_head_size,)
        return tensor.view(new_shape)

    def forward(self, hidden_states):
        query, key, value = self.c_attn(hidden_states).split(self.split_size, dim=2)
        query = self._split_heads(query, self.num_heads, self.head_dim)
        key = self._split_heads(key, self.num_heads, self.head_dim)
        value = self._split_heads(value, self.num_heads, self.head_dim)
        attn_output = self._attn(query, key, value)
        attn_output = self._merge_heads(attn_output, self.num_heads, self.head_dim)
        attn_output = self.c_proj(attn_output)
        attn_output = self.resid_dropout(attn_output)
        return attn_output


class GPT2MLP(nn.Module):
    def __init__(self, intermediate_size, config):
        super().__init__()
        embed_dim = config.hidden_size
        self.c_fc = Conv1D(intermediate_size, embed_dim)
        self.c_proj = Conv1D(embed_dim, intermediate_size)
        self.act = NewGELUActivation()
        self.dropout = nn.Dropout(config.resid_pdrop)

    def forward(self, hidden_states):
        hidden_states = self.c_fc(hidden_states)
        hidden_states = self.act(hidden_states)
        hidden_states = self.c_proj(hidden_states)
        hidden_states = self.dropout(hidden_states)
        return hidden_states


class GPT2Block(nn.Module):
    def __init__(self, config, layer_idx=None):
        super().__init__()
        hidden_size = config.hidden_size
        inner_dim = config.n_inner if config.n_inner is not None else 4 * hidden_size
        self.ln_1 = nn.LayerNorm(hidden_size, eps=config.layer_norm_epsilon)
        self.attn = GPT2Attention(config, layer_idx=layer_idx)
        self.ln_2 = nn.LayerNorm(hidden_size, eps=config.layer_norm_epsilon)
        self.mlp = GPT2MLP(inner_dim, config)

    def forward(self, hidden_states):
        residual = hidden_states
        hidden_states = self.ln_1(hidden_states)
        attn_output = self.attn(hidden_states)
        hidden_states = attn_output + residual
        residual = hidden_states
        hidden_states = self.ln_2(hidden_states)
        feed_forward_hidden_states = self.mlp(hidden_states)
        hidden_states = residual + feed_forward_hidden_states
        return hidden_states


class GPT2Model(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.embed_dim = config.hidden_size
        self.wte = nn.Embedding(config.vocab_size, self.embed_dim)
        self.wpe = nn.Embedding(config.max_position_embeddings, self.embed_dim)
        self.drop = nn.Dropout(config.embd_pdrop)
        self.h = nn.ModuleList([GPT2Block(config, layer_idx=i) for i in range(config.num_hidden_layers)])
        self.ln_f = nn.LayerNorm(self.embed_dim, eps=config.layer_norm_epsilon)
        self.model_parallel = False
        self.device_map = None
        self.gradient_checkpointing = False
        self.apply(self._init_weights)

    def _init_weights(self, module):
        std = self.config.initializer_range
        with torch.no_grad():
            if isinstance(module, (nn.Linear, Conv1D)):
                module.weight.normal_(mean=0.0, std=std)
                if module.bias is not None:
                    module.bias.zero_()
            elif isinstance(module, nn.Embedding):
                module.weight.normal_(mean=0.0, std=std)
                if module.padding_idx is not None:
                    module.weight[module.padding_idx].zero_()
            elif isinstance(module, nn.LayerNorm):
                module.bias.zero_()
                module.weight.fill_(1.0)
            for name, p in module.named_parameters():
                if name == "c_proj.weight":
                    p.normal_(mean=0.0, std=(std / math.sqrt(2 * self.config.n_layer)))

    @property
    def dtype(self):
        return _dtype(self)

    def forward(self, input_ids):
        input_shape = input_ids.size()
        input_ids = input_ids.view(-1, input_shape[-1])
        device = input_ids.device
        position_ids = torch.arange(0, input_shape[-1], dtype=torch.long, device=device)
        position_ids = position_ids.unsqueeze(0).view(-1, input_shape[-1])
        inputs_embeds = self.wte(input_ids)
        position_embeds = self.wpe(position_ids)
        hidden_states = inputs_embeds + position_embeds
        hidden_states = self.drop(hidden_states)
        output_shape = input_shape + (hidden_states.size(-1),)
        for block in self.h:
            hidden_states = block(hidden_states)
        hidden_states = self.ln_f(hidden_states)
        hidden_states = hidden_states.view(output_shape)
        return hidden_states


def bert(**overrides) -> BertModel:
    """BertModel(BertConfig(**overrides)) in eval mode (the zoo: num_hidden_layers=2)."""
    return BertModel(BertConfig(**overrides)).eval()


def gpt2(**overrides) -> GPT2Model:
    """GPT2Model(GPT2Config(**overrides)) in eval mode (the zoo: n_layer=2)."""
    return GPT2Model(GPT2Config(**overrides)).eval()


if __name__ == "__main__":
    import sys
    which = sys.argv[1] if len(sys.argv) > 1 else "bert"
    print(bert(num_hidden_layers=2) if which == "bert" else gpt2(n_layer=2))
