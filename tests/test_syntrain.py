"""syntrain: Pascal attention (batch invariance, parent ignoring, all-ones prior), exact resume, DDP (gloo, 2
processes), and a tiny model learning a synthetic corpus (`synprep synth` -> `synprep convert`)."""

from __future__ import annotations

import contextlib
import glob
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

from synprep.shards import source_preparation
from synprep.synth import SynthConfig, write_corpus
from syntrain.dataset import ParallelData, read_split
from syntrain.distributed import training_device
from syntrain.model import build_model
from syntrain.runfolder.checkpoints import load_checkpoint
from syntrain.search import beam_search, greedy
from syntrain.switches import declared
from syntrain.switches.pascal import NO_PARENT, PascalHeads, pascal_scale
from syntrain.train import TrainConfig, train
from syntrain.transformer_layers import MultiHeadAttention
from syntrain.vocab import EOS_ID, PAD_ID, Vocab

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SMALL = dict(d_model=32, n_heads=4, d_ff=64, enc_layers=2, dec_layers=2, dropout=0.1, pascal_heads=[2],
             parent_ignore=0.3)


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """A simple synthetic corpus (SVO -> verb-second reordering + word-by-word lexicon), converted."""
    root = tmp_path_factory.mktemp("synth")
    write_corpus(str(root / "corpus"), 2000, 1, SynthConfig(max_depth=0, non_projective_rate=0, p_adj=0.2,
                                                            p_relcl=0, p_clausal=0, p_nmod=0), bpe_symbols=0)
    subprocess.run([sys.executable, "-m", "synprep.cli", "convert", str(root / "corpus" / "pipeline.toml"),
                    "--output", str(root / "shards")], check=True, capture_output=True)
    return root / "shards"


def _random_batch(lengths, vocab=50, seed=0):
    g = torch.Generator().manual_seed(seed)
    s = max(lengths)
    src = torch.full((len(lengths), s), PAD_ID)
    parent = torch.full((len(lengths), s), NO_PARENT)
    for b, n in enumerate(lengths):
        src[b, : n - 1] = torch.randint(4, vocab, (n - 1,), generator=g)
        src[b, n - 1] = EOS_ID
        parent[b, : n - 1] = torch.randint(0, n - 1, (n - 1,), generator=g).float() + 0.5 * (b % 2)
    tgt = torch.randint(4, vocab, (len(lengths), 6), generator=g)
    return src, parent, tgt


def test_pascal_batch_invariance():
    """Each sentence of a padded batch gets the output it gets alone (the reference code fails this)."""
    torch.manual_seed(0)
    model = build_model("tiny", vocab_size=50, d_model=32, n_heads=4, d_ff=64, enc_layers=2, dec_layers=1,
                        pascal_heads=[3, 1]).eval()
    lengths = [9, 4, 7, 2]
    src, parent, tgt = _random_batch(lengths)
    memory, _ = model.encode(src, src_parent_mid=parent)
    logits = model(src, tgt, src_parent_mid=parent).logits
    for b, n in enumerate(lengths):
        alone_memory, _ = model.encode(src[b : b + 1, :n], src_parent_mid=parent[b : b + 1, :n])
        torch.testing.assert_close(memory[b, :n], alone_memory[0], atol=1e-5, rtol=1e-5)
        alone = model(src[b : b + 1, :n], tgt[b : b + 1], src_parent_mid=parent[b : b + 1, :n]).logits
        torch.testing.assert_close(logits[b], alone[0], atol=1e-5, rtol=1e-5)
    # the parents matter: swapping the batch's parent rows changes the outputs
    assert not torch.allclose(model.encode(src, src_parent_mid=parent.flip(0))[0][0, :4], memory[0, :4], atol=1e-3)


def test_parent_prior_is_the_gaussian_and_special_rows_are_one():
    parent = torch.tensor([[2.0, 0.5, NO_PARENT]])
    prior = pascal_scale(parent, 4, sigma2=1.0)
    j = torch.arange(4.0)
    torch.testing.assert_close(prior[0, 0], torch.exp(-(j - 2) ** 2 / 2) / np.sqrt(2 * np.pi))
    torch.testing.assert_close(prior[0, 1], torch.exp(-(j - 0.5) ** 2 / 2) / np.sqrt(2 * np.pi))
    assert torch.equal(prior[0, 2], torch.ones(4))


