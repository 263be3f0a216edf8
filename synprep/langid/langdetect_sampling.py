"""langdetect's detection loop (`Detector._detect_block`) over numpy, with the same decisions to the bit.

langdetect spends ~90% of a short sentence's time in `_update_lang_prob`, a Python loop over every language per
sampled n-gram. This module runs the same algorithm with the same arithmetic, vectorised over languages:
- the same random draws: langdetect re-seeds `random.Random` before every detection, so every detection reads the
  same Mersenne-Twister word stream. `WordStream` takes that stream from Python's own generator once and replays
  CPython's `gauss` and `choice` on it (one `gauss` per trial, then `choice` over the n-gram list). At start-up it
  checks itself against `random.Random`; if the running interpreter draws differently, `PythonDraws` (the real
  generator, slower) is used instead;
- the same IEEE operations in the same order: `prob[i] *= weight + p[i]` per draw (a product reduced row by row
  along axis 0, which numpy does in order), the interpreter's `sum()` of a Python list for the normalisation,
  elementwise division, and the trial average `langprob[j] += prob[j] / n_trial`.
Text cleaning and n-gram extraction stay langdetect's own code (the caller passes its n-grams). Equality with
langdetect is checked on real sentences in tests/test_langid.py and on every line of the shared corpora by
`benchmarks/bench_langid.py --exact`.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence

import numpy as np

# langdetect.detector.Detector's constants (langdetect 1.0.9)
ALPHA_DEFAULT = 0.5
ALPHA_WIDTH = 0.05
ITERATION_LIMIT = 1000
CONV_THRESHOLD = 0.99999
BASE_FREQ = 10000
N_TRIAL = 7
CHECK_EVERY = 5  # the loop normalises (and may stop) after draws 0, 5, 10, ...
_CHUNK = 1024  # words of the stream scanned at a time for accepted draws


class PythonDraws:
    """langdetect's draws from a real `random.Random` seeded as langdetect seeds it."""

    def __init__(self, seed: int | None, n: int) -> None:
        self._rng = random.Random()
        self._rng.seed(seed)
        self._n = n

    def gauss(self) -> float:
        return self._rng.gauss(0.0, 1.0)

    def take(self, count: int) -> list[int]:
        below = self._rng._randbelow  # what `choice(seq)` calls with len(seq)
        return [below(self._n) for _ in range(count)]


class WordStream:
    """The 32-bit output stream of `random.Random(seed)`, read once, and CPython's draws replayed over it."""

    def __init__(self, seed: int, words: int = 1 << 16) -> None:
        self.seed = seed
        self.words = self._read(words)

    def extend(self) -> None:
        """Double the stream (a detection that drew more than it holds; never seen on real text)."""
        self.words = self._read(2 * len(self.words))

    def _read(self, count: int) -> np.ndarray:
        """The first `count` 32-bit outputs of `random.Random(seed)`, in order (getrandbits fills low words first)."""
        bits = random.Random(self.seed).getrandbits(32 * count)
        return np.frombuffer(bits.to_bytes(4 * count, "little"), dtype="<u4").astype(np.uint64)

    def gauss_pair(self, start: int) -> tuple[float, float]:
        """CPython's `random.gauss` from the four words at `start` (two `random()` calls): the value it returns
        and the one it keeps for its next call."""
        w = self.words[start:start + 4].tolist()
        x2pi = ((w[0] >> 5) * 67108864.0 + (w[1] >> 6)) * (1.0 / 9007199254740992.0) * (2.0 * math.pi)
        g2rad = math.sqrt(-2.0 * math.log(1.0 - ((w[2] >> 5) * 67108864.0 + (w[3] >> 6)) * (1.0 / 9007199254740992.0)))
        return math.cos(x2pi) * g2rad, math.sin(x2pi) * g2rad

    def draws(self, n: int) -> StreamDraws:
        return StreamDraws(self, n)

    def agrees_with_python(self) -> bool:
        """Whether this interpreter's `gauss`/`choice` are the ones replayed (checked once at start-up)."""
        for n in (1, 2, 3, 5, 8, 100, 777, 4096):
            python, stream = PythonDraws(self.seed, n), self.draws(n)
            for count in (1, 5, 13, 2, 40):
                if python.gauss() != stream.gauss() or python.take(count) != stream.take(count).tolist():
                    return False
        return True


