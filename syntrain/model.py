"""Transformer encoder-decoder (Vaswani et al., 2017) with the syntax switches of `syntrain.switches`
(docs/switches.md, docs/tree-decoding.md; writing one: docs/switches-api.md).

The model is generic: each switch that is on (`syntrain.switches.active.ActiveSwitches`) adds its attention
hooks to the layers it names, its modules (embeddings, graph layers) to the model, and its steps to the
embedding and the decoder input; `forward` returns `Outputs` (logits plus the tensors the switches' losses
need), and `auxiliary_losses` computes those losses from them. All switches are off by default. The model's
options are `syntrain.config.model.ModelConfig`.

By default pre-norm residual blocks (LayerNorm before each sub-layer, a final LayerNorm per stack: the
tensor2tensor / fairseq `--*-normalize-before` variant, which trains without tuning on small data), sinusoidal
positions, embeddings scaled by sqrt(d_model), no output bias; `ModelConfig.architecture` changes each (post-norm,
the activation, the sinusoid layout, the final norms, an output bias: what a pretrained model's family fixes,
syntrain.pretrained). Optionally one embedding matrix shared by source, target and output
(the vocabulary is joint; with a source vocabulary of its own, `src_vocab_size`, only target and output share).
"""

from __future__ import annotations

import functools
import math

import torch
from torch import nn

from .config.checks import check_model_config
from .config.core import PRESETS
from .config.model import ModelConfig
from .switches import DecoderStates, Inputs, Outputs, merge_inputs
from .switches.active import ActiveSwitches
from .transformer_layers import Decoder, Encoder, KeyValueCache, MultiHeadAttention, check_kernel, sinusoids
from .vocab import BOS_ID, PAD_ID


def init_weights(module: nn.Module, d_model: int) -> None:
    """The initialisation of a `Transformer`'s linear layers and embeddings."""
    if isinstance(module, nn.Linear):
        nn.init.xavier_uniform_(module.weight)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding):
        nn.init.normal_(module.weight, std=d_model ** -0.5)
        nn.init.zeros_(module.weight[PAD_ID])  # PAD_ID = 0 = also a label embedding's "none"


