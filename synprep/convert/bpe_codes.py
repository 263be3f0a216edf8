"""`synprep convert`, phase 2: BPE codes learned on the train split's word counts (or the given codes).

The phase-1 workers counted the words of each train piece (in the piece's .json); the counts are merged in input
order and learned from at once (`bpe_learn.learn_joint_from_counts`: subword-nmt's codes and vocabularies, same
bytes): joint codes -> OUT/codes.bpe, or with `[bpe] joint = false` each side's codes on its own words ->
OUT/codes.{src,tgt}.bpe, and the vocabularies OUT/vocab.{src,tgt}. Codes already learned by the run being
resumed are kept. The learning runs in a process of its own (`apart`): what it holds grows with the vocabulary.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import signal
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ..bpe import read_vocabulary
from ..bpe_learn import learn_joint_from_counts
from ..errors import InputError
from ..processes import main_not_imported
from ..subwords import registry

if TYPE_CHECKING:
    from .pipeline import BpeConfig

SideCodes = tuple[str | None, str | None]  # per side: a codes file (the joint file twice when joint) or None
SideVocabularies = tuple[frozenset[str] | None, frozenset[str] | None]
T = TypeVar("T")


def learns_bpe(bpe: BpeConfig) -> bool:
    """Whether the convert learns codes or a scheme's model (so phase 1 counts the train words)."""
    scheme = registry.get(bpe.scheme)
    if not scheme.bpe_codes:
        return scheme.learns and bpe.model is None
    return not bpe.codes and bool(bpe.symbols)


def train_counts(count_files: list[str]) -> list[Counter[str]]:
    """Each side's word counts of the train tokens: the workers' counts (the pieces' .json files), merged in
    input order as read."""
    per_side: list[Counter[str]] = [Counter(), Counter()]
    for path in count_files:
        with open(path, encoding="utf-8") as handle:
            info = json.load(handle)
        if "src_counts" not in info:
            raise InputError("the work folder was made by an older synprep (no word counts): run again "
                             "with --overwrite", path)
        per_side[0].update(info["src_counts"])
        per_side[1].update(info["tgt_counts"])
    return per_side


def _count_files(work: str, train_pieces: list[tuple[int, int]] | None) -> list[str]:
    """The train pieces' .json files (their word counts), in input order."""
    from .inputs import piece_prefix

    if train_pieces is None:
        raise InputError("[bpe] learning codes or a model needs a train split (or give [bpe] codes or model)")
    return [piece_prefix(work, shard, piece) + ".json" for shard, piece in train_pieces]


def _learn(count_files: list[str], side: int | None, codes: str, symbols: int, vocab_paths: list[str],
           min_frequency: int, verbose: bool, where: str) -> None:
    """Codes learned on the train words of both sides (`side` None) or of one side, into `codes`. Run by
    `apart`: this module imports nothing heavy (no pyarrow), so that the learner starts small."""
    per_side = train_counts(count_files)
    inputs = per_side if side is None else [per_side[side]]
    del per_side
    learn_joint_from_counts(inputs, codes + ".tmp", symbols, vocab_paths, min_frequency, verbose=verbose,
                            where=where)
    os.replace(codes + ".tmp", codes)


def apart(func: Callable[..., T], *args: Any) -> T:
    """`func(*args)` in a fresh process (spawned: it shares no pages with this one), its exceptions raised
    here. Learning BPE holds every distinct word of the train split several times over; in a process of its own
    that memory goes back to the system when it ends, instead of staying in the driver (freed Python objects
    keep their arenas) and being counted again in every worker it forks next. A pipe, not a pool: a pool's
    semaphores, left behind by Ctrl-C, make the resource tracker warn after the driver's last line."""
    context = multiprocessing.get_context("spawn")
    receive, send = context.Pipe(duplex=False)
    process = context.Process(target=_answer, args=(send, func, args), daemon=True)
    with main_not_imported():  # `func` is this package's: any script may call this, guarded or not
        process.start()
    send.close()
    try:
        ok, value = receive.recv()
    except EOFError:  # killed (out of memory, kill -9): no answer
        process.join()
        raise InputError(f"the process learning BPE ended without its result (exit code {process.exitcode})",
                         ) from None
    except BaseException:  # Ctrl-C here: stop it too (only then: a process that answered ends by itself, and
        process.terminate()  # a SIGTERM in its interpreter's shutdown printed a traceback)
        raise
    finally:
        receive.close()
        process.join()
    if not ok:
        raise value
    return value