def test_parent_ignoring_only_in_training_and_at_the_rate():
    torch.manual_seed(0)
    parent = torch.rand(200, 100) * 50
    for q in (0.0, 0.3, 0.7):
        ones = (pascal_scale(parent, 50, ignore_prob=q, training=True) == 1).all(-1).float().mean().item()
        assert abs(ones - q) < 0.02, (q, ones)
        assert not (pascal_scale(parent, 50, ignore_prob=q, training=False) == 1).all(-1).any()
    # through the module: eval mode is deterministic, train mode (q > 0, no dropout) is not
    attn = MultiHeadAttention(16, 4, dropout=0.0, hooks=[PascalHeads(2, parent_ignore=0.5)])
    x, p = torch.randn(3, 8, 16), torch.randint(0, 8, (3, 8)).float()
    attn.eval()
    assert torch.equal(attn(x, src_parent_mid=p), attn(x, src_parent_mid=p))
    attn.train()
    assert not torch.equal(attn(x, src_parent_mid=p), attn(x, src_parent_mid=p))


def test_pascal_with_all_ones_prior_equals_vanilla():
    torch.manual_seed(0)
    vanilla = MultiHeadAttention(32, 4).eval()
    x = torch.randn(2, 7, 32)
    mask = torch.ones(2, 1, 1, 7, dtype=torch.bool)
    mask[1, ..., 5:] = False
    for heads in (1, 4):
        pascal = MultiHeadAttention(32, 4, hooks=[PascalHeads(heads)]).eval()
        pascal.load_state_dict(vanilla.state_dict())
        expected = vanilla(x, mask=mask)
        torch.testing.assert_close(pascal(x, mask=mask, prior=torch.ones(2, 7, 7)), expected, atol=1e-6, rtol=1e-5)
        no_parents = torch.full((2, 7), NO_PARENT)  # e.g. only special tokens: every row prior is 1
        torch.testing.assert_close(pascal(x, mask=mask, src_parent_mid=no_parents), expected, atol=1e-6, rtol=1e-5)


def _flex_case(n_heads=4, pascal_heads=2, parent_ignore=0.4, device="cpu", d_model=32):
    torch.manual_seed(0)
    attn = MultiHeadAttention(d_model, n_heads, dropout=0.0,
                              hooks=[PascalHeads(pascal_heads, parent_ignore=parent_ignore)])
    x = torch.randn(3, 9, d_model)
    mask = torch.ones(3, 1, 1, 9, dtype=torch.bool)
    mask[1, ..., 6:], mask[2, ..., 2:] = False, False
    parent = torch.randint(0, 5, (3, 9)).float() + 0.5 * torch.randint(0, 2, (3, 9))
    parent[0, 3], parent[1, 6:], parent[2, 2:] = NO_PARENT, NO_PARENT, NO_PARENT
    return attn.to(device), x.to(device), mask.to(device), parent.to(device)


@pytest.mark.parametrize("pascal_heads", [1, 2, 4])
def test_flex_kernel_equals_math_kernel(pascal_heads):
    """The FlexAttention score_mod (the CUDA kernel's definition of the prior) gives the explicit math result,
    in eval mode and in training mode with parent ignoring (same RNG draws), on a padded batch."""
    attn, x, mask, parent = _flex_case(pascal_heads=pascal_heads)
    with torch.no_grad():  # PyTorch has no FlexAttention backward on CPU (see the CUDA test below)
        for mode in ("eval", "train"):
            getattr(attn, mode)()
            outputs = {}
            for kernel in ("math", "flex"):
                attn.kernel = kernel
                torch.manual_seed(5)
                outputs[kernel] = attn(x, mask=mask, src_parent_mid=parent)
            torch.testing.assert_close(outputs["flex"], outputs["math"], atol=1e-5, rtol=1e-5)
        attn.kernel = "flex"
        assert not torch.allclose(attn(x, mask=mask, src_parent_mid=parent.flip(0)), outputs["flex"], atol=1e-3)


