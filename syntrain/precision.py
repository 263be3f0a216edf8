"""The numeric precision of a run (auto, fp32, bf16, fp16): what runs on the device, its autocast, and fp16's
loss scaling."""

from __future__ import annotations

import contextlib

import torch

PRECISIONS = ("auto", "fp32", "bf16", "fp16")
AUTOCAST_TYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def resolve_precision(precision: str, device: torch.device) -> str:
    """`precision` (auto, fp32, bf16, fp16) -> what runs on `device`: auto is bf16 on a CUDA GPU that supports
    it, fp16 (mixed precision with loss scaling) on another CUDA GPU (V100, T4), else fp32."""
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}; choose from {', '.join(PRECISIONS)}")
    if precision == "auto":
        if device.type != "cuda":
            return "fp32"
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    return precision


def autocast_context(precision: str, device: torch.device) -> contextlib.AbstractContextManager:
    """bf16 or fp16 autocast, or nothing, for `precision` (auto, fp32, bf16, fp16) on `device`."""
    resolved = resolve_precision(precision, device)
    if resolved == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=AUTOCAST_TYPES[resolved])


def grad_scaler(precision: str, device: torch.device) -> torch.amp.GradScaler:
    """The loss scaler of a run: enabled for fp16 (whose small gradients would underflow), a no-op otherwise."""
    return torch.amp.GradScaler(device.type, enabled=resolve_precision(precision, device) == "fp16")