class StreamDraws:
    """`PythonDraws`'s interface over a `WordStream`: the same numbers, computed in bulk."""

    def __init__(self, stream: WordStream, n: int) -> None:
        self._stream, self._n = stream, n
        self._shift = np.uint64(32 - n.bit_length())  # getrandbits(k) = word >> (32 - k); _randbelow rejects >= n
        self._pos = 0  # next unread word
        self._gauss_next: float | None = None
        self._accepted = np.empty(0, dtype=np.int64)  # stream positions of accepted draws, from _pos on
        self._values = np.empty(0, dtype=np.int64)
        self._next = 0

    def gauss(self) -> float:
        z, self._gauss_next = self._gauss_next, None  # CPython's random.gauss, pair-wise with a cached second value
        if z is None:
            self._drop_accepted()
            z, self._gauss_next = self._stream.gauss_pair(self._pos)
            self._pos += 4
        return z

    def _drop_accepted(self) -> None:
        """Forget draws scanned ahead but not taken (a gauss reads the words right after the last draw)."""
        self._accepted = self._accepted[:0]
        self._values = self._values[:0]
        self._next = 0

    def _scan(self) -> None:
        start = int(self._accepted[-1]) + 1 if len(self._accepted) else self._pos
        while start + _CHUNK > len(self._stream.words):
            self._stream.extend()
        chunk = self._stream.words[start:start + _CHUNK] >> self._shift
        hits = np.flatnonzero(chunk < self._n)
        self._accepted = np.concatenate((self._accepted[self._next:], hits + start))
        self._values = np.concatenate((self._values[self._next:], chunk[hits].astype(np.int64)))
        self._next = 0

    def take(self, count: int) -> np.ndarray:
        while len(self._accepted) - self._next < count:
            self._scan()
        taken = self._values[self._next:self._next + count]
        self._next += count
        self._pos = int(self._accepted[self._next - 1]) + 1
        return taken


def _normalize(prob: np.ndarray) -> float:
    """langdetect's `_normalize_prob`: divide by the sum in place, return the largest probability."""
    total = sum(prob.tolist())  # the interpreter's float sum over a list, as langdetect's `sum(prob)`
    np.divide(prob, total, out=prob)
    return float(prob.max())


def _trial(prob: np.ndarray, weighted: np.ndarray, ids: np.ndarray, draws: PythonDraws | StreamDraws) -> None:
    """One of langdetect's trials: multiply in sampled n-gram rows until convergence or the iteration limit."""
    block = np.empty((CHECK_EVERY + 1, len(prob)))
    prob *= weighted[ids[draws.take(1)[0]]]  # draw i = 0, then the first check
    i = 0
    while _normalize(prob) <= CONV_THRESHOLD and i < ITERATION_LIMIT:
        block[0] = prob  # ((prob * w1) * w2) ... * w5: reduced along axis 0 row by row, as the Python loop does
        np.take(weighted, ids[draws.take(CHECK_EVERY)], axis=0, out=block[1:])
        np.multiply.reduce(block, axis=0, out=prob)
        i += CHECK_EVERY


def profile_table(word_lang_prob_map: Mapping[str, Sequence[float]]) -> tuple[dict[str, int], np.ndarray]:
    """langdetect's n-gram -> per-language probabilities map as a row index and one float64 matrix."""
    rows = {word: i for i, word in enumerate(word_lang_prob_map)}
    return rows, np.array(list(word_lang_prob_map.values()), dtype=np.float64)