def _answer(send: Any, func: Callable, args: tuple) -> None:
    """`apart`'s process: the result or the exception, sent back once."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the driver stops this one
    signal.signal(signal.SIGTERM, _exit)  # ... by SIGTERM: exit cleanly (tqdm's lock is a semaphore to release)
    try:
        result = (True, func(*args))
    except Exception as err:  # raised again in the driver
        result = (False, err)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the work is done: a late SIGTERM just ends the process
    send.send(result)
    send.close()


def _exit(*_: Any) -> None:
    raise SystemExit(1)


def learn_codes(bpe: BpeConfig, out: str, work: str, train_pieces: list[tuple[int, int]] | None,
                say: Callable[[str], None], verbose: bool) -> tuple[SideCodes, SideVocabularies]:
    """Each side's codes (the joint file twice when joint; learned now unless given or already learned by
    the run being resumed) and, with a vocabulary threshold, each side's vocabulary."""
    from .inputs import SIDES  # here, not at the top: see _learn

    if not registry.get(bpe.scheme).bpe_codes:
        return scheme_models(bpe, out, work, train_pieces, say), (None, None)
    if bpe.codes or not bpe.symbols:
        return (bpe.side_codes("src"), bpe.side_codes("tgt")), (None, None)
    where = os.path.join(work, "train")
    vocab_paths = [os.path.join(out, f"vocab.{side}") for side in SIDES]
    if bpe.joint:
        codes = os.path.join(out, "codes.bpe")
        if not os.path.isfile(codes):
            say(f"learn joint BPE: {bpe.symbols} merges on the train tokens (the codes subword-nmt learns)")
            apart(_learn, _count_files(where, train_pieces), None, codes, bpe.symbols, vocab_paths,
                  bpe.min_frequency, verbose, where)
        side_codes: SideCodes = (codes, codes)
    else:
        paths = [os.path.join(out, f"codes.{side}.bpe") for side in SIDES]
        for index, side in enumerate(SIDES):  # each side's codes on its own words only
            if os.path.isfile(paths[index]):
                continue
            symbols = bpe.side_symbols(side)
            say(f"learn {side} BPE: {symbols} merges on the {side} train tokens")
            apart(_learn, _count_files(where, train_pieces), index, paths[index], symbols, [vocab_paths[index]],
                  bpe.min_frequency, verbose, f"{where} ({side})")
        side_codes = (paths[0], paths[1])
    if not bpe.vocabulary_threshold:
        return side_codes, (None, None)
    src, tgt = (frozenset(read_vocabulary(path, bpe.vocabulary_threshold)) for path in vocab_paths)
    return side_codes, (src, tgt)


def _learn_model(count_files: list[str], side: int | None, model: str, bpe: BpeConfig) -> None:
    """A scheme's model learned on the train tokens of both sides (`side` None) or of one side (`Scheme.learn`).
    Run by `apart`, as `_learn`."""
    from ..subwords.load import scheme_module

    per_side = train_counts(count_files)
    scheme_module(bpe.scheme)  # its library checked: a one-line error without it
    registry.get(bpe.scheme).learn(per_side if side is None else [per_side[side]], model + ".tmp", bpe)
    os.replace(model + ".tmp", model)


def scheme_models(bpe: BpeConfig, out: str, work: str, train_pieces: list[tuple[int, int]] | None,
                  say: Callable[[str], None]) -> SideCodes:
    """Each side's model of a scheme other than BPE codes in the output folder (the joint file twice when joint):
    the given model copied there, or a model learned on the train tokens (kept when the run being resumed learned
    it already); (None, None) for a scheme without a model file."""
    from .inputs import SIDES

    scheme = registry.get(bpe.scheme)
    if not scheme.files:
        return None, None
    names = [scheme.model_file(None if bpe.joint else side) for side in SIDES]
    paths = [os.path.join(out, name) for name in names if name]
    for index, side in enumerate(SIDES):
        if os.path.isfile(paths[index]):
            continue
        given = bpe.side_model(side)
        if given:
            stored = scheme.stored_files(given, None if bpe.joint else side)
            for source, name in stored[1:] + stored[:1]:  # the file `load` reads last: its presence means done
                shutil.copyfile(source, os.path.join(out, name) + ".tmp")
                os.replace(os.path.join(out, name) + ".tmp", os.path.join(out, name))
            continue
        which = "both sides'" if bpe.joint else f"the {side}"
        say(scheme.learn_message(bpe, which))
        apart(_learn_model, _count_files(os.path.join(work, "train"), train_pieces), None if bpe.joint else index,
              paths[index], bpe)
    return paths[0], paths[1]