def test_attention_kernel_choice():
    attn = MultiHeadAttention(64, 4, dropout=0.1, hooks=[PascalHeads(2)])
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    attn.train()
    assert not attn.uses_flex(cpu) and not attn.uses_flex(cuda)  # auto = math
    attn.eval()
    assert not attn.uses_flex(cpu) and not attn.uses_flex(cuda)
    attn.kernel = "math"
    assert not attn.uses_flex(cuda)
    attn.kernel = "flex"
    with torch.no_grad():
        assert attn.uses_flex(cpu) and attn.uses_flex(cuda)
    attn.train()
    with pytest.raises(ValueError, match="attention dropout"):
        attn.uses_flex(cpu)
    assert not MultiHeadAttention(32, 4, kernel="flex").uses_flex(cuda)  # no operations: plain SDPA
    with torch.no_grad(), pytest.raises(ValueError, match="head dimension >= 16"):  # Triton's limit
        MultiHeadAttention(32, 4, hooks=[PascalHeads(2)], kernel="flex").uses_flex(cuda)
    with pytest.raises(ValueError, match="unknown attention kernel"):
        build_model(vocab_size=20, **SMALL).set_attention_kernel("fused")


def test_flex_kernel_errors_propagate(monkeypatch):
    """A compile failure of the flex kernel (simulated: no GPU here) is raised, never silently replaced."""
    import syntrain.transformer_layers as attention

    def broken(*args, **kwargs):
        raise RuntimeError("triton: out of shared memory\nmore detail")

    monkeypatch.setattr(attention, "flex_attention", broken)
    attn, x, mask, parent = _flex_case()
    attn.eval()
    attn.kernel = "flex"
    with torch.no_grad(), pytest.raises(RuntimeError, match="shared memory"):
        attn(x, mask=mask, src_parent_mid=parent)


def test_flex_kernel_in_a_whole_model_decodes_like_math(shards):
    """Encoder Pascal layers on the flex kernel: the same greedy translations as the math kernel."""
    vocab = Vocab.build([read_split(str(shards / "train"))[0]])
    data = ParallelData(str(shards / "test"), vocab, batch_columns={declared("src_parent_mid"): "Pascal"})
    torch.manual_seed(0)
    model = build_model(vocab_size=len(vocab), **{**SMALL, "pascal_heads": [3, 1]}).eval()
    batch = data.collate(data.keep[:12])
    outputs = {}
    for kernel in ("math", "flex"):
        model.set_attention_kernel(kernel)
        with torch.no_grad():
            outputs[kernel] = (model.encode(batch.src, src_parent_mid=batch.inputs["src_parent_mid"])[0],
                               greedy(model, batch.src, src_parent_mid=batch.inputs["src_parent_mid"]))
    with pytest.raises(ValueError, match="without gradients"):
        model.encode(batch.src, src_parent_mid=batch.inputs["src_parent_mid"])
    torch.testing.assert_close(outputs["flex"][0], outputs["math"][0], atol=1e-5, rtol=1e-5)
    assert outputs["flex"][1] == outputs["math"][1]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (compiled FlexAttention, backward)")
def test_cuda_flex_forward_and_gradients_equal_math():
    attn, x, mask, parent = _flex_case(device="cuda", d_model=64)  # Triton: head dimension >= 16
    attn.train()
    results = {}
    for kernel in ("math", "flex"):
        attn.kernel = kernel
        attn.zero_grad()
        xg = x.clone().requires_grad_()
        torch.manual_seed(5)
        y = attn(xg, mask=mask, src_parent_mid=parent)
        y.square().sum().backward()
        results[kernel] = (y.detach(), xg.grad, attn.query.weight.grad.clone())
    for flex, math_ in zip(results["flex"], results["math"]):
        torch.testing.assert_close(flex, math_, atol=2e-4, rtol=2e-4)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_training_bf16_learns_and_flex_decodes_like_math(shards, tmp_path):
    """The CUDA defaults (auto: bf16 autocast, the kernel of the layers with attention operations chosen by timing
    math against flex at the start, as the checkpoint records it) train; the trained model decodes the same with
    either kernel. (The timing may pick either: under load flex can win, so the test reads the choice, never
    assumes math.)"""
    model = {**SMALL, "attention_dropout": 0.0, "d_model": 64}
    trained = train(TrainConfig(data=str(shards / "train"), valid=str(shards / "valid"), out=str(tmp_path), model=model,
                                max_tokens=600, max_steps=40, lr=3e-3, warmup=5, log_interval=10, eval_interval=40,
                                eval_sentences=20))
    assert next(trained.parameters()).is_cuda
    chosen = torch.load(tmp_path / "last.pt", map_location="cpu", weights_only=False)["attention_kernels"]
    assert chosen["kernel"] in ("math", "flex") and trained.kernel_in_use(torch.device("cuda")) == chosen["kernel"]
    losses = _losses(tmp_path / "metrics.jsonl")
    assert losses[40] < losses[10] - 0.5, losses
    trained.eval()
    torch.backends.cuda.matmul.allow_tf32 = False  # train() turns TF32 on; compare the kernels in full fp32
    src = torch.randint(4, 20, (3, 7), device="cuda")
    parent = torch.randint(0, 7, (3, 7), device="cuda").float()
    with torch.no_grad():
        memory = {}
        for kernel in ("math", "flex"):
            trained.set_attention_kernel(kernel)
            memory[kernel] = trained.encode(src, src_parent_mid=parent)
    trained.set_attention_kernel("auto")
    torch.testing.assert_close(memory["flex"], memory["math"], atol=2e-4, rtol=2e-4)


