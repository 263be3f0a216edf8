"""Trace one training batch while it runs: which project files it enters and how often it comes back into a file it
has entered already (a "return": a call or a return that enters such a file), the measure of how often a batch
goes down and back up through the modules; docs/switches-api.md quotes the figures (a test compares them).

    python benchmarks/trace_batch.py [--steps 5] [--switches '{"pascal_heads": [2]}']

`syntrain.train.train` runs `--steps` optimizer updates (one batch each) on the cpu preset with Pascal heads
(two heads of layer 1) on the test fixture's shards, one thread, no validation before the last step.
`sys.setprofile` (and `threading.setprofile` for the prefetch thread) sees every Python call and return; only
frames of synprep/ and syntrain/ count (torch's frames in between are looked through). A batch is its collation
on the prefetch thread (one call of `collate_group`) and the main thread from its `Trainer.update` to the next
one's (the update, the step's bookkeeping, the next batch handed over); the figures are those of the batches
between the first (which logs) and the last (which validates and saves), all equal. "In all": the set-up, from
`train()` on, and the first batch.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARDS = REPO / "tests" / "data" / "switches" / "shards"
PACKAGES = tuple(str(REPO / package) + "/" for package in ("syntrain", "synprep"))


def project_file(frame: object) -> str | None:
    """The repository path of a frame's file when it is the project's, else None."""
    name = frame.f_code.co_filename  # type: ignore[attr-defined]
    return name[len(str(REPO)) + 1:] if name.startswith(PACKAGES) else None


class Tracer:
    """Per thread, the project files entered in turn, with marks where a batch begins (a call of one of `marks`:
    (file, function) pairs)."""

    def __init__(self, marks: dict[tuple[str, str], str]) -> None:
        self.marks = marks
        self.events: dict[int, list[tuple[str, str | None]]] = {}  # thread -> [(file entered, mark or None)]
        self.current: dict[int, str | None] = {}

    def __call__(self, frame: object, event: str, arg: object) -> None:
        if event not in ("call", "return"):
            return
        thread = threading.get_ident()
        if event == "call":
            entered = project_file(frame)
        else:  # back in the caller: the nearest project frame up the stack
            caller, entered = frame.f_back, None  # type: ignore[attr-defined]
            while caller is not None and (entered := project_file(caller)) is None:
                caller = caller.f_back
        mark = self.marks.get((entered, frame.f_code.co_name)) if event == "call" else None  # type: ignore[attr-defined]
        events = self.events.setdefault(thread, [])
        if mark:
            events.append((entered, mark))
        if entered is not None and entered != self.current.get(thread):
            self.current[thread] = entered
            if not mark:
                events.append((entered, None))


def segments(events: list[tuple[str, str | None]], mark: str) -> list[list[str]]:
    """The files entered from each event marked `mark` to the next one (the first: everything before it)."""
    found: list[list[str]] = [[]]
    for entered, marked in events:
        if marked == mark:
            found.append([])
        found[-1].append(entered)
    return found


def figures(files: list[str]) -> dict:
    """Files entered and returns (entries into a file entered before) of one sequence of entered files."""
    seen: set[str] = set()
    returns: Counter[str] = Counter()
    for previous, entered in zip([None, *files], files):
        if entered == previous:
            continue
        if entered in seen:
            returns[entered] += 1
        seen.add(entered)
    return {"files": len(seen), "returns": sum(returns.values()), "by_file": dict(returns.most_common()),
            "entered": sorted(seen)}


def trace(steps: int, switches: dict) -> dict:
    """Run `steps` training steps under the tracer: {"batch": figures of one batch, "all": set-up + first batch}."""
    import torch

    from syntrain.train import TrainConfig, train

    torch.set_num_threads(1)
    tracer = Tracer({("syntrain/train.py", "collate_group"): "collate", ("syntrain/train.py", "update"): "update"})
    with tempfile.TemporaryDirectory() as out:
        cfg = TrainConfig.from_dict({"data": str(SHARDS / "train"), "out": out, "preset": "cpu", "model": switches,
                                     "max_steps": steps, "max_tokens": 300, "log_interval": 1000,
                                     "eval_interval": 1000, "seed": 1, "threads": 1, "device": "cpu"})
        main = threading.get_ident()
        threading.setprofile(tracer)
        sys.setprofile(tracer)
        try:
            train(cfg)
        finally:
            sys.setprofile(None)
            threading.setprofile(None)
    updates = segments(tracer.events[main], "update")  # [set-up, batch 1, ..., batch N (+ the end)]
    collated = next(segments(events, "collate")[1:] for thread, events in tracer.events.items()
                    if thread != main and any(mark == "collate" for _, mark in events))
    batches = [figures(collated[k] + updates[k + 1]) for k in range(1, steps - 1)]
    typical = batches[0]
    if any((batch["files"], batch["returns"]) != (typical["files"], typical["returns"]) for batch in batches):
        raise SystemExit(f"the batches differ: {[(b['files'], b['returns']) for b in batches]}")
    return {"batch": typical, "all": figures(updates[0] + collated[0] + updates[1])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5, help="training steps (at least 3)")
    parser.add_argument("--switches", default='{"pascal_heads": [2]}', help="[model] options, JSON")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON (the last line)")
    args = parser.parse_args()
    result = trace(max(args.steps, 3), json.loads(args.switches))
    if args.json:
        print(json.dumps(result))
        return
    for name, what in (("batch", "per batch"), ("all", "set-up and the first batch")):
        found = result[name]
        top = ", ".join(f"{count} to {path}" for path, count in found["by_file"].items())
        print(f"{what}: {found['files']} files, {found['returns']} returns ({top})")
        print(f"  files: {', '.join(found['entered'])}")


if __name__ == "__main__":
    main()
