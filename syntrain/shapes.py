"""Shapes and compilation: the shape ladder of batch lengths, the measured choice of the attention backend,
and `torch.compile` of the model (docs/syntrain.md, "Shapes and compilation").

Shape ladder: a batch's source and target lengths are padded up to the next rung of a small fixed ladder
(multiples of 8 up to 64, then multiples of 64), so an epoch has a bounded number of distinct tensor shapes.
On a GPU every new shape costs once (cuDNN attention execution plans, a torch.compile graph, a CUDA graph);
on the CPU a new shape costs nothing and padding costs compute, so `[train] shape_ladder = "auto"` pads on
CUDA and for compiled models only. Padding changes no loss: pad positions are masked as keys and carry no
target (tests/test_shapes_compile.py).

Attention backend: on CUDA `scaled_dot_product_attention` has several backends (math, flash, memory-efficient,
cuDNN), and the attention layers whose operations FlexAttention can run (`HeadLayout.flex`: the hooks' scales,
biases and masks, not "record"; syntrain.transformer_layers) have a kernel of their own to choose, math or flex;
which is fastest depends on the model's shapes and the GPU.
`choose_attention` times a forward + backward of each candidate on sample batches once at the start of a run
and keeps the fastest; on the CPU torch's own choice is kept (no timing).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch

FINE_STEP, FINE_UP_TO, COARSE_STEP = 8, 64, 64
LADDER_TEXT = f"multiples of {FINE_STEP} up to {FINE_UP_TO}, then of {COARSE_STEP}"
LADDER_CHOICES = ("auto", "on", "off")


def padded_length(longest: int, limit: int = 0) -> int:
    """The ladder rung for a batch whose longest row has `longest` positions: the next multiple of 8 up to
    64, then of 64. `limit` > 0 caps the rung (the model's max_len); a rung never falls below `longest`."""
    step = FINE_STEP if longest <= FINE_UP_TO else COARSE_STEP
    rung = -(-longest // step) * step
    return max(longest, min(rung, limit)) if limit > 0 else rung


def ladder_rungs(longest: int) -> list[int]:
    """The rungs up to the one that holds `longest` (how many shapes one side of a batch can take)."""
    rungs, n = [], 1
    while not rungs or rungs[-1] < longest:
        rungs.append(padded_length(n))
        n = rungs[-1] + 1
    return rungs


def ladder_in_use(choice: str, device: torch.device, compiled: bool) -> bool:
    """`[train] shape_ladder` (auto, on, off) -> whether batches are padded to the ladder: auto = on CUDA or
    with a compiled model (where each new shape costs), off for the eager CPU (where padding only costs)."""
    if choice not in LADDER_CHOICES:
        raise ValueError(f"shape_ladder must be one of {', '.join(LADDER_CHOICES)}, got {choice!r}")
    return choice == "on" or (choice == "auto" and (device.type == "cuda" or compiled))


def distinct_shapes(shapes: Iterable[tuple[int, ...]]) -> int:
    """How many different tensor shapes (for example (rows, source length, target length)) occur."""
    return len(set(shapes))


# ---- attention backend, chosen by measurement -------------------------------------------------------------

def sdpa_candidates(device: torch.device) -> dict[str, list]:
    """`scaled_dot_product_attention` backends worth timing on `device` (name -> sdpa_kernel argument)."""
    from torch.nn.attention import SDPBackend

    names = {"math": SDPBackend.MATH, "flash": SDPBackend.FLASH_ATTENTION}
    if device.type == "cuda":
        names.update(efficient=SDPBackend.EFFICIENT_ATTENTION, cudnn=SDPBackend.CUDNN_ATTENTION)
    return {name: [backend] for name, backend in names.items()}


class StepContext:
    """A reusable context manager entering several (autocast, an SDPA backend choice) around each forward."""

    def __init__(self, *makers: Callable[[], contextlib.AbstractContextManager]) -> None:
        self.makers = makers
        self.stacks: list[contextlib.ExitStack] = []

    def __enter__(self) -> StepContext:
        stack = contextlib.ExitStack()
        for make in self.makers:
            stack.enter_context(make())
        self.stacks.append(stack)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stacks.pop().__exit__(*exc)


def backend_context(autocast: contextlib.AbstractContextManager, backend: list | None
                    ) -> contextlib.AbstractContextManager:
    """`autocast` alone, or with the SDPA `backend` (a list of SDPBackend) forced inside it."""
    if backend is None:
        return autocast
    from torch.nn.attention import sdpa_kernel

    return StepContext(lambda: autocast, lambda: sdpa_kernel(backend))


def time_call(run: Callable[[], None], device: torch.device, repeats: int = 2) -> float | None:
    """Seconds per `run()`: one untimed call (warm-up: plans, compilation), then `repeats` timed ones; None
    when it raises (a backend or kernel that does not serve these shapes, this GPU or these settings)."""
    try:
        run()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        for _ in range(repeats):
            run()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    except Exception:  # noqa: BLE001 (any failure rules the candidate out; the others remain)
        return None
    return (time.perf_counter() - start) / repeats


KERNEL = "kernel"  # the checkpoint's key of the kernel chosen for the layers with attention operations
# the key a checkpoint recorded that kernel under before it was keyed by the operations: still read
OLD_KERNEL_KEY = "pascal"
OPERATIONS = ", attention operations on "  # in the choice's text: "<backend>, attention operations on <kernel>"


def chosen_attention(chosen: str) -> dict[str, str]:
    """`choose_attention`'s choice as a checkpoint records it: {"backend": name, "kernel": the kernel of the layers
    with attention operations (when there was a choice)}."""
    backend, _, kernel = chosen.partition(OPERATIONS)
    return {"backend": backend, **({KERNEL: kernel} if kernel else {})}


def recorded_kernel(recorded: dict[str, str]) -> str | None:
    """The kernel a checkpoint's `chosen_attention` record holds (its old key read too), or None."""
    return recorded.get(KERNEL, recorded.get(OLD_KERNEL_KEY))


def choose_attention(model: torch.nn.Module, step: Callable[[contextlib.AbstractContextManager], None],
                     autocast: contextlib.AbstractContextManager, device: torch.device, flex: bool,
                     recorded: dict[str, str] | None = None
                     ) -> tuple[contextlib.AbstractContextManager, str, dict[str, float]]:
    """Time one training forward + backward (`step(context)` on sample batches) under each SDPA backend and,
    with `flex`, the FlexAttention kernel of the layers with attention operations against math under the fastest
    backend; keep the fastest. Returns (the context for the run's forwards, what was chosen, seconds per
    candidate). The model's gradients are cleared and the RNG states restored afterwards (the run's dropout
    stream is untouched). `flex`: the kernel is allowed for this model and exists in this torch
    (attention.flex_available). `recorded`: the choice of the run being resumed (`chosen_attention`; a
    checkpoint's older record too), kept without timing when this device offers it (anything else recorded, e.g.
    a damaged value, is timed again), so that a resumed run computes as the uninterrupted one would (kernels
    differ in rounding)."""
    contexts = {name: backend_context(autocast, backend) for name, backend in sdpa_candidates(device).items()}
    kernel = recorded_kernel(recorded) if isinstance(recorded, dict) else None
    usable = isinstance(recorded, dict) and recorded.get("backend") in contexts and (
        kernel in ("math", "flex") if flex else not kernel)
    if usable:
        backend = recorded["backend"]
        chosen = backend
        if kernel:
            model.set_attention_kernel(kernel)
            chosen = f"{backend}{OPERATIONS}{kernel}"
        return contexts[backend], chosen, {}  # no timings: the recorded choice
    timings: dict[str, float] = {}
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        for name, context in contexts.items():
            seconds = time_call(lambda context=context: step(context), device)
            if seconds is not None:
                timings[name] = seconds
        if not timings:
            raise ValueError("no scaled_dot_product_attention backend runs this model's shapes")
        backend = min(timings, key=timings.get)
        chosen = backend
        if flex:
            kernels = {}
            for candidate in ("math", "flex"):
                model.set_attention_kernel(candidate)
                seconds = time_call(lambda: step(contexts[backend]), device)
                if seconds is not None:
                    kernels[candidate] = timings[f"operations {candidate}"] = seconds
            kernel = min(kernels, key=kernels.get) if kernels else "math"
            model.set_attention_kernel(kernel)
            chosen = f"{backend}{OPERATIONS}{kernel}"
    model.zero_grad(set_to_none=True)
    return contexts[backend], chosen, timings


def compile_model(model: torch.nn.Module, device: torch.device, cuda_graphs: bool, shapes: int
                  ) -> torch.nn.Module:
    """`torch.compile(model)` with static shapes (dynamic=False): one graph per batch shape, which the shape
    ladder keeps to a few (`shapes`: how many to allow before torch falls back to eager). Static shapes give
    each graph kernels specialised to its sizes, match what the compile-vs-eager tests check, and let CUDA
    graphs (`cuda_graphs`: mode "reduce-overhead", CUDA only) capture each shape once."""
    import torch._dynamo

    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, shapes + 8)
    mode = "reduce-overhead" if cuda_graphs and device.type == "cuda" else "default"
    return torch.compile(model, dynamic=False, mode=mode)


def shape_summary(shapes: Sequence[tuple[int, int, int]]) -> str:
    """One line about the (rows, source length, target length) shapes of an epoch's batches."""
    lengths = {s for _, s, _ in shapes} | {t for _, _, t in shapes}
    return (f"{distinct_shapes(shapes)} distinct batch shapes (rows x source x target) in {len(shapes)} batches, "
            f"{len(lengths)} distinct lengths")
