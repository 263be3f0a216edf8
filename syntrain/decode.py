"""Decoding (greedy, beam search), post-processing (de-BPE, detokenize) and scoring (sacrebleu BLEU, chrF).

Beam search follows the paper: beam 4, GNMT length penalty lp(n) = ((5 + n) / 6) ** alpha with alpha = 0.6,
a hypothesis is final when it emits EOS, a sentence is done when it has `beam` final hypotheses (fairseq's
criterion). Post-processing joins pieces, removes the BPE marker ("@@ ") and detokenizes with sacremoses
(Moses rules for the target language); without sacremoses, a simple fallback removes the space before
closing punctuation and after opening brackets.

Switches may constrain decoding (`Switch.constraint`: the allowed next tokens, and inputs a decoder pass over
the whole prefix reads), lengthen the outputs (`output_length_factor`), turn off the incremental cache
(`recomputes_prefix`: the decoder re-runs over the whole prefix at every step, O(T^2) per sentence) and drop
pieces of an output that are not text before de-BPE (`DecodedOutputs.text`). Tree decoding does all four
(syntrain.switches.tree, docs/tree-decoding.md).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from .dataset import ParallelData
from .model import Transformer
from .switches import DecodedOutputs, Inputs, decoded, merge_inputs
from .vocab import BOS_ID, EOS_ID, PAD_ID, Vocab, pieces_joiner


def _max_steps(model: Transformer, src: torch.Tensor) -> int:
    factor = max([1.5] + [switch.output_length_factor for switch in model.switches])
    return min(model.cfg.sizes.max_len - 1, int(src.shape[1] * factor) + 10)


def _constraint(model: Transformer, vocab: Vocab | None, rows: int) -> Any:
    """The decoding constraint of a switch (see `Switch.constraint`), or None."""
    return next((made for switch in model.switches if (made := switch.constraint(vocab, rows)) is not None), None)


def _next_logits(model: Transformer, ys: torch.Tensor, step: int, memory: torch.Tensor, src_mask: torch.Tensor,
                 cache: list[dict], inputs: Inputs, constraint: Any) -> torch.Tensor:
    """Logits (N, V) for the token after `ys` (N, step + 1): incremental, or the whole prefix again."""
    if not model.cfg.recomputes_prefix:
        return model.decode_step(ys[:, -1:], step, memory, src_mask, cache, inputs)
    added = constraint.inputs(ys.device) if constraint is not None else {}
    hidden = model.decode_hidden(ys, memory, src_mask, merge_inputs(inputs, added))
    last = (ys != PAD_ID).sum(1) - 1  # BiTran: finished rows hold pads after their end
    return model.output(hidden[torch.arange(len(ys), device=ys.device), last])


@torch.no_grad()
def greedy(model: Transformer, src: torch.Tensor, inputs: Inputs | None = None, vocab: Vocab | None = None,
           **named: torch.Tensor | None) -> list[list[int]]:
    """Most probable next token at each step; ids without BOS (EOS kept when produced). `inputs` (or by
    name): the source inputs of the syntax switches. A switch's decoding constraint
    (`vocab` needed: it reads the token strings) limits the tokens chosen."""
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
    return [row[1:] for row in ys.tolist()]


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
    for step in range(1, max_steps + 1):
        logits = _next_logits(model, ys, step - 1, memory, src_mask, cache, inputs, constraint).float()
        if constraint is not None:
            logits = logits.masked_fill(~constraint.mask(max_steps - step + 1, logits.device), float("-inf"))
        logp = F.log_softmax(logits, dim=-1)
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
        if constraint is not None:
            constraint.reorder(new_rows.reshape(-1).tolist())
            constraint.push(new_tokens.reshape(-1).tolist())
        if not model.cfg.recomputes_prefix:
            model.reorder_cache(cache, rows)
        scores = torch.from_numpy(new_scores).to(src.device)
    return [sorted(f, key=lambda h: -h[0])[:nbest] if f else [(0.0, [EOS_ID])] for f in finished]


def _text(outputs: list[DecodedOutputs], pieces: list[str]) -> list[str]:
    """The pieces of an output that are text (each switch's `DecodedOutputs.text`)."""
    for switch_outputs in outputs:
        pieces = switch_outputs.text(pieces)
    return pieces


def _simple_detokenize(tokens: Sequence[str]) -> str:
    text = " ".join(tokens)
    text = re.sub(r" ([.,!?;:%)\]}])", r"\1", text)
    return re.sub(r"([(\[{]) ", r"\1", text)


def detokenizer(lang: str):  # noqa: ANN201 (returns a callable)
    """A function tokens -> text: for languages written without spaces (ja, zh, ...) the rule of
    `synprep.languages.detokenize`; else sacremoses for `lang` when installed, else the simple fallback."""
    from synprep.languages import UNSPACED, detokenize

    if lang in UNSPACED:
        return lambda tokens: detokenize(tokens, lang)
    try:
        from sacremoses import MosesDetokenizer
    except ImportError:
        return _simple_detokenize
    moses = MosesDetokenizer(lang=lang or "en")
    return lambda tokens: moses.detokenize(list(tokens))


@torch.no_grad()
def translate(model: Transformer, data: ParallelData, vocab: Vocab, beam: int = 4, alpha: float = 0.6,
              max_tokens: int = 4096, rows: Sequence[int] | None = None, device: str | torch.device = "cpu",
              progress: bool | str = False, pieces: list[list[str]] | None = None) -> list[str]:
    """Detokenized translations of `rows` (default: all) of a split, in row order; `progress` (True, or the
    label of the lines): a bar of sentences on stderr when it is a terminal, else a line at the progress interval
    (`synprep.progress`); `pieces` (a list) gets each row's output pieces (also those that are not text: see
    `DecodedOutputs.text`)."""
    return [hyps[0][1] for hyps in translate_nbest(model, data, vocab, beam, alpha, max_tokens, rows, device,
                                                   0, progress, pieces)]


@torch.no_grad()
def translate_nbest(model: Transformer, data: ParallelData, vocab: Vocab, beam: int = 4, alpha: float = 0.6,
                    max_tokens: int = 4096, rows: Sequence[int] | None = None, device: str | torch.device = "cpu",
                    nbest: int = 1, progress: bool | str = False, pieces: list[list[str]] | None = None
                    ) -> list[list[tuple[float, str]]]:
    """Per row (default: all, in row order) the `nbest` detokenized translations with their length-normalized
    log-probabilities, best first (beam search). nbest = 0: only the best, greedy when beam = 1 (score 0.0).
    A row whose source is longer than the model's positions (`max_len`) is not decoded: an empty list.
    `pieces` (a list) gets the best output's pieces per row (also those that are not text)."""
    from synprep.progress import progress as counter

    model.eval()
    rows = np.asarray(data.keep if rows is None else rows)
    position = {int(r): i for i, r in enumerate(rows)}
    out: list[list[tuple[float, str]]] = [[] for _ in rows]
    best: list[list[str]] = [[] for _ in rows]
    detok, texts = detokenizer(data.tgt_lang), decoded(model.switches)
    debpe = pieces_joiner(data.configuration, data.path)
    label = progress if isinstance(progress, str) else "translating"
    bar = counter(label, len(rows), "sent", shown=None if progress else False)
    fits = rows[data.src_len[rows] <= model.cfg.sizes.max_len] if len(rows) else rows
    bar.update(len(rows) - len(fits))
    for batch_rows in data.batches(max_tokens, shuffle=False, rows=fits):
        batch = data.collate(batch_rows).to(device)
        inputs = batch.decoding_inputs()
        if nbest or beam > 1:
            hyps = beam_search_nbest(model, batch.src, inputs, beam, alpha, max(nbest, 1), vocab)
        else:
            hyps = [[(0.0, ids)] for ids in greedy(model, batch.src, inputs, vocab)]
        for row, ranked in zip(batch_rows, hyps):
            out[position[int(row)]] = [(score, detok(debpe(_text(texts, vocab.decode(ids))))) for score, ids in ranked]
            best[position[int(row)]] = vocab.decode(ranked[0][1])
        bar.update(len(batch_rows))
    bar.close()
    if pieces is not None:
        pieces[:] = best
    return out


@dataclass(frozen=True)
class DecodeSettings:
    """What a split's hypotheses depend on besides the checkpoint and the split: the beam (1 = greedy), the
    length penalty (alpha), the batches (`max_tokens`: a sentence's output may end at a length set by the longest
    source of its batch, and other batch shapes round differently) and the torch CPU threads (0: torch's default;
    other thread counts sum in another order). The run's final test, `syntrain eval`, `syntrain compare` and
    `syntrain translate` decode with these, by default the run's own (`run_settings`)."""

    beam: int = 4
    length_penalty: float = 0.6
    max_tokens: int = 4096
    threads: int = 0

    def key(self, device: str | torch.device = "cpu") -> dict:
        """The settings as recorded beside hypotheses: threads as torch uses them here, and the device."""
        threads = self.threads or torch.get_num_threads()
        return {**asdict(self), "threads": threads, "device": torch.device(device).type}

    def apply(self) -> None:
        """Set torch's CPU threads (when `threads` is not 0)."""
        if self.threads:
            torch.set_num_threads(self.threads)


def run_settings(train_config: Any, beam: int | None = None, length_penalty: float | None = None,
                 max_tokens: int | None = None, threads: int | None = None) -> DecodeSettings:
    """The decoding settings of a run's final test (its [train] `test_beam`, `length_penalty`, `max_tokens`,
    `threads`), each replaced by the value given (not None)."""
    own = DecodeSettings(train_config.test_beam, train_config.length_penalty, train_config.max_tokens,
                         train_config.threads)
    given = {"beam": beam, "length_penalty": length_penalty, "max_tokens": max_tokens, "threads": threads}
    return replace(own, **{name: value for name, value in given.items() if value is not None})


def settings_text(key: dict) -> str:
    """Decoding settings (`DecodeSettings.key`) in words, for a log line."""
    return (f"beam {key['beam']}, length penalty {key['length_penalty']:g}, max_tokens {key['max_tokens']}, "
            f"{key['threads']} thread(s) on {key['device']}")


def decode_split(model: Transformer, data: ParallelData, vocab: Vocab, settings: DecodeSettings,
                 rows: Sequence[int] | None = None, device: str | torch.device = "cpu", progress: bool | str = False,
                 pieces: list[list[str]] | None = None) -> list[str]:
    """`translate` with `settings` (threads set first): the one way a split is decoded for its scores."""
    settings.apply()
    return translate(model, data, vocab, settings.beam, settings.length_penalty, settings.max_tokens, rows, device,
                     progress, pieces)


def bleu_tokenizer(lang: str, tokenize: str = "auto") -> str:
    """The sacrebleu tokenizer name: `tokenize`, or with 'auto' the one for target language `lang`."""
    from synprep.languages import bleu_tokenize

    return bleu_tokenize(lang) if tokenize == "auto" else tokenize


def bleu_metric(lang: str, tokenize: str = "auto"):  # noqa: ANN201 (a sacrebleu BLEU)
    """sacrebleu's BLEU with the tokenizer for target language `lang` (`ja-mecab` for ja, `zh` for zh, `13a`
    otherwise) unless `tokenize` names one; ValueError naming what to install when it is missing."""
    from sacrebleu.metrics import BLEU

    name = bleu_tokenizer(lang, tokenize)
    try:
        return BLEU(tokenize=name)
    except (ImportError, RuntimeError) as err:  # ja-mecab without mecab-python3 / ipadic
        raise ValueError(f"BLEU tokenizer {name} needs more packages (pip install 'sacrebleu[ja]'): {err}") from None


def score(hypotheses: Sequence[str], references: Sequence[str], lang: str = "", tokenize: str = "auto") -> dict:
    """Corpus BLEU (tokenizer from the target language `lang` or `tokenize`, mixed case) and chrF with their
    signatures."""
    from sacrebleu.metrics import CHRF

    bleu, chrf = bleu_metric(lang, tokenize), CHRF()
    b = bleu.corpus_score(list(hypotheses), [list(references)])
    c = chrf.corpus_score(list(hypotheses), [list(references)])
    return {"bleu": round(b.score, 2), "chrf": round(c.score, 2), "bleu_signature": str(bleu.get_signature()),
            "chrf_signature": str(chrf.get_signature())}
