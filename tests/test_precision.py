"""Mixed precision: fp16 autocast with loss scaling beside bf16 (`precision = fp16`; `auto` picks bf16 where the
GPU supports it, fp16 on other CUDA GPUs, fp32 on the CPU), recorded in the checkpoint; trained here on the CPU
(torch's CPU autocast takes float16)."""

import json
import math

import pytest
import torch

import syntrain
from syntrain.precision import autocast_context, grad_scaler, resolve_precision

from .conftest import convert_synth

SMALL = dict(d_model=32, n_heads=4, d_ff=64, enc_layers=2, dec_layers=2)


def test_auto_and_explicit_precisions():
    cpu = torch.device("cpu")
    assert resolve_precision("auto", cpu) == "fp32"
    assert [resolve_precision(p, cpu) for p in ("fp32", "bf16", "fp16")] == ["fp32", "bf16", "fp16"]
    assert grad_scaler("fp16", cpu).is_enabled() and not grad_scaler("bf16", cpu).is_enabled()
    with autocast_context("fp16", cpu):
        assert torch.nn.Linear(4, 4)(torch.randn(2, 4)).dtype == torch.float16
    with pytest.raises(ValueError, match="fp16"):
        resolve_precision("fp8", cpu)
    if torch.cuda.is_available():  # where a GPU is lent: auto is bf16 or, without bf16 support, fp16
        assert resolve_precision("auto", torch.device("cuda")) == ("bf16" if torch.cuda.is_bf16_supported()
                                                                   else "fp16")


@pytest.fixture(scope="module")
def train_split(tmp_path_factory):
    return convert_synth(tmp_path_factory.mktemp("precision"), "p", ["parents", "depth"])


def losses(run):
    records = [json.loads(line) for line in open(f"{run}/metrics.jsonl", encoding="utf-8")]
    found = [record["loss"] for record in records if "loss" in record]
    assert found and all(math.isfinite(loss) for loss in found)
    return found


def test_fp16_trains_with_loss_scaling_and_is_recorded(train_split, tmp_path, capfd):
    common = dict(data=str(train_split), max_tokens=300, warmup=2, lr=3e-3, log_interval=1, threads=1, seed=3,
                  model=SMALL, tensorboard=False)
    run = syntrain.train(out=str(tmp_path / "fp16"), max_steps=4, precision="fp16", **common)
    assert "precision fp16" in capfd.readouterr().err
    ckpt = torch.load(f"{run}/last.pt", weights_only=False)
    assert ckpt["precision"] == "fp16" and ckpt["train_config"]["precision"] == "fp16"
    assert ckpt["scaler"]["scale"] > 1  # the loss was scaled (65536 at the start, halved on an overflow)
    fp32 = syntrain.train(out=str(tmp_path / "fp32"), max_steps=4, precision="fp32", **common)
    assert losses(run) == pytest.approx(losses(fp32), rel=0.02)  # fp16 follows fp32's trajectory, same seed
    assert losses(run) != losses(fp32)  # ... computed in half precision
    resumed = syntrain.train(out=run, resume=True, max_steps=6)  # the scaler's state continues
    after = torch.load(f"{resumed}/last.pt", weights_only=False)
    assert after["step"] == 6 and after["scaler"]["scale"] > 1 and after["precision"] == "fp16"
    bf16 = torch.load(f"{syntrain.train(out=str(tmp_path / 'bf16'), max_steps=1, precision='bf16', **common)}/last.pt",
                      weights_only=False)
    assert bf16["precision"] == "bf16" and bf16["scaler"] is None


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_fp16_follows_the_bf16_loss_curve(train_split, tmp_path):
    """On a GPU, fp16 with loss scaling trains like bf16: the same seed gives loss curves that agree within the
    two formats' rounding (bf16 keeps 8 bits of mantissa, fp16 11) over 30 steps, and fp16's goes down."""
    common = dict(data=str(train_split), max_tokens=300, warmup=4, lr=2e-3, log_interval=5, threads=1, seed=3,
                  model={**SMALL, "dropout": 0.0}, tensorboard=False, max_steps=30)
    curves = {p: losses(syntrain.train(out=str(tmp_path / p), precision=p, **common)) for p in ("bf16", "fp16")}
    assert curves["fp16"][-1] < curves["fp16"][0] - 0.3, curves
    assert curves["fp16"] == pytest.approx(curves["bf16"], rel=0.03), curves
