"""What `syntrain compare` checks before it lets a p value stand: runs grouped into systems (the runs of one
configuration that differ only in their seed, budget or machine), a degeneracy check of each run's output, and a
significance test between systems that resamples both the test sentences and each system's seeds.

Degenerate output (`degeneracy`): BLEU below BLEU_FLOOR, empty output on more than EMPTY_SHARE of the lines,
repeated words (one word at least half of a line of 4 words or more) on more than REPEAT_SHARE of the lines, or
one output line on more than SAME_LINE_SHARE of the lines (5 lines or more).

The systems test (`seed_bootstrap`): in each of `samples` resamples, the test sentences are drawn with
replacement (the same draw for every system: paired), and for each system as many runs as it has are drawn with
replacement from its runs; a system's resampled score is the mean of its drawn runs' corpus scores on the drawn
sentences. p = (1 + the resamples whose absolute difference from the baseline system, centred on the mean
resampled difference, is larger than the observed difference of the means) / (samples + 1): sacrebleu's paired
bootstrap when each system has one run, and wider when a system's seeds disagree.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

BLEU_FLOOR = 1.0  # BLEU below this: the output is not a translation of the test set
EMPTY_SHARE = 0.1
REPEAT_SHARE = 0.2
SAME_LINE_SHARE = 0.2
SEED = 12345  # the resampling's seed (sacrebleu's default)
# [train] fields that do not make another system: where the run is written, how it is watched, its seed, its
# budget (unequal budgets are flagged instead) and what only changes speed or the final test's decoding
NOT_SYSTEM = ("out", "overwrite", "name", "resume", "bundle", "seed", "max_steps", "max_minutes", "threads", "device",
              "log_interval", "keep_last", "tensorboard", "verify_shards", "compile", "attention", "shape_ladder",
              "valid", "test", "eval_sentences", "eval_beam", "test_beam", "length_penalty", "bleu_tokenize")


def system_key(model_config: dict, train_config: dict) -> str:
    """A short digest of what makes a run's system: its model configuration and the [train] fields that change
    what is learned (all but NOT_SYSTEM)."""
    kept = {name: value for name, value in train_config.items() if name not in NOT_SYSTEM}
    text = json.dumps({"model": model_config, "train": kept}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def _repetitive(line: str) -> bool:
    words = line.split()
    return len(words) >= 4 and 2 * Counter(words).most_common(1)[0][1] >= len(words)


def degeneracy(hyps: Sequence[str], bleu: float) -> list[str]:
    """Why a run's output on a test set is degenerate, in words ([] when it is not): see the module."""
    lines = max(len(hyps), 1)
    flags = [f"BLEU {bleu:.2f} below the floor {BLEU_FLOOR:g}"] if bleu < BLEU_FLOOR else []
    empty = sum(not hyp.strip() for hyp in hyps)
    if empty > EMPTY_SHARE * lines:
        flags.append(f"empty output on {100 * empty / lines:.0f}% of lines")
    repeated = sum(map(_repetitive, hyps))
    if repeated > REPEAT_SHARE * lines:
        flags.append(f"repeated words on {100 * repeated / lines:.0f}% of lines")
    common = Counter(hyp for hyp in hyps if hyp.strip()).most_common(1)
    if len(hyps) >= 5 and common and common[0][1] > SAME_LINE_SHARE * lines:
        flags.append(f"one output line on {100 * common[0][1] / lines:.0f}% of lines")
    return flags


def group_runs(keys: Sequence[str]) -> list[list[int]]:
    """Run positions grouped by system key, in the order each system first appears."""
    groups: dict[str, list[int]] = {}
    for i, key in enumerate(keys):
        groups.setdefault(key, []).append(i)
    return list(groups.values())


def spread(values: Sequence[float]) -> float | None:
    """The sample standard deviation (None for fewer than two values)."""
    return float(np.std(values, ddof=1)) if len(values) > 1 else None


def seed_bootstrap(metric: Any, systems: Sequence[Sequence[list[str]]], references: Sequence[str],
                   samples: int = 1000) -> list[dict]:
    """Per system (a list of runs' hypotheses) {mean, spread, scores, p}: its runs' corpus scores under
    sacrebleu `metric`, their mean and spread, and against the first system the p value of the resampling of
    sentences and seeds described in the module (None for the first system, and for a system whose every run
    has the first system's hypotheses)."""
    refs = [list(references)]
    stats = [[np.array(metric._extract_corpus_statistics(hyps, refs), dtype="float64") for hyps in runs]
             for runs in systems]
    scores = [[metric._compute_score_from_stats(s.sum(0)).score for s in runs] for runs in stats]
    rng = np.random.default_rng(SEED)
    n = len(references)
    resampled = np.zeros((len(systems), samples))
    for k in range(samples):
        rows = rng.integers(0, n, n)
        for s, runs in enumerate(stats):
            drawn = rng.integers(0, len(runs), len(runs))
            resampled[s, k] = np.mean([metric._compute_score_from_stats(runs[r][rows].sum(0)).score for r in drawn])
    results = []
    for s, runs in enumerate(systems):
        observed = abs(float(np.mean(scores[s])) - float(np.mean(scores[0])))
        same = s > 0 and all(hyps == systems[0][0] for hyps in list(runs) + list(systems[0]))
        p = None
        if s > 0 and not same:
            differences = np.abs(resampled[s] - resampled[0])
            p = (int(np.sum(differences - differences.mean() > observed)) + 1) / (samples + 1)
        results.append({"mean": float(np.mean(scores[s])), "spread": spread(scores[s]), "scores": scores[s],
                        "p": p})
    return results