class Sampler:
    """langdetect's `_detect_block` for one profile table and seed."""

    def __init__(self, rows: Mapping[str, int], table: np.ndarray, seed: int | None) -> None:
        self.rows, self.table, self.seed = rows, table, seed
        stream = WordStream(seed) if isinstance(seed, int) else None
        self._stream = stream if stream is not None and stream.agrees_with_python() else None

    def draws(self, n: int) -> PythonDraws | StreamDraws:
        return self._stream.draws(n) if self._stream is not None else PythonDraws(self.seed, n)

    def probabilities(self, ngrams: Sequence[str], alpha: float = ALPHA_DEFAULT) -> list[float]:
        """langdetect's `langprob` for a non-empty list of known n-grams: one probability per language."""
        index: dict[int, int] = {}
        ids = np.array([index.setdefault(self.rows[word], len(index)) for word in ngrams])
        sentence_rows = self.table[list(index)]
        n_langs = self.table.shape[1]
        draws = self.draws(len(ngrams))
        langprob = np.zeros(n_langs)
        for _ in range(N_TRIAL):
            prob = np.full(n_langs, 1.0 / n_langs)
            weighted = (alpha + draws.gauss() * ALPHA_WIDTH) / BASE_FREQ + sentence_rows
            _trial(prob, weighted, ids, draws)
            langprob += prob / N_TRIAL
        return langprob.tolist()


def _naive_sums(prob: np.ndarray) -> np.ndarray:
    """Row sums added left to right (CPython < 3.12's `sum` of floats), vectorised over rows."""
    total = prob[:, 0].copy()
    for j in range(1, prob.shape[1]):
        total += prob[:, j]
    return total


def _neumaier_sums(prob: np.ndarray) -> np.ndarray:
    """Row sums with Neumaier's compensation (CPython >= 3.12's `sum` of floats), vectorised over rows."""
    total, comp = prob[:, 0].copy(), np.zeros(len(prob))
    for j in range(1, prob.shape[1]):
        x = prob[:, j]
        t = total + x
        comp += np.where(np.abs(total) >= np.abs(x), (total - t) + x, (x - t) + total)
        total = t
    finite = (comp != 0) & np.isfinite(comp)
    return np.where(finite, total + comp, total)


def _python_sums(prob: np.ndarray) -> np.ndarray:
    return np.array([sum(row) for row in prob.tolist()])


def _pick_row_sums():  # noqa: ANN202 - one of the three functions above
    """The vectorised row sum that equals this interpreter's `sum()` on langdetect-like rows, else Python's own."""
    rng = np.random.default_rng(0)
    probe = rng.random((64, 55)) ** 8 * 10.0 ** rng.integers(-30, 0, (64, 1))
    expected = _python_sums(probe)
    for candidate in (_naive_sums, _neumaier_sums):
        if np.array_equal(candidate(probe), expected):
            return candidate
    return _python_sums


