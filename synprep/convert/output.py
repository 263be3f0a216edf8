"""`synprep convert`'s output folder: made fresh, continued (`--resume`) or started again (`--overwrite`).

OUT/.work/config.json records the configuration's fingerprint and the inputs' sizes and hashes: `--resume`
refuses another configuration or changed inputs. OUT/run.json is written last (workers, engine, timings, the
fingerprint): with the work folder gone, the output is finished. Every file is written under a temporary name
and renamed when complete, so what an interrupted run leaves is either complete or named as temporary.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from typing import Any

from ..errors import InputError
from ..options import PATHS
from ..outputs import run_files
from ..shards import LOCK, MANIFEST, write_paths
from ..textio import atomic_write, file_sha256
from .inputs import dependency_digests, input_fingerprints
from .pipeline import PipelineConfig

MADE = "made.json"  # in OUT/.work: what convert learned into OUT, with digests (`check_made_files`)
RUN_INFO = "run.json"  # at OUT: written last (workers, engine, timings, the configuration's fingerprint)
REMOVING = ".removing"  # OUT/.work is renamed to OUT/.work.removing, then removed


def fingerprint(config: PipelineConfig) -> str:
    """The configuration's fingerprint: a resumed run must have the same."""
    return hashlib.sha256(json.dumps(config.fingerprint_dict(), sort_keys=True).encode()).hexdigest()


def _check_same_run(config: PipelineConfig, marker: str) -> None:
    """--resume: refuse another configuration, or inputs that changed since the interrupted run (the splits
    would mix two corpora)."""
    with open(marker, encoding="utf-8") as handle:
        previous = json.load(handle)
    if previous.get("fingerprint") != fingerprint(config):
        raise InputError("--resume: this output was made with a different configuration "
                         "(use --overwrite or another --output)", config.output)
    recorded = previous.get("inputs")
    if not isinstance(recorded, dict):
        return  # written by an older synprep
    for path, value in input_fingerprints(config).items():
        if path in recorded and list(recorded[path]) != value:
            raise InputError("--resume: this input changed since the interrupted run (other size or content): "
                             "restore it, or start again with --overwrite", path)
    files = previous.get("files")
    for path, digest in dependency_digests(config).items() if isinstance(files, dict) else ():
        if path in files and files[path] != digest:  # a parser or sub-word model, codes: the trees would mix
            raise InputError("--resume: this file changed since the interrupted run (other content, same name): "
                             "restore it, or start again with --overwrite", path)


def refuse_run_folders(out: str) -> None:
    """Refuse an output folder (or one of its split folders) that holds a training run: clearing it with
    --overwrite, or writing shards beside it, would lose the run's checkpoints."""
    folders = [out] + ([os.path.join(out, name) for name in sorted(os.listdir(out))] if os.path.isdir(out) else [])
    for folder in folders:
        found = run_files(folder)
        if found:
            raise InputError(f"holds a training run ({', '.join(found[:3])}{', ...' if len(found) > 3 else ''}): "
                             "synprep convert never writes over a run's checkpoints; give another --output or "
                             "move the run", folder)


_RECORDS = (RUN_INFO, PATHS, "README.md")  # what convert rewrites in OUT: records, no learned content
_TEMPORARY = re.compile(r"(.+\.tmp-\d+(\.[a-z]+)?|.+\.(tmp|part))")  # convert's writers' temporary names


def _is_stop_report(name: str) -> bool:
    return name.startswith("rejected-") and name.endswith(".tsv")


