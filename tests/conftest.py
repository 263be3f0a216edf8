"""Session-wide fixtures: tiny parser models trained from sample_data/ (real libraries, no mocks)."""

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SAMPLE_DATA = REPO / "sample_data"
SHARED = REPO.parent / "shared"

# A suite started as a background job of a non-interactive shell (`make test &` in a script, some CI runners)
# inherits SIGINT ignored, and an ignored signal stays ignored in every child process: the tests that press
# Ctrl-C on a synprep/syntrain child would see it ignored. The default handler here gives children the default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Progress lines off a terminal come at a steady interval (synprep.progress, default 30 s): on a loaded machine a
# command under test could pass it and print one, and the tests that count stderr lines would depend on the
# machine's speed. An hour here (inherited by every child process); the progress tests set a short interval.
os.environ["SYNPREP_PROGRESS_SECONDS"] = "3600"


@pytest.fixture(scope="session")
def tiny_udpipe(tmp_path_factory):
    """A function lang -> path of a UDPipe model trained (tiny preset) on sample_data/<lang>.conllu."""
    from synprep.parse.train import train_udpipe

    models = {}

    def get(lang="en"):
        if lang not in models:
            path = tmp_path_factory.mktemp("udpipe") / f"{lang}.udpipe"
            train_udpipe(str(SAMPLE_DATA / f"{lang}.conllu"), str(path), "tiny")
            models[lang] = str(path)
        return models[lang]

    return get


@pytest.fixture(scope="session")
def tiny_stanza(tmp_path_factory):
    """A stanza model folder (<dir>/en/{pretrain,pos,depparse}/tiny.pt) trained on sample_data/en.conllu (~30 s)."""
    pytest.importorskip("stanza")
    from stanza.models.common.pretrain import Pretrain

    conllu = str(SAMPLE_DATA / "en.conllu")
    out = tmp_path_factory.mktemp("stanza")
    for processor in ("pretrain", "pos", "depparse"):
        (out / "en" / processor).mkdir(parents=True)
    (out / "resources.json").write_text("{}")
    # random 50-d vectors for the corpus vocabulary: stanza's taggers need a pretrain file
    rng = random.Random(0)
    words = sorted({line.split("\t")[1].lower() for line in open(conllu, encoding="utf-8") if line[:1].isdigit()})
    vectors = out / "vectors.txt"
    with open(vectors, "w", encoding="utf-8") as stream:
        stream.write(f"{len(words)} 50\n")
        for word in words:
            stream.write(word + " " + " ".join(f"{rng.uniform(-0.5, 0.5):.4f}" for _ in range(50)) + "\n")
    pretrain = out / "en" / "pretrain" / "tiny.pt"
    Pretrain(str(pretrain), str(vectors)).load()
    common = ["--lang", "en", "--shorthand", "en_tiny", "--train_file", conllu, "--eval_file", conllu,
              "--wordvec_pretrain_file", str(pretrain), "--save_name", "tiny.pt", "--max_steps", "60",
              "--eval_interval", "30", "--hidden_dim", "32", "--char_hidden_dim", "32", "--word_emb_dim", "16",
              "--char_emb_dim", "16"]
    env = {**os.environ, "OMP_NUM_THREADS": "2"}
    runs = [
        ["stanza.models.tagger", "--output_file", str(out / "pos_pred.conllu"), "--save_dir", str(out / "en" / "pos"),
         "--batch_size", "100"],
        ["stanza.models.parser", "--output_file", str(out / "dep_pred.conllu"),
         "--save_dir", str(out / "en" / "depparse"), "--batch_size", "500", "--tag_emb_dim", "8",
         "--deep_biaff_hidden_dim", "32", "--transformed_dim", "16", "--no_checkpoint", "--no_bert_model"],
    ]
    for module, *args in runs:
        done = subprocess.run([sys.executable, "-m", module, "--mode", "train", *common, *args],
                              capture_output=True, text=True, env=env)
        assert done.returncode == 0, done.stderr[-3000:]
    return str(out)


def convert_synth(root: Path, name: str, src: list[str], tgt: list[str] | None = None, max_depth: int = 1) -> Path:
    """A synthetic corpus (60 pairs, 40 BPE symbols) converted with these `[features]` lists (`tgt` None: the
    synth pipeline's own); returns the train split's folder."""
    from synprep.synth import SynthConfig, write_corpus

    write_corpus(str(root / "corpus"), 60, 5, SynthConfig(max_depth=max_depth), bpe_symbols=40)
    pipeline = (root / "corpus" / "pipeline.toml").read_text()
    pipeline = pipeline.replace('src = ["parents", "distances", "labels"]', f"src = {src!r}".replace("'", '"'))
    if tgt is not None:
        pipeline = pipeline.replace('tgt = ["parents", "transitions", "labels"]', f"tgt = {tgt!r}".replace("'", '"'))
    assert pipeline.count(f'"{src[-1]}"') == 1 + (tgt is not None and src[-1] in tgt)
    (root / "corpus" / f"{name}.toml").write_text(pipeline)
    subprocess.run([sys.executable, "-m", "synprep.cli", "convert", str(root / "corpus" / f"{name}.toml"), "--output",
                    str(root / "shards"), "--workers", "1"], check=True, capture_output=True)
    return root / "shards" / "train"


@pytest.fixture(scope="session")
def parse_cache_runs(tmp_path_factory, tiny_udpipe):
    """A convert without a cache (the reference shards), and one with other BPE settings into a new cache (the
    cache is then warm for the reference configuration)."""
    from .test_convert import convert
    from .test_parse_cache import pipeline

    root = tmp_path_factory.mktemp("parse_cache")
    convert(pipeline(root / "plain", tiny_udpipe), "--workers", "2")
    convert(pipeline(root / "cold", tiny_udpipe, symbols=120, cache=str(root / "cache")), "--workers", "2")
    return root
