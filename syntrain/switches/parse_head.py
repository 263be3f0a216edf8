"""Parse heads: DBSA (Deguchi et al., 2019) and a LISA-style baseline (Strubell et al., 2018).

DBSA (dependency-based self-attention): the last head of encoder and/or decoder layer `dbsa_layer` (1-based)
scores bi-affinely, softmax(Q U K^T / sqrt(d_k)) with U (parameter `parse_bilinear`) starting as the identity
(`dbsa_biaffine = "paper"`, eq. 4), or as the authors' released layer (`dbsa_biaffine = "released"`,
de9uch1/dbsa `DependencyBasedSelfAttention`): softmax(Q W^T K^T / sqrt(d_k) + K b), W (`parse_biaffine_weight`)
Xavier-uniform with gain 1/sqrt(2), b (`parse_biaffine_bias`) from zeros, the bias term not scaled. The
released layer puts its parse head first and, with `--dependency-heads` > 1, mixes the query across those heads
(one W over their concatenation) and averages their probabilities; here the parse head is one head, the last
(with one head the place is a relabelling of identically initialised heads), as the release's default
(`dependency_heads` 1; its decoder layer is always built with one). It learns dependency heads: the loss sum
of -log A[t, head(t)] over the rows with a head (eq. 5), weighted by `dbsa_lambda`. The sub-word heads
are `dbsa_rule`'s: "next_piece" (default; the shards' `dbsa_head`, the rule of the authors' released
preprocessing: a word's non-final piece -> its next piece, its final piece -> the head
word's first piece; model inputs "src_dbsa_head" / "tgt_dbsa_head") or "parent_first" (every piece -> the
head word's first piece; "src_parent_first" / "tgt_parent_first"). A checkpoint stored before `dbsa_rule` existed keeps
"parent_first", the rule it was trained with (`Switch.stored_defaults`). On the decoder side the causal mask
keeps it from seeing later tokens (a head that comes later gives no loss, as in the released code).
LISA: the last head of encoder layer `lisa_layer` with plain dot-product scores and the same loss
(`lisa_lambda`), always on `parent_first`.

The parse head's log-weights are recorded in the forward's records ("parse_encoder", "parse_decoder", "lisa"),
which SyncAttn reads as well.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import nn

from synprep.features import DBSA_RULES

from ..config import option
from .base import AttentionHook, Heads, HeadView, Inputs, ModelOptions, Outputs, Switch
from .registry import register
from .tree_decoding import TreeDecoding

ENCODER, DECODER, LISA = "parse_encoder", "parse_decoder", "lisa"  # record names


def head_input(rule: str) -> str:
    """The head column (without its side prefix) that dbsa_rule `rule` supervises with."""
    return "parent_first" if rule == "parent_first" else "dbsa_head"


def dependency_loss(log_weights: torch.Tensor, head: torch.Tensor | None) -> torch.Tensor:
    """DBSA eq. 5 / LISA: sum of -log A[t, head(t)] over the rows t with a head (head >= 0); log_weights
    (B, T, S), head (B, T) positions, -1 = no loss for that row."""
    if head is None:
        raise ValueError("the dependency loss needs the heads of the batch (a side's parent_first or dbsa_head column)")
    supervised = head >= 0
    picked = log_weights.gather(-1, head.clamp(min=0)[..., None])[..., 0]
    return -torch.where(supervised, picked, torch.zeros_like(picked)).sum()


BIAFFINE = ("paper", "released")  # `dbsa_biaffine`: the paper's eq. 4 or the released layer


class ParseHead(AttentionHook):
    """The last head of a self-attention as a parse head: "biaffine" (DBSA, `dbsa_biaffine` "paper": its query
    Q U), "released" (DBSA as the authors' released layer: its query Q W^T and a bias K b per key) or "dot"
    (LISA: plain scores); its log-weights (B, T, S) are recorded under `key`."""

    heads = Heads.last()
    name = "parse head"

    def __init__(self, scores: str, key: str) -> None:
        self.scores, self.key = scores, key
        self.ops = {"biaffine": ("query", "record"), "released": ("query", "bias", "record")}.get(scores, ("record",))

    def attach(self, attn: nn.Module) -> None:
        if self.scores == "biaffine":  # DBSA eq. 4: softmax(Q U K^T / sqrt(d_k)); U starts as the identity
            attn.parse_bilinear = nn.Parameter(torch.eye(attn.head_dim))
        elif self.scores == "released":
            # de9uch1/dbsa's DependencyBasedSelfAttention.add_biaffine_layer: a Linear whose weight W (Xavier
            # uniform, gain 1/sqrt(2)) maps the (scaled) query and whose bias b (zeros) scores each key, k . b,
            # added to the scores unscaled
            weight = torch.empty(attn.head_dim, attn.head_dim)
            nn.init.xavier_uniform_(weight, gain=1 / math.sqrt(2))
            attn.parse_biaffine_weight = nn.Parameter(weight)
            attn.parse_biaffine_bias = nn.Parameter(torch.zeros(attn.head_dim))

    def operations(self, attn: nn.Module, view: HeadView) -> dict[str, torch.Tensor]:
        if self.scores == "biaffine":
            return {"query": view.q @ attn.parse_bilinear}
        if self.scores == "released":  # k . b: (B, 1, S) -> (B, 1, 1, S)
            return {"query": view.q @ attn.parse_biaffine_weight.T,
                    "bias": (view.k @ attn.parse_biaffine_bias)[:, :, None, :]}
        return {}

    def record(self, attn: nn.Module, log_weights: torch.Tensor, records: dict[str, torch.Tensor]) -> None:
        records[self.key] = log_weights[:, 0]


@dataclass
class ParseHeadConfig:
    """[model] options of the DBSA and LISA parse heads."""

    dbsa_encoder: bool = option(False, help="DBSA: the last head of encoder layer dbsa_layer learns source heads")
    dbsa_decoder: bool = option(False, help="DBSA: the last head of decoder layer dbsa_layer learns target heads")
    dbsa_layer: int = option(1, ge=1, help="1-based layer of the DBSA parse heads")
    dbsa_lambda: float = option(0.5, ge=0, help="weight of the DBSA losses")
    dbsa_rule: str = option("next_piece", choices=DBSA_RULES,
                            help="DBSA's sub-word heads: next_piece (the released rule, shards' dbsa_head) or "
                                 "parent_first")
    dbsa_biaffine: str = option("paper", choices=BIAFFINE,
                                help="DBSA's scores: paper (eq. 4, Q U K^T / sqrt(d_k), U from the identity) or "
                                     "released (the authors' layer: Q W^T K^T / sqrt(d_k) + K b, W Xavier-uniform "
                                     "with gain 1/sqrt(2), b from zeros)")
    lisa_layer: int = option(0, ge=0, help="1-based encoder layer of the LISA parse head (0: off)")
    lisa_lambda: float = option(1.0, ge=0, requires={"lisa_layer": None}, help="weight of the LISA loss")


def parse_layer(options: ParseHeadConfig) -> int:
    """The 0-based layer of the DBSA parse heads."""
    return options.dbsa_layer - 1


@dataclass(frozen=True)
class ParseHeadPlace:
    """One parse head the options turn on: the last head of self-attention layer `layer` (0-based) of `stack`,
    scoring as `scores` (`ParseHead`), its log-weights recorded as `record`, supervised by the batch column
    `column` (head positions) in the loss `loss`; `who` names it in errors."""

    stack: str
    layer: int
    scores: str
    record: str
    column: str
    loss: str
    who: str


def parse_head_places(options: ParseHeadConfig) -> list[ParseHeadPlace]:
    """The parse heads `options` turn on, in the order of their losses: DBSA's encoder head, LISA's, DBSA's
    decoder head."""
    scores = "biaffine" if options.dbsa_biaffine == "paper" else "released"
    rule = head_input(options.dbsa_rule)
    places = []
    if options.dbsa_encoder:
        places.append(ParseHeadPlace("encoder", parse_layer(options), scores, ENCODER, f"src_{rule}", "dep_src",
                                     "DBSA (encoder)"))
    if options.lisa_layer:
        places.append(ParseHeadPlace("encoder", options.lisa_layer - 1, "dot", LISA, "src_parent_first", "lisa",
                                     "LISA"))
    if options.dbsa_decoder:
        places.append(ParseHeadPlace("decoder", parse_layer(options), scores, DECODER, f"tgt_{rule}", "dep_tgt",
                                     "DBSA (decoder)"))
    return places


def on_both_sides(cfg: ModelOptions) -> bool:
    """DBSA parse heads in the encoder and the decoder of the model config `cfg` (what SyncAttn reads)."""
    options = cfg.section(ParseHeads)
    return options.dbsa_encoder and options.dbsa_decoder


BOTH_SIDES = "dbsa_encoder and dbsa_decoder"  # the options `on_both_sides` reads, for error messages


class ParseHeads(Switch[ParseHeadConfig], name="parse_head", priority=30, config=ParseHeadConfig,
                 switched_by=("dbsa_encoder", "dbsa_decoder", "lisa_layer")):
    """DBSA (Deguchi et al. 2019; encoder and/or decoder) and LISA-style (encoder) parse heads with their
    dependency losses; decoding reads nothing more.

    ### DBSA

    DBSA (Deguchi et al. 2019, as described in the SyncAttn paper): the last head of layer `dbsa_layer` (1-based) of the
    encoder and/or decoder self-attention uses bi-affine scores softmax(Q U K^T / sqrt(d_k)) (eq. 4; U starts as the
    identity, i.e. as a plain head, tested) and is trained with L = L_t + lambda_dep L_dep, L_dep = -sum log A[t,
    head(t)] (eq. 5). `</s>`, `<s>` and pads have no loss.

    Sub-word heads, `dbsa_rule`:

    - `"next_piece"` (default): the rule of the authors' released preprocessing (de9uch1/dbsa,
      `scripts/bpe_dependency.py`, `incremental_bpe_dependency`; shard field `dbsa_head`): a **non-final piece** of a
      word points to the **next piece** of its word; a word's **final piece** points to the **first piece of its head
      word**; the **root** word's final piece points to **itself**. Equal to the released script on every sentence of
      the shared UD test treebanks ([fidelity.md](fidelity.md)).
    - `"parent_first"`: every piece of a word points to the first piece of its head word (the root's pieces to the
      root's first piece): the LISA target, and what syntrain used before `dbsa_rule` existed. A checkpoint saved then
      keeps it (its stored config has no `dbsa_rule`: it loads as `"parent_first"`).

    Shards without `*_dbsa_head` (converted without the `dbsa` feature group, or before it existed) still train: the
    trainer makes the heads from `*_heads` and `*_subword_token` with `synprep.features.forest_dbsa_heads`, the same
    function convert uses.

    **Decoder**: it reads `<s> + subwords`, so a head at sub-word position k is decoder input position k + 1; a sub-word
    whose head comes **later** (a future token, hidden by the causal mask) gets **no loss**, as in the released
    criterion (only pairs with head <= token are kept on the target side); the head attention keeps the causal mask
    (tested: changing later target tokens leaves earlier logits and losses identical). Under `next_piece` every
    non-final target piece points forward, so only word-final pieces give a decoder loss. One deliberate difference: the
    released fairseq code supervises the decoder row that *predicts* piece i (its input is piece i - 1) to attend to the
    column holding piece head(i) - 1; syntrain supervises the row that has *read* piece i to attend to the position
    holding piece head(i), the same alignment as on the encoder side, so that the parse head at a position parses the
    token it reads (SyncAttn compares exactly these rows with the encoder's, through the cross-attention).

    **Bi-affine scores**, `dbsa_biaffine`, compared with the released `dbsa/modules/dbsa.py`
    (`DependencyBasedSelfAttention.add_biaffine_layer` and `forward`, de9uch1/dbsa master `b0cdef6`):

    - `"paper"` (default): eq. 4, softmax(Q U K^T / sqrt(d_k)); U (`parse_bilinear`) starts as the identity, so the head
      starts as a plain attention head (tested). Older checkpoints load unchanged with it.
    - `"released"`: the authors' layer, softmax(Q W^T K^T / sqrt(d_k) + K b): the query, scaled by 1/sqrt(d_k), is
      multiplied by W^T (`F.linear(q, W)`), and a **per-key bias** k . b is added to the scores **unscaled** (the same
      for every query of the sentence); W (`parse_biaffine_weight`) is initialised **Xavier-uniform with gain
      1/sqrt(2)**, b (`parse_biaffine_bias`) with zeros (`nn.Linear(d, d, bias=True)` whose bias scores the keys).

    Where the head sits and how many: the released layer supervises its **first** `--dependency-heads` heads and, with
    more than one, applies one W to the concatenated queries of those heads (**mixing across heads**), adds one bias
    computed from their concatenated keys, and trains the **mean of their probabilities**. syntrain's parse head is
    **one** head, the **last** of its layer (the front heads belong to Pascal / syntax-directed heads): the release's
    default (`dependency_heads = 1`; its decoder layer builds the bi-affine on one head whatever the option says). With
    one head its place is a relabelling of heads that are initialised alike, so first vs last changes nothing but the
    order of the random draws. More than one DBSA head is not offered.

    The two choices differ from the first step: W is not the identity, and its random draw shifts every later draw of
    the model's initialisation. Both are pinned (tests/test_switch_compat.py: `multi30k-dbsa.toml` and its variant
    `dbsa_biaffine=released`).

    Losses logged as `loss_dep_src` / `loss_dep_tgt`; under `parent_first` the heads are read from `*_parent_first`.
    Recipe: `pipelines/train/multi30k-dbsa.toml` (both sides, layer 1, lambda_dep 0.5).

    ### LISA-style baseline

    The last head of encoder layer `lisa_layer` is supervised to attend to `src_parent_first` (same sub-word/root/`</s>`
    conventions as DBSA) with **dot-product** scores (a plain head, no extra parameters; bi-affine is DBSA's), loss
    weight `lisa_lambda`. LISA and encoder DBSA cannot share a layer (both use the last head).

    Loss logged as `loss_lisa`. Recipe: `pipelines/train/multi30k-lisa.toml` (encoder layer 1, lambda 1.0)."""

    example = {"dbsa_encoder": True, "dbsa_decoder": True, "lisa_layer": 2}
    stored_defaults: ClassVar[dict[str, object]] = {"dbsa_rule": "parent_first"}  # what older checkpoints meant

    @classmethod
    def check(cls, cfg: ModelOptions) -> None:
        options = cls.section(cfg)
        sides = tuple(stack for stack, on in (("encoder", options.dbsa_encoder), ("decoder", options.dbsa_decoder))
                      if on)
        if sides:
            cls.check_layers(cfg, "dbsa_layer", sides)
        cls.check_layers(cfg, "lisa_layer", "encoder")
        if options.lisa_layer and options.dbsa_encoder and options.lisa_layer == options.dbsa_layer:
            raise ValueError("LISA and encoder DBSA both use the last head of the same layer: choose another "
                             "lisa_layer")
        if TreeDecoding.active(cfg) and options.dbsa_decoder:
            raise ValueError("decoder DBSA supervises sub-word heads: not with decoder_target = \"transitions\"")

    def describe(self) -> str:
        options, on = self.options, []
        sides = [side for side, flag in (("encoder", options.dbsa_encoder), ("decoder", options.dbsa_decoder)) if flag]
        if sides:
            on.append(f"DBSA {'+'.join(sides)} layer {options.dbsa_layer} (lambda {options.dbsa_lambda}, heads "
                      f"{options.dbsa_rule}" + (", released bi-affine" if options.dbsa_biaffine == "released"
                                                else "") + ")")
        if options.lisa_layer:
            on.append(f"LISA encoder layer {options.lisa_layer} (lambda {options.lisa_lambda})")
        return "; ".join(on)

    def reads(self, training: bool) -> dict[str, str]:
        if not training:
            return {}
        return {place.column: place.who for place in parse_head_places(self.options)}

    def attention_hooks(self, stack: str, layer: int, kind: str) -> list[AttentionHook]:
        if kind != "self":
            return []
        return [ParseHead(place.scores, place.record) for place in parse_head_places(self.options)
                if (place.stack, place.layer) == (stack, layer)][:1]  # one per layer (`check`)

    loss_names = ("dep_src", "dep_tgt", "lisa")

    def start_from_pretrained(self, model: nn.Module) -> None:
        """The released layer's W starts as the identity (its bias b is zeros): the parse head scores as the plain
        head it replaces (the paper's U is the identity already)."""
        for attn in model.modules():
            if hasattr(attn, "parse_biaffine_weight"):
                with torch.no_grad():
                    attn.parse_biaffine_weight.copy_(torch.eye(attn.head_dim))
                    attn.parse_biaffine_bias.zero_()

    def loss_weights(self) -> dict[str, float]:
        options = self.options
        return {"dep_src": options.dbsa_lambda, "dep_tgt": options.dbsa_lambda, "lisa": options.lisa_lambda}

    def losses(self, model: nn.Module, outputs: Outputs, inputs: Inputs) -> dict[str, torch.Tensor]:
        return {place.loss: dependency_loss(outputs.records[place.record], inputs.get(place.column))
                for place in parse_head_places(self.options)}


register(ParseHeads)