def test_bf16_autocast_trains(shards, tmp_path):
    """precision = bf16 (the CUDA default) runs the autocast path; on CPU too: bf16 logits, loss goes down."""
    from syntrain.precision import autocast_context

    model = build_model(vocab_size=30, **SMALL)
    src, parent, tgt = _random_batch([6, 4], vocab=30)
    with autocast_context("bf16", torch.device("cpu")):
        assert model(src, tgt, src_parent_mid=parent).logits.dtype == torch.bfloat16
    with autocast_context("auto", torch.device("cpu")):
        assert model(src, tgt, src_parent_mid=parent).logits.dtype == torch.float32
    with pytest.raises(ValueError, match="unknown precision"):
        autocast_context("fp8", torch.device("cpu"))  # fp16 is a precision now (tests/test_precision.py)
    train(TrainConfig(data=str(shards / "train"), out=str(tmp_path), model=SMALL, max_tokens=600, max_steps=30,
                      lr=3e-3, warmup=5, log_interval=5, threads=1, precision="bf16"))
    losses = _losses(tmp_path / "metrics.jsonl")
    assert all(np.isfinite(list(losses.values()))) and losses[30] < losses[5] - 0.5, losses


def test_flex_training_on_cpu_is_refused(shards, tmp_path):
    with pytest.raises(ValueError, match="CUDA only"):
        train(TrainConfig(data=str(shards / "train"), out=str(tmp_path), model=SMALL, max_steps=1,
                          attention="flex", device="cpu"))


def test_device_choice():
    assert training_device("cpu") == torch.device("cpu")
    assert training_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(ValueError, match="auto, cuda or cpu"):
        training_device("gpu")
    with pytest.raises(ValueError, match="no GPU of its own" if torch.cuda.is_available() else "sees no CUDA GPU"):
        training_device("cuda", local_rank=torch.cuda.device_count())


def test_data_shifts_and_batches(shards):
    table, manifest = read_split(str(shards / "train"))
    vocab = Vocab.build([table])
    data = ParallelData(str(shards / "train"), vocab, batch_columns={declared("src_parent_mid"): "Pascal"})
    batches = data.batches(300, seed=1, epoch=0)
    assert sorted(np.concatenate(batches).tolist()) == list(range(len(data)))
    for rows in batches:
        assert len(rows) * max(data.src_len[rows].max(), data.tgt_len[rows].max()) <= 300
    assert [b.tolist() for b in batches] == [b.tolist() for b in data.batches(300, seed=1, epoch=0)]
    batch = data.collate(batches[0])
    row = int(batches[0][0])
    n = len(table.column("src_subwords")[row].as_py())
    parent = batch.inputs["src_parent_mid"]
    assert batch.src[0, n] == EOS_ID and parent[0, n] == NO_PARENT  # EOS: no parent, no BOS shift
    assert batch.inputs["src_parent_mid"][0, :n].tolist() == table.column("src_parent_mid")[row].as_py()
    assert batch.tgt_in[0, 0] != batch.tgt_out[0, 0] and torch.equal(batch.tgt_in[0, 1 : n + 1][:3],
                                                                      batch.tgt_out[0, :3])


def _losses(path):
    with open(path) as f:
        return {r["step"]: r["loss"] for r in map(json.loads, f) if "loss" in r}