class Transformer(nn.Module):
    """Encoder-decoder; `forward` returns `Outputs` (logits (B, T, V) and what the auxiliary losses need).

    The decoder runs over all positions at once (`decode`, teacher forcing and decoding that re-reads the
    prefix) or one step at a time with a cache (`decode_step`, incremental decoding)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        sizes = cfg.sizes
        if sizes.vocab_size <= 0:
            raise ValueError("ModelConfig.vocab_size must be set (the size of the joint vocabulary)")
        check_model_config(cfg)
        self.cfg = cfg
        self.switches = ActiveSwitches(cfg)
        self.stages = self.switches.stages()  # the switches' steps per stage, asked once: a batch calls only these
        # the 1-based decoder layers whose output the switches' losses read (Outputs.layer_states)
        self.state_layers = self.switches.state_layers()
        self.src_embed = nn.Embedding(sizes.src_vocab_size or sizes.vocab_size, sizes.d_model, padding_idx=PAD_ID)
        # separate vocabularies (src_vocab_size set): never one source/target matrix; the output may share the target's
        shared = cfg.sharing.share_embeddings and not sizes.src_vocab_size
        self.tgt_embed = self.src_embed if shared else nn.Embedding(sizes.vocab_size, sizes.d_model, padding_idx=PAD_ID)
        self._add_modules("source_modules")
        arch = cfg.architecture
        self.register_buffer("positions", sinusoids(sizes.max_len + arch.position_offset, sizes.d_model,
                                                    arch.positions)[arch.position_offset:], persistent=False)
        self.drop = nn.Dropout(cfg.dropouts.dropout)
        self.encoder, self.decoder = Encoder(cfg, self.switches), Decoder(cfg, self.switches)
        self._add_modules("decoder_modules")
        self.enc_norm, self.dec_norm = (nn.LayerNorm(sizes.d_model) if on else nn.Identity()
                                        for on in (arch.encoder_final_norm, arch.decoder_final_norm))
        self.output = nn.Linear(sizes.d_model, sizes.vocab_size, bias=arch.output_bias)
        self.apply(functools.partial(init_weights, d_model=sizes.d_model))
        if cfg.sharing.output_tied:
            self.output.weight = self.tgt_embed.weight

    def _add_modules(self, kind: str) -> None:
        for switch in self.switches:
            for name, module in getattr(switch, kind)().items():
                self.add_module(name, module)

    def _embed(self, table: nn.Embedding, ids: torch.Tensor, start: int = 0, inputs: Inputs | None = None
               ) -> torch.Tensor:
        end = start + ids.shape[1]
        if end > self.cfg.sizes.max_len:
            raise ValueError(f"sequence of length {end} exceeds max_len {self.cfg.sizes.max_len}")
        x = table(ids)
        if inputs is not None:  # the source: the switches' embedding steps
            for step in self.stages.embed_source:
                x = step(self, x, inputs)
        scale = math.sqrt(self.cfg.sizes.d_model) if self.cfg.architecture.scale_embeddings else 1.0
        return self.drop(x * scale + self.positions[start:end])

    def _start_row(self, tgt_in: torch.Tensor) -> torch.Tensor:
        """Decoder input ids with the start token reading `[model] start_row` (a pretrained model's start token:
        the row of its pad or end; masks still read the ids)."""
        row = self.cfg.architecture.start_row
        return tgt_in if row == BOS_ID else tgt_in.masked_fill(tgt_in == BOS_ID, row)

    def encode(self, src: torch.Tensor, inputs: Inputs | None = None, records: dict | None = None,
               **named: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        """src (B, S) ids and the model inputs (or by name) -> (memory
        (B, S, C), source mask (B, 1, 1, S)); `records` gets what the hooks keep for the losses."""
        inputs = merge_inputs(inputs, named) if named else inputs or {}
        src_mask = (src != PAD_ID)[:, None, None, :]
        x = self.encoder(self._embed(self.src_embed, src, inputs=inputs), src_mask, inputs, records)
        return self.enc_norm(x), src_mask

    def decode(self, tgt_in: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor,
               inputs: Inputs | None = None, records: dict | None = None, **named: torch.Tensor | None
               ) -> torch.Tensor:
        """tgt_in (B, T) ids -> logits (B, T, V) of one decoder pass (inputs: e.g. distances, graph)."""
        return self.output(self.decode_hidden(tgt_in, memory, src_mask, merge_inputs(inputs, named), records))

    def decode_hidden(self, tgt_in: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor,
                      inputs: Inputs | None = None, records: dict | None = None, layers: tuple[int, ...] = (),
                      layer_states: dict[int, torch.Tensor] | None = None) -> torch.Tensor:
        """The decoder's normalized output states (B, T, C) (see `decode`); the output of each 1-based decoder
        layer in `layers` goes into `layer_states`."""
        inputs = inputs or {}
        valid = tgt_in != PAD_ID
        masks = [mask for step in self.stages.decoder_self_mask if (mask := step(valid)) is not None]
        if masks:  # one at most (check_model_config)
            self_mask, limit = masks[0]
        else:
            b, t = tgt_in.shape
            causal = torch.ones(t, t, dtype=torch.bool, device=tgt_in.device).tril()
            self_mask = causal[None, None] & valid[:, None, None, :]
            limit = torch.arange(t, device=tgt_in.device)[None].expand(b, t)
        x = self._embed(self.tgt_embed, self._start_row(tgt_in))
        for step in self.stages.decoder_input:
            x, inputs = step(self, x, inputs, limit)
        return self.dec_norm(self.decoder(x, memory, self_mask, src_mask, inputs, records, layers, layer_states))

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor, inputs: Inputs | None = None,
                **named: torch.Tensor | None) -> Outputs:
        """Teacher forcing: `Outputs` with the logits (B, T, V), the encoder and decoder states and the records
        the auxiliary losses read (`auxiliary_losses`); one switch may compute the decoder states its own way
        (BiTran: one pass per prefix)."""
        inputs, records = merge_inputs(inputs, named) if named else inputs or {}, {}
        memory, src_mask = self.encode(src, inputs, records)
        layers = self.state_layers
        states = next((states for step in self.stages.teacher_forcing
                       if (states := step(self, tgt_in, memory, src_mask, inputs, records, layers)) is not None), None)
        if states is None:  # one causal pass
            kept: dict[int, torch.Tensor] = {}
            states = DecoderStates(self.decode_hidden(tgt_in, memory, src_mask, inputs, records, layers, kept), kept)
        return Outputs(self.output(states.final), records, tgt_in != PAD_ID, states.positions, memory,
                       src_mask[:, 0, 0], states.final, states.layers)

    def auxiliary_losses(self, outputs: Outputs, inputs: Inputs | None = None, **named: torch.Tensor | None
                         ) -> dict[str, torch.Tensor]:
        """The switches' auxiliary losses of a forward's `outputs`, unweighted sums over the batch (names as in
        `ActiveSwitches.loss_weights`); `inputs`: the model inputs."""
        inputs = merge_inputs(inputs, named)
        return {name: value for step in self.stages.losses for name, value in step(self, outputs, inputs).items()}

    def new_cache(self) -> list[dict[str, KeyValueCache]]:
        """An empty incremental-decoding cache (per decoder layer: self-attention keys/values so far,
        cross-attention keys/values of the memory)."""
        return [{"self": KeyValueCache(), "cross": KeyValueCache()} for _ in self.decoder]

    @staticmethod
    def reorder_cache(cache: list[dict[str, KeyValueCache]], rows: torch.Tensor) -> None:
        """Keep cache rows `rows` (beam search: the hypotheses that continue). Cross-attention entries stay:
        a sentence's beam rows share one memory."""
        for layer in cache:
            layer["self"].reorder(rows)

    def decode_step(self, last: torch.Tensor, step: int, memory: torch.Tensor, src_mask: torch.Tensor,
                    cache: list[dict[str, KeyValueCache]], inputs: Inputs | None = None) -> torch.Tensor:
        """Incremental decoding: the token ids `last` (B, 1) at target position `step`, earlier positions read
        from `cache` -> logits (B, V) for the next token. Equals decode()'s last row (tested)."""
        x = self._embed(self.tgt_embed, self._start_row(last), start=step)
        for layer, layer_cache in zip(self.decoder, cache):
            x = layer(x, memory, None, src_mask, layer_cache, inputs)
        return self.output(self.dec_norm(x))[:, -1]

    def attention_modules(self) -> list[MultiHeadAttention]:
        """Every attention module of the model."""
        return [module for module in self.modules() if isinstance(module, MultiHeadAttention)]

    def set_attention_kernel(self, kernel: str) -> None:
        """'auto', 'math' or 'flex' for the layers whose hooks can run on FlexAttention (see transformer_layers.py)."""
        check_kernel(kernel)
        for attn in self.attention_modules():
            attn.kernel = kernel

    def kernel_in_use(self, device: torch.device) -> str:
        """The attention kernel of the layers that have a choice (flex or math), for the run header; "none" where no
        layer has one (plain attention: no switch adds attention operations)."""
        layers = [attn for attn in self.attention_modules() if attn.layout.flex]
        if not layers:
            return "none"
        return "flex" if layers[0].uses_flex(device) else "math"


def build_model(preset: str = "tiny", **overrides: object) -> Transformer:
    """A Transformer from a preset name and ModelConfig overrides (vocab_size is required)."""
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose from {', '.join(PRESETS)}")
    return Transformer(ModelConfig.from_dict({**PRESETS[preset], **overrides}))
