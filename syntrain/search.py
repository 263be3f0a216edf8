"""Search: the output ids a model gives a batch of sources, greedy (`greedy`) or by beam search (`beam_search`,
`beam_search_nbest`).

Beam search follows the paper: beam 4, GNMT length penalty lp(n) = ((5 + n) / 6) ** alpha with alpha = 0.6,
a hypothesis is final when it emits EOS, a sentence is done when it has `beam` final hypotheses (fairseq's
criterion).

Switches may constrain the search (`Switch.constraint`: the allowed next tokens, and inputs a decoder pass over
the whole prefix reads), lengthen the outputs (`output_length_factor`) and turn off the incremental cache
(`recomputes_prefix`: the decoder re-runs over the whole prefix at every step, O(T^2) per sentence). Tree
decoding does all three (syntrain.switches.tree_decoding, docs/tree-decoding.md).

A model with a target prefix (`[model] target_prefix`: a multilingual pretrained model's target language code)
is forced to emit it first, as transformers' `forced_bos_token_id` forces it, and the outputs leave it out.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from .model import Transformer
from .switches import Inputs, merge_inputs
from .vocab import BOS_ID, EOS_ID, PAD_ID, Vocab

NEVER_CHOSEN = (PAD_ID, BOS_ID)  # ids decoding never outputs


def _max_steps(model: Transformer, src: torch.Tensor) -> int:
    factor = max([1.5] + [switch.output_length_factor for switch in model.switches])
    forced = len(model.cfg.architecture.target_prefix)
    return min(model.cfg.sizes.max_len - 1, int(src.shape[1] * factor) + 10 + forced)


def _constraint(model: Transformer, vocab: Vocab | None, rows: int) -> Any:
    """The decoding constraint of a switch (see `Switch.constraint`), or None."""
    return next((made for switch in model.switches if (made := switch.constraint(vocab, rows)) is not None), None)


def _next_logits(model: Transformer, ys: torch.Tensor, step: int, memory: torch.Tensor, src_mask: torch.Tensor,
                 cache: list[dict], inputs: Inputs, constraint: Any) -> torch.Tensor:
    """Logits (N, V) for the token after `ys` (N, step + 1): incremental, or the whole prefix again; pad and the
    start token are never chosen (a pretrained model's start may be a copy of its pad or end: syntrain.pretrained);
    the target prefix's token at its steps is the only one allowed (logit 0, the others -inf)."""
    if not model.switches.recomputes_prefix:
        logits = model.decode_step(ys[:, -1:], step, memory, src_mask, cache, inputs)
    else:
        added = constraint.inputs(ys.device) if constraint is not None else {}
        hidden = model.decode_hidden(ys, memory, src_mask, merge_inputs(inputs, added))
        last = (ys != PAD_ID).sum(1) - 1  # BiTran: finished rows hold pads after their end
        logits = model.output(hidden[torch.arange(len(ys), device=ys.device), last])
    forced = model.cfg.architecture.target_prefix
    if step < len(forced):
        return torch.full_like(logits, float("-inf")).index_fill(-1, torch.tensor([forced[step]], device=logits.device),
                                                                 0.0)
    return logits.index_fill(-1, torch.tensor(NEVER_CHOSEN, device=logits.device), float("-inf"))


@torch.no_grad()
def greedy(model: Transformer, src: torch.Tensor, inputs: Inputs | None = None, vocab: Vocab | None = None,
           **named: torch.Tensor | None) -> list[list[int]]:
    """Most probable next token at each step; ids without BOS and the target prefix (EOS kept when produced).
    `inputs` (or by name): the source inputs of the syntax switches. A switch's decoding constraint (`vocab`
    needed: it reads the token strings) limits the tokens chosen."""
    inputs = merge_inputs(inputs, named)
    memory, src_mask = model.encode(src, inputs)
    cache = model.new_cache()
    ys = torch.full((src.shape[0], 1), BOS_ID, dtype=torch.long, device=src.device)
    done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    constraint = _constraint(model, vocab, src.shape[0])
    max_steps = _max_steps(model, src)
    for step in range(max_steps):
        logits = _next_logits(model, ys, step, memory, src_mask, cache, inputs, constraint)
        if constraint is not None:
            logits = logits.masked_fill(~constraint.mask(max_steps - step, logits.device), float("-inf"))
        next_id = logits.argmax(-1)
        next_id = torch.where(done, torch.full_like(next_id, PAD_ID), next_id)
        if constraint is not None:
            constraint.push(next_id.tolist())
        ys = torch.cat([ys, next_id[:, None]], dim=1)
        done |= next_id == EOS_ID
        if done.all():
            break
    start = 1 + len(model.cfg.architecture.target_prefix)
    return [row[start:] for row in ys.tolist()]


def length_penalty(length: int, alpha: float) -> float:
    """GNMT length penalty ((5 + n) / 6) ** alpha."""
    return ((5 + length) / 6) ** alpha


def check_beam(beam: int, vocab_size: int) -> None:
    """ValueError when a beam is larger than the model's target vocabulary (more hypotheses than the first step
    can make: memory and time spent on nothing)."""
    if beam > vocab_size:
        raise ValueError(f"--beam {beam} is larger than the model's target vocabulary ({vocab_size} pieces): "
                         f"give at most {vocab_size}")


@torch.no_grad()
def beam_search(model: Transformer, src: torch.Tensor, inputs: Inputs | None = None, beam: int = 4,
                alpha: float = 0.6, vocab: Vocab | None = None, **named: torch.Tensor | None) -> list[list[int]]:
    """Batched beam search; returns the best hypothesis per sentence by length-normalized log-probability."""
    inputs = merge_inputs(inputs, named)
    return [hyps[0][1] for hyps in beam_search_nbest(model, src, inputs, beam, alpha, 1, vocab)]


@torch.no_grad()
def beam_search_nbest(model: Transformer, src: torch.Tensor, inputs: Inputs | None = None, beam: int = 4,
                      alpha: float = 0.6, nbest: int = 1, vocab: Vocab | None = None, **named: torch.Tensor | None
                      ) -> list[list[tuple[float, list[int]]]]:
    """Batched beam search; per sentence the `nbest` (<= beam) finished hypotheses as (length-normalized
    log-probability, ids), best first. `inputs` (or by name): source inputs of the syntax switches;
    a switch's decoding constraint (`vocab` needed) limits the tokens chosen."""
    if not 1 <= nbest <= beam:
        raise ValueError(f"nbest must be between 1 and the beam size ({beam}), got {nbest}")
    check_beam(beam, model.cfg.sizes.vocab_size)
    n, k = src.shape[0], beam
    inputs = merge_inputs(inputs, named)
    memory, src_mask = model.encode(src, inputs)
    memory, src_mask = memory.repeat_interleave(k, 0), src_mask.repeat_interleave(k, 0)
    inputs = {name: value.repeat_interleave(k, 0) for name, value in inputs.items()}  # one row per hypothesis
    ys = torch.full((n * k, 1), BOS_ID, dtype=torch.long, device=src.device)
    scores = torch.full((n, k), float("-inf"), device=src.device)
    scores[:, 0] = 0.0  # one live hypothesis at the start
    finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(n)]
    max_steps = _max_steps(model, src)
    cache = model.new_cache()
    constraint = _constraint(model, vocab, n * k)
    forced = len(model.cfg.architecture.target_prefix)  # steps whose token is given: out of the length and output
    for step in range(1, max_steps + 1):
        logits = _next_logits(model, ys, step - 1, memory, src_mask, cache, inputs, constraint).float()
        if constraint is not None:
            logits = logits.masked_fill(~constraint.mask(max_steps - step + 1, logits.device), float("-inf"))
        logp = F.log_softmax(logits, dim=-1)
        size = logp.shape[-1]
        top, flat = (scores[:, :, None] + logp.view(n, k, size)).view(n, -1).topk(2 * k, dim=1)
        top_l, origin_l, token_l = top.tolist(), (flat // size).tolist(), (flat % size).tolist()
        new_rows = np.zeros((n, k), dtype=np.int64)
        new_tokens = np.full((n, k), PAD_ID, dtype=np.int64)
        new_scores = np.full((n, k), float("-inf"), dtype=np.float32)
        for b in range(n):
            new_rows[b] = b * k
            if len(finished[b]) >= k:
                continue
            live = 0
            for score, origin, token in zip(top_l[b], origin_l[b], token_l[b]):
                if score == float("-inf") or live == k:
                    break
                row = b * k + origin
                if token == EOS_ID or step == max_steps:
                    if len(finished[b]) < k:
                        finished[b].append((score / length_penalty(step - forced, alpha),
                                            ys[row, 1 + forced :].tolist() + [token]))
                else:
                    new_rows[b, live], new_tokens[b, live], new_scores[b, live] = row, token, score
                    live += 1
        if all(len(f) >= k for f in finished):
            break
        rows = torch.from_numpy(new_rows.reshape(-1)).to(src.device)
        ys = torch.cat([ys[rows], torch.from_numpy(new_tokens.reshape(-1, 1)).to(src.device)], dim=1)
        if constraint is not None:
            constraint.reorder(new_rows.reshape(-1).tolist())
            constraint.push(new_tokens.reshape(-1).tolist())
        if not model.switches.recomputes_prefix:
            model.reorder_cache(cache, rows)
        scores = torch.from_numpy(new_scores).to(src.device)
    return [sorted(f, key=lambda h: -h[0])[:nbest] if f else [(0.0, [EOS_ID])] for f in finished]
