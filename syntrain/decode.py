"""Decoding (greedy, beam search), post-processing (de-BPE, detokenize) and scoring (sacrebleu BLEU, chrF).

Beam search follows the paper: beam 4, GNMT length penalty lp(n) = ((5 + n) / 6) ** alpha with alpha = 0.6,
a hypothesis is final when it emits EOS, a sentence is done when it has `beam` final hypotheses (fairseq's
criterion). Post-processing joins pieces, removes the BPE marker ("@@ ") and detokenizes with sacremoses
(Moses rules for the target language); without sacremoses, a simple fallback removes the space before
closing punctuation and after opening brackets.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from .data import BOS_ID, EOS_ID, PAD_ID, ParallelData, Vocab
from .model import Transformer


def _max_steps(model: Transformer, src: torch.Tensor) -> int:
    return min(model.cfg.max_len - 1, int(src.shape[1] * 1.5) + 10)


@torch.no_grad()
def greedy(model: Transformer, src: torch.Tensor, parent: torch.Tensor | None = None,
           distances: torch.Tensor | None = None, labels: torch.Tensor | None = None) -> list[list[int]]:
    """Most probable next token at each step; ids without BOS (EOS kept when produced)."""
    memory, src_mask = model.encode(src, parent, labels)
    cache = model.new_cache()
    ys = torch.full((src.shape[0], 1), BOS_ID, dtype=torch.long, device=src.device)
    done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    for step in range(_max_steps(model, src)):
        next_id = model.decode_step(ys[:, -1:], step, memory, src_mask, cache, distances).argmax(-1)
        next_id = torch.where(done, torch.full_like(next_id, PAD_ID), next_id)
        ys = torch.cat([ys, next_id[:, None]], dim=1)
        done |= next_id == EOS_ID
        if done.all():
            break
    return [row[1:] for row in ys.tolist()]


def length_penalty(length: int, alpha: float) -> float:
    """GNMT length penalty ((5 + n) / 6) ** alpha."""
    return ((5 + length) / 6) ** alpha


@torch.no_grad()
def beam_search(model: Transformer, src: torch.Tensor, parent: torch.Tensor | None = None, beam: int = 4,
                alpha: float = 0.6, distances: torch.Tensor | None = None, labels: torch.Tensor | None = None
                ) -> list[list[int]]:
    """Batched beam search; returns the best hypothesis per sentence by length-normalized log-probability."""
    return [hyps[0][1] for hyps in beam_search_nbest(model, src, parent, beam, alpha, 1, distances, labels)]


@torch.no_grad()
def beam_search_nbest(model: Transformer, src: torch.Tensor, parent: torch.Tensor | None = None, beam: int = 4,
                      alpha: float = 0.6, nbest: int = 1, distances: torch.Tensor | None = None,
                      labels: torch.Tensor | None = None) -> list[list[tuple[float, list[int]]]]:
    """Batched beam search; per sentence the `nbest` (<= beam) finished hypotheses as (length-normalized
    log-probability, ids), best first. `distances`, `labels`: source features of the syntax switches."""
    if not 1 <= nbest <= beam:
        raise ValueError(f"nbest must be between 1 and the beam size ({beam}), got {nbest}")
    n, k = src.shape[0], beam
    memory, src_mask = model.encode(src, parent, labels)
    memory, src_mask = memory.repeat_interleave(k, 0), src_mask.repeat_interleave(k, 0)
    if distances is not None:
        distances = distances.repeat_interleave(k, 0)
    ys = torch.full((n * k, 1), BOS_ID, dtype=torch.long, device=src.device)
    scores = torch.full((n, k), float("-inf"), device=src.device)
    scores[:, 0] = 0.0  # one live hypothesis at the start
    finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(n)]
    max_steps = _max_steps(model, src)
    cache = model.new_cache()
    for step in range(1, max_steps + 1):
        logp = F.log_softmax(model.decode_step(ys[:, -1:], step - 1, memory, src_mask, cache, distances).float(),
                             dim=-1)
        vocab = logp.shape[-1]
        top, flat = (scores[:, :, None] + logp.view(n, k, vocab)).view(n, -1).topk(2 * k, dim=1)
        top_l, origin_l, token_l = top.tolist(), (flat // vocab).tolist(), (flat % vocab).tolist()
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
                        finished[b].append((score / length_penalty(step, alpha), ys[row, 1:].tolist() + [token]))
                else:
                    new_rows[b, live], new_tokens[b, live], new_scores[b, live] = row, token, score
                    live += 1
        if all(len(f) >= k for f in finished):
            break
        rows = torch.from_numpy(new_rows.reshape(-1)).to(src.device)
        ys = torch.cat([ys[rows], torch.from_numpy(new_tokens.reshape(-1, 1)).to(src.device)], dim=1)
        model.reorder_cache(cache, rows)
        scores = torch.from_numpy(new_scores).to(src.device)
    return [sorted(f, key=lambda h: -h[0])[:nbest] if f else [(0.0, [EOS_ID])] for f in finished]


def debpe(pieces: Sequence[str]) -> list[str]:
    """BPE pieces -> tokens (subword-nmt's "@@ " continuation marker removed)."""
    return re.sub(r"@@( |$)", "", " ".join(pieces)).split()


def _simple_detokenize(tokens: Sequence[str]) -> str:
    text = " ".join(tokens)
    text = re.sub(r" ([.,!?;:%)\]}])", r"\1", text)
    return re.sub(r"([(\[{]) ", r"\1", text)


def detokenizer(lang: str):  # noqa: ANN201 (returns a callable)
    """A function tokens -> text: sacremoses for `lang` when installed, else the simple fallback."""
    try:
        from sacremoses import MosesDetokenizer
    except ImportError:
        return _simple_detokenize
    moses = MosesDetokenizer(lang=lang or "en")
    return lambda tokens: moses.detokenize(list(tokens))


@torch.no_grad()
def translate(model: Transformer, data: ParallelData, vocab: Vocab, beam: int = 4, alpha: float = 0.6,
              max_tokens: int = 4096, rows: Sequence[int] | None = None, device: str | torch.device = "cpu",
              progress: bool = False) -> list[str]:
    """Detokenized translations of `rows` (default: all) of a split, in row order; `progress`: a tqdm bar
    (sentences) on stderr when it is a terminal."""
    return [hyps[0][1] for hyps in translate_nbest(model, data, vocab, beam, alpha, max_tokens, rows, device,
                                                   0, progress)]


@torch.no_grad()
def translate_nbest(model: Transformer, data: ParallelData, vocab: Vocab, beam: int = 4, alpha: float = 0.6,
                    max_tokens: int = 4096, rows: Sequence[int] | None = None, device: str | torch.device = "cpu",
                    nbest: int = 1, progress: bool = False) -> list[list[tuple[float, str]]]:
    """Per row (default: all, in row order) the `nbest` detokenized translations with their length-normalized
    log-probabilities, best first (beam search). nbest = 0: only the best, greedy when beam = 1 (score 0.0).
    A row whose source is longer than the model's positions (`max_len`) is not decoded: an empty list."""
    from tqdm import tqdm

    model.eval()
    rows = np.asarray(data.keep if rows is None else rows)
    position = {int(r): i for i, r in enumerate(rows)}
    out: list[list[tuple[float, str]]] = [[] for _ in rows]
    detok = detokenizer(data.tgt_lang)
    bar = tqdm(total=len(rows), unit="sent", desc="translating", disable=not (progress and sys.stderr.isatty()),
               file=sys.stderr)
    fits = rows[data.src_len[rows] <= model.cfg.max_len] if len(rows) else rows
    bar.update(len(rows) - len(fits))
    for batch_rows in data.batches(max_tokens, shuffle=False, rows=fits):
        batch = data.collate(batch_rows).to(device)
        parent = batch.parent if any(layer.attn.pascal_heads for layer in model.encoder) else None
        if nbest or beam > 1:
            hyps = beam_search_nbest(model, batch.src, parent, beam, alpha, max(nbest, 1), batch.distances,
                                     batch.labels)
        else:
            hyps = [[(0.0, ids)] for ids in greedy(model, batch.src, parent, batch.distances, batch.labels)]
        for row, ranked in zip(batch_rows, hyps):
            out[position[int(row)]] = [(score, detok(debpe(vocab.decode(ids)))) for score, ids in ranked]
        bar.update(len(batch_rows))
    bar.close()
    return out


def score(hypotheses: Sequence[str], references: Sequence[str]) -> dict:
    """Corpus BLEU and chrF (sacrebleu defaults: 13a tokenization, mixed case) with their signatures."""
    from sacrebleu.metrics import BLEU, CHRF

    bleu, chrf = BLEU(), CHRF()
    b = bleu.corpus_score(list(hypotheses), [list(references)])
    c = chrf.corpus_score(list(hypotheses), [list(references)])
    return {"bleu": round(b.score, 2), "chrf": round(c.score, 2), "bleu_signature": str(bleu.get_signature()),
            "chrf_signature": str(chrf.get_signature())}