class BatchSampler:
    """`Sampler.probabilities` for many sentences at once: the same numbers, the trials run in lock-step.

    Sentence s draws from the shared word stream with its own n (the number of its n-grams); its accepted draws
    are read ahead (`MAX_DRAWS` of them). A sentence that would need more (never seen on real text: 7 trials
    stop after at most 7,007 draws but converge after tens) is computed alone by `Sampler.probabilities`.
    """

    MAX_DRAWS = 2048

    def __init__(self, sampler: Sampler) -> None:
        self.sampler = sampler
        self._row_sums = _pick_row_sums()
        self._ahead: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def _accepted(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Stream positions and values of the first MAX_DRAWS draws `_randbelow(n)` would accept."""
        if n not in self._ahead:
            stream = self.sampler._stream
            assert stream is not None
            words = stream.words[:4 * self.MAX_DRAWS + 64] >> np.uint64(32 - n.bit_length())
            positions = np.flatnonzero(words < n)[:self.MAX_DRAWS]
            if len(self._ahead) >= 1024:  # distinct n-gram counts seen; 16 KiB each
                self._ahead.clear()
            self._ahead[n] = positions.astype(np.int32), words[positions].astype(np.int32)
        return self._ahead[n]

    def probabilities(self, sentences: Sequence[Sequence[str]], alpha: float = ALPHA_DEFAULT) -> list[list[float]]:
        """`Sampler.probabilities` of each non-empty n-gram list."""
        if self.sampler._stream is None:
            return [self.sampler.probabilities(ngrams, alpha) for ngrams in sentences]
        state = _Lockstep(self, sentences)
        for _ in range(N_TRIAL):
            state.trial(alpha)
        result = (state.langprob).tolist()
        for s in np.flatnonzero(state.exhausted):
            result[s] = self.sampler.probabilities(sentences[s], alpha)
        return result


class _Lockstep:
    """The per-sentence state of one `BatchSampler.probabilities` call."""

    def __init__(self, owner: BatchSampler, sentences: Sequence[Sequence[str]]) -> None:
        self.owner = owner
        table, rows = owner.sampler.table, owner.sampler.rows
        self.n_langs = table.shape[1]
        count = len(sentences)
        # every sentence's n-gram rows, one after another (a long line costs its own length, not the batch's)
        self.first_row = np.cumsum([0] + [len(ngrams) for ngrams in sentences[:-1]])
        self.sentence_rows = np.fromiter((rows[word] for ngrams in sentences for word in ngrams), dtype=np.int64)
        self.positions = np.zeros((count, BatchSampler.MAX_DRAWS + 1), dtype=np.int32)
        self.values = np.zeros((count, BatchSampler.MAX_DRAWS + 1), dtype=np.int32)
        self.limit = np.zeros(count, dtype=np.int64)  # accepted draws read ahead per sentence
        for s, ngrams in enumerate(sentences):
            positions, values = owner._accepted(len(ngrams))
            self.positions[s, :len(positions)], self.values[s, :len(values)] = positions, values
            self.limit[s] = len(positions)
        self.word_pos = np.zeros(count, dtype=np.int64)  # next unread word of the stream
        self.gauss_next: list[float | None] = [None] * count
        self.langprob = np.zeros((count, self.n_langs))
        self.exhausted = np.zeros(count, dtype=bool)

    def _gauss(self, s: int) -> float:
        z, self.gauss_next[s] = self.gauss_next[s], None
        if z is None:
            z, self.gauss_next[s] = self.owner.sampler._stream.gauss_pair(int(self.word_pos[s]))  # type: ignore[union-attr]
            self.word_pos[s] += 4
        return z

    def trial(self, alpha: float) -> None:
        """One trial of every sentence not exhausted, in lock-step: draw 0, then blocks of five between checks."""
        live = np.flatnonzero(~self.exhausted)
        weight = np.array([(alpha + self._gauss(s) * ALPHA_WIDTH) / BASE_FREQ for s in live.tolist()])
        pointer = np.array([np.searchsorted(self.positions[s, :self.limit[s]], self.word_pos[s]) for s in live])
        prob = np.full((len(live), self.n_langs), 1.0 / self.n_langs)
        active = np.arange(len(live))
        step, i = 1, 0  # draw 0 alone, then blocks of five between checks
        while len(active):
            s = live[active]
            over = pointer[active] + step > self.limit[s]
            if over.any():
                self.exhausted[s[over]] = True
                active, s = active[~over], s[~over]
            picks = pointer[active, None] + np.arange(step)
            drawn = self.sentence_rows[self.first_row[s, None] + self.values[s[:, None], picks]]
            block = np.empty((len(active), step + 1, self.n_langs))
            block[:, 0] = prob[active]
            block[:, 1:] = self.owner.sampler.table[drawn]
            block[:, 1:] += weight[active, None, None]  # `weight + lang_prob_map[i]` (addition commutes exactly)
            updated = np.multiply.reduce(block, axis=1)  # row by row along axis 1: the Python loop's order
            pointer[active] += step
            updated /= self.owner._row_sums(updated)[:, None]
            prob[active] = updated
            done = (updated.max(axis=1) > CONV_THRESHOLD) | (i >= ITERATION_LIMIT)
            last = self.positions[s, pointer[active] - 1]
            self.word_pos[s] = last + 1
            active = active[~done]
            i += CHECK_EVERY
            step = CHECK_EVERY
        finished = ~self.exhausted[live]
        self.langprob[live[finished]] += prob[finished] / N_TRIAL