class OutputFolder:
    """OUT/ and its work folder OUT/.work for one configuration."""

    def __init__(self, config: PipelineConfig) -> None:
        self.config = config
        self.out = config.output
        self.work = os.path.join(self.out, ".work")
        self.staged = os.path.join(self.work, "splits")  # the split folders being written, each moved to OUT whole

    def published(self, split: str) -> bool:
        """Whether the split's folder is in OUT, complete (moved there whole by `publish`)."""
        return os.path.isfile(os.path.join(self.out, split, MANIFEST)) and \
            not os.path.isdir(os.path.join(self.staged, split))

    def publish(self, split: str) -> None:
        """The split's folder, complete (its manifest written last), moved from OUT/.work/splits into OUT in one
        rename: a reader of OUT (`datasets.load_dataset("arrow", data_dir=OUT)`, which reads every shard below it)
        never sees a split being written. A split folder an older synprep left half-written goes first."""
        staged, final = os.path.join(self.staged, split), os.path.join(self.out, split)
        if not os.path.isdir(staged):
            return  # published already (a resumed run)
        if os.path.isdir(final):
            shutil.rmtree(final)
        os.replace(staged, final)

    def contents(self) -> list[str]:
        """What the output folder holds besides the writer lock and the rejections reports of a stopped run."""
        return ([name for name in os.listdir(self.out) if name != LOCK and not _is_stop_report(name)]
                if os.path.isdir(self.out) else [])

    def stop_reports(self) -> list[str]:
        """The rejections reports a run stopped after the filter left (OUT/rejected-<split>.tsv)."""
        return [os.path.join(self.out, name) for name in os.listdir(self.out) if _is_stop_report(name)]

    def clear(self) -> None:
        for name in self.contents():
            path = os.path.join(self.out, name)
            shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)

    def discard(self, existed: bool) -> None:
        """What a fresh run made, after bad input stopped it (a rejections report stays, for the user to read;
        the folder itself goes if this run made it and nothing stays)."""
        self.clear()
        if not existed and not self.stop_reports():
            shutil.rmtree(self.out, ignore_errors=True)

    def folders(self) -> list[str]:
        """The folders convert writes in: OUT, OUT/models, each split's folder; and OUT/.work with what is below."""
        return [self.out, os.path.join(self.out, "models"),
                *(os.path.join(self.out, split.name) for split in self.config.splits)]

    def temporary_files(self) -> list[str]:
        """What an interrupted run was writing: the temporary names convert's writers give (`.NAME.tmp-PID`,
        `NAME.tmp-PID`, `NAME.tmp`, `NAME.part`) in the folders convert writes in (`folders`, not below them), and
        below OUT/.work; never a file elsewhere in the tree."""
        found = []
        for folder in self.folders():
            try:
                names = [name for name in os.listdir(folder) if os.path.isfile(os.path.join(folder, name))]
            except OSError:
                continue
            found += [os.path.join(folder, name) for name in names if _TEMPORARY.fullmatch(name)]
        for folder, _, names in os.walk(self.work):
            found += [os.path.join(folder, name) for name in names if _TEMPORARY.fullmatch(name)]
        return found

    def made_files(self) -> dict[str, str]:
        """Every file convert learned or trained into OUT (codes, vocabularies, sub-word models in OUT, parser
        models in OUT/models) -> its sha256; not the records it rewrites, the lock, nor temporary names."""
        found = {}
        for folder in self.folders()[:2]:
            try:
                names = sorted(os.listdir(folder))
            except OSError:
                continue
            for name in names:
                path = os.path.join(folder, name)
                if os.path.isfile(path) and name not in _RECORDS and not name.startswith(".") and \
                        not _is_stop_report(name) and not _TEMPORARY.fullmatch(name):
                    found[os.path.relpath(path, self.out)] = file_sha256(path)
        return found

    def check_made_files(self) -> None:
        """What convert learned into OUT compared by content with what it recorded of it (`.work/made.json`),
        then recorded: a resumed run refuses one changed since (its pieces, made with the earlier file, would
        mix with those made with the new one), in one line naming it."""
        path = os.path.join(self.work, MADE)
        try:
            with open(path, encoding="utf-8") as handle:
                recorded = json.load(handle)
        except (OSError, ValueError):
            recorded = {}
        recorded = recorded if isinstance(recorded, dict) else {}
        now = self.made_files()
        for name, digest in sorted(recorded.items()):
            if name in now and now[name] != digest:
                raise InputError("--resume: this file convert made changed since the interrupted run (other "
                                 "content, same name): restore it, or start again with --overwrite",
                                 os.path.join(self.out, name))
        os.makedirs(self.work, exist_ok=True)
        atomic_write(path, json.dumps({**recorded, **now}, indent=2, sort_keys=True).encode())

    def finished(self) -> bool:
        """The output holds a finished run whose work folder is gone (run.json is written last)."""
        return os.path.isfile(os.path.join(self.out, RUN_INFO)) and not os.path.isdir(self.work)

    def prepare(self, resume: bool, overwrite: bool) -> None:
        """Ready for this run: a fresh or cleared folder, or one an interrupted (or finished) run of the same
        configuration on the same inputs left (`resume`), its temporary files removed."""
        refuse_run_folders(self.out)
        marker = os.path.join(self.work, "config.json")
        if not os.path.isfile(marker) and self.finished():  # run.json keeps the fingerprint of a finished run
            marker = os.path.join(self.out, RUN_INFO)
        if self.contents() and not resume:
            if not overwrite:
                raise InputError("output folder exists and is not empty: pass --resume to continue an interrupted "
                                 "run or --overwrite to start again", self.out)
            if not os.path.isfile(marker):
                raise InputError("refusing to --overwrite a folder that synprep convert did not create", self.out)
            self.clear()
        if resume and os.path.isfile(marker):
            _check_same_run(self.config, marker)
        elif resume and self.contents():  # never sweep or write beside files convert did not make
            raise InputError("--resume: this folder was not made by synprep convert (it has no .work/config.json "
                             "or run.json): give another --output", self.out)
        shutil.rmtree(self.work + REMOVING, ignore_errors=True)  # a removal that was interrupted
        for report in self.stop_reports():  # an earlier run's stop: this run writes its own reports
            os.remove(report)
        if resume and self.finished():  # nothing left to do
            return
        if resume:  # what an interrupted run was writing: temporary files, never complete
            for path in self.temporary_files():
                os.remove(path)
        os.makedirs(self.work, exist_ok=True)
        record = {"fingerprint": fingerprint(self.config), "config": self.config.fingerprint_dict(),
                  "inputs": input_fingerprints(self.config), "files": dependency_digests(self.config)}
        atomic_write(marker, json.dumps(record, indent=2, sort_keys=True).encode())
        write_paths(self.out, self.config.data_root, self.config.file or None)

    def run_info(self) -> dict[str, Any]:
        """OUT/run.json of a finished run ({} when absent or unreadable: it holds statistics only)."""
        try:
            with open(os.path.join(self.out, RUN_INFO), encoding="utf-8") as f:
                info = json.load(f)
        except (OSError, ValueError):
            return {}
        return info if isinstance(info, dict) else {}

    def finish(self, run_info: dict[str, Any], keep_work: bool) -> None:
        """run.json (the fingerprint first), then the work folder goes unless kept (renamed first, so an
        interrupted removal never looks resumable)."""
        info = {"fingerprint": fingerprint(self.config), **run_info}
        atomic_write(os.path.join(self.out, RUN_INFO), json.dumps(info, indent=2).encode())  # not in shards
        if not keep_work:
            os.replace(self.work, self.work + REMOVING)
            shutil.rmtree(self.work + REMOVING)