def test_resume_gives_the_same_next_losses(shards, tmp_path):
    common = dict(data=str(shards / "train"), model=SMALL, max_tokens=300, lr=1e-3, warmup=5, log_interval=1,
                  eval_interval=1000, threads=1, seed=3)
    train(TrainConfig(out=str(tmp_path / "full"), max_steps=10, **common))
    train(TrainConfig(out=str(tmp_path / "cut"), max_steps=5, **common))
    with open(tmp_path / "cut" / "metrics.jsonl", "a") as metrics:  # logged after the checkpoint, then killed
        metrics.write('{"step": 6, "loss": 99.0}\n{"step": 7, "lo')
    train(TrainConfig(out=str(tmp_path / "cut"), max_steps=10, resume=True, **common))
    full, cut = _losses(tmp_path / "full" / "metrics.jsonl"), _losses(tmp_path / "cut" / "metrics.jsonl")
    steps = [json.loads(line)["step"] for line in open(tmp_path / "cut" / "metrics.jsonl") if '"loss"' in line]
    assert steps == list(range(1, 11))  # no step twice, no line from the killed run
    assert sorted(cut) == list(range(1, 11))
    assert [cut[s] for s in range(6, 11)] == [full[s] for s in range(6, 11)]
    a, _, ckpt = load_checkpoint(str(tmp_path / "full" / "last.pt"))
    b, _, _ = load_checkpoint(str(tmp_path / "cut" / "last.pt"))
    assert ckpt["step"] == 10 and ckpt["signature"]["synprep"]
    for (name, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items()):
        assert torch.equal(x, y), name


def _ddp_worker(rank, world, port, cfg_values, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_RANK=str(rank))
    model = train(TrainConfig(**cfg_values))
    torch.save(model.state_dict(), os.path.join(out, f"rank{rank}.pt"))


def test_ddp_gloo_two_processes_keep_replicas_identical(shards, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = dict(data=str(shards / "train"), out=str(tmp_path / "run"), model=SMALL, max_tokens=300, max_steps=4,
               warmup=2, log_interval=1, eval_interval=1000, threads=1, accum_steps=2,  # DDP no_sync path too
               device="cpu")  # gloo, also on a GPU machine
    torch.multiprocessing.spawn(_ddp_worker, args=(2, port, cfg, str(tmp_path)), nprocs=2, join=True)
    a, b = (torch.load(tmp_path / f"rank{r}.pt") for r in (0, 1))
    init = build_model(vocab_size=a["src_embed.weight"].shape[0], **SMALL).state_dict()
    for name in a:
        assert torch.equal(a[name], b[name]), name
    assert not torch.equal(a["encoder.0.attn.query.weight"], init["encoder.0.attn.query.weight"])
    assert load_checkpoint(str(tmp_path / "run" / "last.pt"))[2]["step"] == 4


def _descendants(pid: int) -> list[int]:
    """The processes started by `pid` and by those (torchrun starts each worker in a session of its own)."""
    children: dict[int, list[int]] = {}
    for stat in glob.glob("/proc/[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError):
            with open(stat) as handle:
                parent = int(handle.read().rsplit(")", 1)[1].split()[1])
            children.setdefault(parent, []).append(int(stat.split("/")[2]))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def test_torchrun_cli_two_processes(shards, tmp_path):
    """The documented multi-process command (`torchrun ... -m syntrain run`), on the CPU with gloo. A hang fails
    with the Python stack of every thread of every process of the run (faulthandler, SIGABRT), none left behind."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONFAULTHANDLER": "1"}
    process = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                                "-m", "syntrain", "run", "--data", str(shards / "train"), "--out",
                                str(tmp_path / "run"), "--max-steps", "3", "--max-tokens", "300", "--warmup", "2",
                                "--log-interval", "1", "--preset", "tiny", "--pascal-heads", "2", "--device", "cpu"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO,
                               preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CORE, (0, 0)))  # no core files
    try:
        _, err = process.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        pids, err = [*_descendants(process.pid), process.pid], ""
        for signum in (signal.SIGABRT, signal.SIGKILL):
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signum)
            with contextlib.suppress(subprocess.TimeoutExpired):
                err = process.communicate(timeout=30)[1]
                break
        pytest.fail(f"torchrun hung; the stacks of its processes:\n{err[-30000:]}")
    assert process.returncode == 0, err[-3000:]
    assert "2 process(es)" in err and err.count("syntrain:") == 1  # rank 0 logs
    assert load_checkpoint(str(tmp_path / "run" / "last.pt"))[2]["step"] == 3
    assert len(_losses(tmp_path / "run" / "metrics.jsonl")) == 3


def test_tiny_model_learns_synthetic_corpus(shards, tmp_path):
    """Pascal (2 of 4 heads in layer 1), 300 steps on CPU: high BLEU on the held-out test split."""
    run = tmp_path / "run"
    recipe = tmp_path / "synth.toml"
    recipe.write_text(f"""
[data]
train = "{shards / 'train'}"
valid = "{shards / 'valid'}"
test = "{shards / 'test'}"
[model]
preset = "tiny"
d_model = 64
d_ff = 256
enc_layers = 2
dec_layers = 2
dropout = 0.0
pascal_heads = [2]
[train]
out = "run"
max_steps = 300
max_tokens = 1500
lr = 3e-3
warmup = 50
eval_interval = 300
log_interval = 50
threads = 1
""")
    subprocess.run([sys.executable, "-m", "syntrain", "run", str(recipe)], check=True, cwd=REPO)
    records = [json.loads(line) for line in open(run / "metrics.jsonl")]
    test = [r for r in records if "test_bleu" in r][-1]
    assert test["test_bleu"] > 80, test
    assert test["test_bleu_signature"].startswith("nrefs:1")
    out = subprocess.run([sys.executable, "-m", "syntrain", "eval", "--checkpoint", str(run / "best.pt"), "--data",
                          str(shards / "test"), "--beam", "4"], check=True, capture_output=True, text=True, cwd=REPO)
    assert float(out.stdout.split()[1]) > 80, out.stdout


def test_translate_raw_text_matches_shards(tmp_path):
    """Raw text is parsed and BPE'd with the run's parser model and codes: same output as its shards."""
    shards = tmp_path / "sample"
    subprocess.run([sys.executable, "-m", "synprep.cli", "convert", os.path.join(REPO, "pipelines", "sample.toml"),
                    "--output", str(shards)], check=True, capture_output=True)
    run = tmp_path / "run"
    train(TrainConfig(data=str(shards / "train"), out=str(run), model=SMALL, max_tokens=300, max_steps=20,
                      lr=3e-3, warmup=5, log_interval=10, threads=1))
    raw = tmp_path / "test.en"
    raw.write_text("".join(line + "\n" for line in read_split(str(shards / "test"))[0].column("src_text").to_pylist()))

    def translate(source):
        return subprocess.run([sys.executable, "-m", "syntrain", "translate", "--checkpoint", str(run / "last.pt"),
                               "-i", str(source), "--beam", "2"], check=True, capture_output=True, text=True,
                              cwd=REPO).stdout

    from_raw, from_shards = translate(raw), translate(shards / "test")
    assert from_raw == from_shards and len(from_raw.splitlines()) == 6
    # one line in = one line out: a blank line stays blank, a carriage return does not split a line
    lines = raw.read_text().splitlines()
    mixed = tmp_path / "mixed.en"
    mixed.write_text("\n".join([lines[0], "", lines[1].replace(" ", "\r", 1), *lines[2:]]) + "\n")
    out = translate(mixed).split("\n")[:-1]
    expected = from_raw.splitlines()
    assert len(out) == 7 and out[1] == "" and out[0] == expected[0] and out[3:] == expected[2:]
    bad = tmp_path / "bad.en"
    bad.write_bytes(lines[0].encode() + b"\n" + b"caf\xe9\n")
    result = subprocess.run([sys.executable, "-m", "syntrain", "translate", "--checkpoint", str(run / "last.pt"),
                             "-i", str(bad)], capture_output=True, text=True, cwd=REPO)
    assert result.returncode != 0 and f"{bad}:2: not valid UTF-8" in result.stderr
    assert "Traceback" not in result.stderr
    ckpt = torch.load(run / "last.pt", weights_only=False)
    from synprep.prepare import prepare_source  # what translate does with raw text: parse, BPE, features

    table = prepare_source(raw.read_text().splitlines(),
                           source_preparation(ckpt["pipeline"], ckpt["signature"], ckpt["dataset"]))
    expected = read_split(str(shards / "test"))[0]
    assert any("@@" in piece for row in table.column("src_subwords").to_pylist() for piece in row)
    columns = [name for name in table.column_names if name.startswith("src_")]
    assert {"src_subwords", "src_parent_mid", "src_heads", "src_text"} <= set(columns)
    for column in columns:  # every source feature exactly as convert made it
        assert table.column(column).to_pylist() == expected.column(column).to_pylist(), column


def test_incremental_decoding_equals_teacher_forcing():
    """decode_step with the key/value cache gives, step by step, the logits of the full decoder pass; beam
    reordering of the cache keeps each row's own history."""
    torch.manual_seed(0)
    model = build_model(vocab_size=40, **{**SMALL, "pascal_heads": [2, 1]}).eval()
    src, parent, tgt = _random_batch([9, 4, 7], vocab=40)
    with torch.no_grad():
        memory, src_mask = model.encode(src, src_parent_mid=parent)
        full = model.decode(tgt, memory, src_mask)
        cache = model.new_cache()
        steps = [model.decode_step(tgt[:, i : i + 1], i, memory, src_mask, cache) for i in range(tgt.shape[1])]
        torch.testing.assert_close(torch.stack(steps, dim=1), full, atol=1e-5, rtol=1e-5)
        # beam rows of one sentence (one memory, different histories), reordered as beam search does
        memory, src_mask = (z[:1].expand(3, *z.shape[1:]) for z in (memory, src_mask))
        cache = model.new_cache()
        for i in range(tgt.shape[1]):
            model.decode_step(tgt[:, i : i + 1], i, memory, src_mask, cache)
        order = torch.tensor([2, 0, 0])
        model.reorder_cache(cache, order)
        last = torch.randint(4, 40, (3, 1))
        step = model.decode_step(last, tgt.shape[1], memory, src_mask, cache)
        expected = model.decode(torch.cat([tgt[order], last], dim=1), memory, src_mask)[:, -1]
        torch.testing.assert_close(step, expected, atol=1e-5, rtol=1e-5)


def test_gradient_accumulation_equals_one_big_batch(shards):
    """Two accumulated batches give the gradients of one batch holding both (loss normalised by all tokens)."""
    import contextlib

    from syntrain.train import accumulate_gradients

    vocab = Vocab.build([read_split(str(shards / "train"))[0]])
    data = ParallelData(str(shards / "train"), vocab, batch_columns={declared("src_parent_mid"): "Pascal"})
    first, second = data.batches(400, seed=1)[:2]
    model = build_model(vocab_size=len(vocab), **{**SMALL, "dropout": 0.0, "parent_ignore": 0.0})
    cpu, plain = torch.device("cpu"), contextlib.nullcontext()

    def gradients(groups):
        model.zero_grad()
        loss, tokens = accumulate_gradients(model, [data.collate(rows) for rows in groups], cpu, plain, 0.1)
        return loss.item(), tokens, [p.grad.clone() for p in model.parameters()]

    loss_a, tokens_a, grads_a = gradients([first, second])
    loss_b, tokens_b, grads_b = gradients([np.concatenate([first, second])])
    assert tokens_a == tokens_b and abs(loss_a - loss_b) < 1e-5
    for a, b in zip(grads_a, grads_b):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-4)
    loss_c, _, grads_c = gradients([first])  # and it is not the gradient of one of them alone
    assert not all(torch.allclose(a, c, atol=1e-4) for a, c in zip(grads_a, grads_c))


def test_beam_of_one_is_greedy(shards, tmp_path):
    train(TrainConfig(data=str(shards / "train"), out=str(tmp_path), model={**SMALL, "dropout": 0.0}, max_tokens=600,
                      max_steps=40, lr=3e-3, warmup=10, log_interval=20, threads=1))
    model, vocab, _ = load_checkpoint(str(tmp_path / "last.pt"))
    data = ParallelData(str(shards / "test"), vocab, batch_columns={declared("src_parent_mid"): "Pascal"})
    batch = data.collate(data.keep[:30])
    parent = batch.inputs["src_parent_mid"]
    greedy_ids = [[t for t in ids if t != PAD_ID] for ids in greedy(model, batch.src, src_parent_mid=parent)]
    assert beam_search(model, batch.src, src_parent_mid=parent, beam=1) == greedy_ids
    assert len({tuple(ids) for ids in greedy_ids}) > 1  # not one constant output


def test_cli_bad_input_is_a_one_line_error(shards, tmp_path):
    garbage, foreign = tmp_path / "garbage.pt", tmp_path / "foreign.pt"
    garbage.write_text("not a checkpoint\n")
    torch.save({"weights": 1}, foreign)
    recipe = tmp_path / "typo.toml"
    recipe.write_text(f'[data]\ntrain = "{shards / "train"}"\n[model]\npascal_head = [2]\n')
    cases = [
        (["eval", "--checkpoint", str(garbage), "--data", str(shards / "test")],
         f"{garbage}: not a readable checkpoint"),
        (["translate", "--checkpoint", str(foreign), "-i", str(shards / "test")],
         f"{foreign}: not a syntrain checkpoint"),
        (["run", "--data", str(tmp_path), "--out", str(tmp_path / "r")],
         f"{tmp_path}: not a split folder (no manifest.json"),
        (["run", str(recipe)], f"{recipe}: [model] unknown key pascal_head (did you mean pascal_heads?)"),
    ]
    for args, message in cases:
        result = subprocess.run([sys.executable, "-m", "syntrain", *args], capture_output=True, text=True, cwd=REPO)
        assert result.returncode != 0, args
        assert message in result.stderr and "Traceback" not in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr


@pytest.mark.parametrize("recipe", sorted(os.listdir(os.path.join(REPO, "pipelines", "train"))))
def test_training_recipes_are_valid(recipe):
    """Every shipped recipe loads: known keys, a model that builds, data paths under out/ made by a pipeline."""
    from syntrain.config.core import PRESETS
    from syntrain.config.model import ModelConfig
    from syntrain.config.recipe import load_run_config

    values = load_run_config(os.path.join(REPO, "pipelines", "train", recipe))
    cfg = TrainConfig.from_dict(values)
    model_cfg = ModelConfig.from_dict({**PRESETS[cfg.preset], **cfg.model, "vocab_size": 8})
    sizes, pascal = model_cfg.sizes, model_cfg.section("pascal")
    assert all(0 <= h <= sizes.n_heads for h in pascal.pascal_heads)
    assert len(pascal.pascal_heads) <= sizes.enc_layers and cfg.accum_steps >= 1
    assert os.path.basename(cfg.data) == "train" and os.path.basename(cfg.valid) == "valid"
    if cfg.preset == "base":  # the paper setups: 32k tokens per update on one process (SyncAttn: 25k on WMT14,
        # 6k on WMT16 En-Ro, 12k on ASPEC Ja-En)
        papers = {"wmt16-en-ro-syncattn.toml": 6000, "wat-aspec-ja-en-syncattn.toml": 12000}
        per_update = papers.get(recipe, 25000 if model_cfg.section("sync").sync_lambda else 32768)
        assert cfg.max_tokens * cfg.accum_steps == per_update and model_cfg.dropouts.attention_dropout == 0.0


def test_prefetch_makes_the_next_batch_while_the_step_runs():
    """The data of step n + 1 is ready before step n ends (collation overlaps the step), in order; an error
    in `make` surfaces at its item."""
    from syntrain.dataset import prefetch

    made = []

    def make(i):
        made.append(i)
        return i * 10

    seen = []
    for value in prefetch(range(6), make, ahead=2):
        time.sleep(0.05)  # the training step
        seen.append(value)
        n = value // 10
        assert n == 5 or n + 1 in made, (n, made)  # the next batch exists before this step ends
    assert seen == [0, 10, 20, 30, 40, 50] and made == list(range(6))

    def broken(i):
        if i == 3:
            raise ValueError("bad row 3")
        return i

    got = []
    with pytest.raises(ValueError, match="bad row 3"):
        for value in prefetch(range(6), broken):
            got.append(value)
    assert got == [0, 1, 2]


def test_collated_token_count_matches_the_tensor(shards):
    table, _ = read_split(str(shards / "train"))
    data = ParallelData(str(shards / "train"), Vocab.build([table]))
    for rows in data.batches(300, seed=1, epoch=0)[:5]:
        batch = data.collate(rows)
        assert batch.tokens() == int((batch.tgt_out != PAD_ID).sum()) > 0
        assert batch.to("cpu").tokens() == batch.tokens()


def test_dropout_flags_reach_the_model(shards, tmp_path):
    """--dropout / --attention-dropout / --activation-dropout (fairseq's three knobs) land in the checkpoint's
    model and in its modules; unset, the last two follow --dropout."""
    run = tmp_path / "run"
    subprocess.run([sys.executable, "-m", "syntrain", "run", "--data", str(shards / "train"), "--out", str(run),
                    "--max-steps", "1", "--max-tokens", "300", "--preset", "tiny", "--threads", "1", "--dropout", "0.2",
                    "--attention-dropout", "0", "--activation-dropout", "0.05"], check=True, capture_output=True)
    model, _, ckpt = load_checkpoint(str(run / "last.pt"))
    assert ckpt["model_config"]["dropout"] == 0.2 and model.cfg.dropouts.attn_dropout == 0.0 \
        and model.cfg.dropouts.ff_dropout == 0.05
    assert model.encoder[0].attn.dropout == 0.0 and model.encoder[0].ff[2].p == 0.05 and model.encoder[0].drop.p == 0.2
    assert build_model(vocab_size=10, dropout=0.3).cfg.dropouts.ff_dropout == 0.3  # default: same as dropout
