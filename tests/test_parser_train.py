"""synprep parser train: progress, held-out scores, presets and option pass-through, treebank checks, spaCy."""

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from synprep.errors import InputError
from synprep.parse.train import PRESETS, check_treebank, component_options, planned_rounds
from synprep.textio import file_sha256, path_sha256

REPO = Path(__file__).resolve().parents[1]
SAMPLE_DATA = REPO / "sample_data"
SHARED = REPO.parent / "shared"
EN = str(SAMPLE_DATA / "en.conllu")


def synprep(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "synprep.cli", *args], capture_output=True, text=True,
                          env=env and {**os.environ, **env})


def test_progress_and_heldout_scores(tmp_path):
    """Off a terminal, a plain progress line at the interval (0 here: one per epoch/iteration) with the phase,
    the rate, the time elapsed and an ETA."""
    done = synprep("parser", "train", "--conllu", EN, "--heldout", EN, "-o", str(tmp_path / "m.udpipe"),
                   "--preset", "tiny", env={"SYNPREP_PROGRESS_SECONDS": "0"})
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    total = planned_rounds(component_options("tiny"))
    progress = [line for line in lines if line.startswith("parser train: ") and " held-out " not in line]
    assert len(progress) == total  # one line per epoch/iteration at interval 0
    assert re.fullmatch(rf"parser train: tokenizer 1/{total} epochs\+iterations \(\d+%\), [\d.]+ epochs\+iterations/s, "
                        r"\d+m\d\ds elapsed, ETA \d+m\d\ds", progress[0]), progress[0]
    assert progress[-1].startswith(f"parser train: parser {total}/{total} ")
    assert "\r" not in done.stderr
    held = [line for line in lines if line.startswith("held-out ")]
    assert len(held) == 2 and "gold tokenization" in held[0] and "raw text" in held[1]
    uas = float(re.search(r"UAS +([\d.]+)", held[0]).group(1))
    assert 0 < uas < 100
    # the trainer's own held-out scores at each parser iteration, then the recorded final ones
    iterations = int(re.search(r"iterations=(\d+)", PRESETS["tiny"]["parser"]).group(1))
    interim = [line for line in lines if line.startswith("parser train: held-out UAS ")]
    assert [re.fullmatch(r"parser train: held-out UAS [\d.]+ LAS [\d.]+ at parser iteration (\d+)/(\d+)",
                         line).groups() for line in interim] == [(str(k), str(iterations))
                                                                 for k in range(1, iterations + 1)]
    record = json.loads((tmp_path / "m.udpipe.scores.json").read_text())
    assert record["scores"]["gold"]["uas"] == uas and record["sha256"] == file_sha256(str(tmp_path / "m.udpipe"))


def test_option_pass_through_leaves_out_the_tokenizer(tmp_path):
    model = tmp_path / "notok.udpipe"
    done = synprep("parser", "train", "--conllu", EN, "-o", str(model), "--preset", "tiny",
                   "--tokenizer-options", "none", "--heldout", EN)
    assert done.returncode == 0, done.stderr
    held = [line for line in done.stderr.splitlines() if line.startswith("held-out ")]
    assert len(held) == 1 and "gold tokenization" in held[0]  # no tokenizer: no raw-text score
    parse = synprep("parse", "--backend", "udpipe", "--model", str(model), "-i", EN, "-o", str(tmp_path / "o"))
    assert parse.returncode == 2 and "has no tokenizer" in parse.stderr


def test_presets_grow_and_options_replace():
    assert list(PRESETS) == ["tiny", "small", "medium", "default"]
    rounds = [planned_rounds(component_options(p)) for p in ("tiny", "small", "medium", "default")]
    assert rounds == sorted(rounds) and len(set(rounds)) == 4
    assert component_options("small", {"parser": "iterations=1"})["parser"] == "iterations=1"
    with pytest.raises(InputError, match="unknown preset"):
        component_options("huge")


def write_unspaced(path: Path, space_after: bool) -> None:
    misc = "SpaceAfter=No" if space_after else "_"
    sentences = []
    for n in range(12):
        sentences.append(f"# text = 我们喜欢中文{n}。\n1\t我们\t_\tPRON\t_\t_\t2\tnsubj\t_\t{misc}\n"
                         f"2\t喜欢\t_\tVERB\t_\t_\t0\troot\t_\t{misc}\n3\t中文{n}\t_\tNOUN\t_\t_\t2\tobj\t_\t{misc}\n"
                         "4\t。\t_\tPUNCT\t_\t_\t2\tpunct\t_\t_\n")
    path.write_text("\n".join(sentences) + "\n", encoding="utf-8")


def test_unspaced_language_without_space_after_is_refused(tmp_path):
    bad, good = tmp_path / "zh-v1.conllu", tmp_path / "zh-v2.conllu"
    write_unspaced(bad, space_after=False)
    write_unspaced(good, space_after=True)
    done = synprep("parser", "train", "--conllu", str(bad), "-o", str(tmp_path / "zh.udpipe"), "--preset", "tiny")
    assert done.returncode == 2 and done.stderr.startswith(f"synprep: error: {bad}: no token has SpaceAfter=No")
    assert "--allow-no-spaceafter" in done.stderr and len(done.stderr.splitlines()) == 1
    assert check_treebank(str(good)) is None and check_treebank(EN) is None
    assert "warning" in check_treebank(str(bad), allow_no_spaceafter=True)


@pytest.mark.skipif(not (SHARED / "data" / "ud" / "UD_Chinese-GSD-r1.4").exists(), reason="no shared UD data")
def test_shared_ud_v1_chinese_is_refused_and_v2_accepted():
    with pytest.raises(InputError, match="SpaceAfter=No"):
        check_treebank(str(SHARED / "data" / "ud" / "UD_Chinese-GSD-r1.4" / "zh-ud-dev.conllu"))
    assert check_treebank(str(SHARED / "data" / "ud" / "UD_Chinese-GSD" / "zh_gsd-ud-dev.conllu")) is None


@pytest.mark.skipif(importlib.util.find_spec("spacy") is None, reason="spaCy not installed")
def test_spacy_trained_from_conllu_parses_and_scores(tmp_path):
    out = tmp_path / "spacy_en"
    done = synprep("parser", "train", "--backend", "spacy", "--conllu", EN, "--heldout", EN, "-o", str(out),
                   "--preset", "tiny", "--lang", "en", env={"SYNPREP_PROGRESS_SECONDS": "0"})
    assert done.returncode == 0, done.stderr[-3000:]
    steps = [line for line in done.stderr.splitlines() if line.startswith("parser train: spacy ")]
    assert steps and re.match(r"parser train: spacy \d+/30 steps \(\d+%\), [\d.]+ steps/s, .* ETA ", steps[-1]), steps
    assert (out / "meta.json").exists() and (out / "parser").is_dir()
    held = [line for line in done.stderr.splitlines() if line.startswith("held-out ")]
    assert len(held) == 2 and "UAS" in held[0]
    interim = [line for line in done.stderr.splitlines() if line.startswith("parser train: held-out UAS ")]
    assert [line.rsplit(" ", 1)[1] for line in interim] == ["0", "10", "20", "30"]  # eval_frequency 10 (tiny)
    record = json.loads((tmp_path / "spacy_en.scores.json").read_text())  # a folder: its files' digest
    assert record["sha256"] == path_sha256(str(out)) and record["scores"]["gold"]["uas"] == float(
        re.search(r"UAS +([\d.]+)", held[0]).group(1))
    text = tmp_path / "in.txt"
    text.write_text("The dog barked .\nShe smiled and waved .\n", encoding="utf-8")
    parse = synprep("parse", "--backend", "spacy", "--model", str(out), "-i", str(text), "-o", str(tmp_path / "o"),
                    "--workers", "1")
    assert parse.returncode == 0, parse.stderr
    evaluated = synprep("parser", "eval", "--model", str(out), "--conllu", EN, "--mode", "gold")
    assert evaluated.returncode == 0 and evaluated.stdout.startswith("gold tokenization"), evaluated.stderr


def test_spacy_eta_honours_max_minutes(tmp_path):
    """With steps planned for hours, the ETA of every progress line stays within the time budget (it counted
    towards max_steps and said hours where minutes were left)."""
    pytest.importorskip("spacy")
    done = synprep("parser", "train", "--backend", "spacy", "--conllu", EN, "-o", str(tmp_path / "s"),
                   "--preset", "tiny", "--lang", "en", "--max-minutes", "0.1", "--set", "training.max_steps=1000000",
                   "--set", "training.eval_frequency=100000", env={"SYNPREP_PROGRESS_SECONDS": "0"})
    assert done.returncode == 0, done.stderr[-3000:]
    etas = [re.search(r"ETA (\d+)m(\d\d)s", line) for line in done.stderr.splitlines()
            if line.startswith("parser train: spacy ")]
    assert len(etas) > 5 and all(etas)
    assert all(60 * int(m.group(1)) + int(m.group(2)) <= 6 for m in etas)  # 0.1 minutes


def test_spacy_bar_says_the_eta_within_max_minutes(tmp_path, capfd):
    """On a terminal (a bar), the bar's own ETA counts towards max_steps: the budget's ETA is shown beside it."""
    pytest.importorskip("spacy")
    from synprep.parse.train_spacy import train_spacy

    train_spacy(EN, str(tmp_path / "s"), "tiny", lang="en", quiet=True, max_minutes=0.05, progress_shown=True,
                overrides={"training.max_steps": 1000000, "training.eval_frequency": 100000})
    said = [int(m.group(1)) * 60 + int(m.group(2))
            for m in re.finditer(r"ETA (\d+)m(\d\d)s \(--max-minutes\)", capfd.readouterr().err)]
    assert said and all(eta <= 3 for eta in said)


def test_spacy_bad_override_is_one_line(tmp_path):
    pytest.importorskip("spacy")
    done = synprep("parser", "train", "--backend", "spacy", "--conllu", EN, "-o", str(tmp_path / "s"),
                   "--preset", "tiny", "--set", "nonsense")
    assert done.returncode == 2 and done.stderr.startswith("synprep: error: --set expects KEY=VALUE"), done.stderr


def test_bad_option_string_fails_with_udpipes_reason(tmp_path):
    model = tmp_path / "bad.udpipe"
    done = synprep("parser", "train", "--conllu", EN, "-o", str(model), "--preset", "tiny",
                   "--parser-options", "iterations=x")
    lines = done.stderr.splitlines()
    assert done.returncode == 2 and lines[-1].startswith(f"synprep: error: {EN}: UDPipe training failed: Cannot parse")
    assert any(line.startswith("Training tagger") for line in lines)  # the training log is shown on failure
    assert not model.exists() and not Path(str(model) + ".part").exists()
    assert "Traceback" not in done.stderr


def test_spacy_training_docs_hold_one_sentence_each(tmp_path):
    """synprep parses one line as one sentence, so the parser learns from one sentence per doc (it never has
    to find boundaries inside a line); every treebank sentence becomes one doc, none dropped or merged."""
    pytest.importorskip("spacy")
    import spacy
    from spacy.tokens import DocBin

    from synprep.conllu import read_conllu
    from synprep.parse.train_spacy import _write_docbin

    path = tmp_path / "train.spacy"
    sentences = _write_docbin(EN, str(path))
    docs = list(DocBin().from_disk(path).get_docs(spacy.blank("en").vocab))
    gold = list(read_conllu(EN))
    assert sentences == len(gold) == len(docs) > 1
    assert [[t.text for t in doc] for doc in docs] == [[w[1] for w in s.words] for s in gold]


def test_udpipe_parser_trained_without_tagger_parses(tmp_path):
    """`--tagger-options none` with a parser that reads word forms only: the model has no tagger, and synprep
    runs it without one (UPOS `_`), from raw and from pre-tokenized text."""
    from synprep.conllu import read_conllu, to_tree

    model = tmp_path / "notag.udpipe"
    parser_options = PRESETS["tiny"]["parser"].replace("embedding_upostag=8", "embedding_upostag=0")
    done = synprep("parser", "train", "--conllu", EN, "-o", str(model), "--preset", "tiny",
                   "--tagger-options", "none", "--parser-options", parser_options)
    assert done.returncode == 0, done.stderr[-2000:]
    text = tmp_path / "in.txt"
    text.write_text("The dog barked .\nShe smiled and waved .\n", encoding="utf-8")
    for extra in ([], ["--pretokenized"]):
        out = tmp_path / f"out{len(extra)}.conllu"
        parsed = synprep("parse", "--backend", "udpipe", "--model", str(model), "-i", str(text), "-o", str(out),
                         "--workers", "1", *extra)
        assert parsed.returncode == 0, parsed.stderr
        sentences = list(read_conllu(str(out)))
        assert [[w[1] for w in s.words] for s in sentences] == [["The", "dog", "barked", "."],
                                                              ["She", "smiled", "and", "waved", "."]]
        assert {w[3] for s in sentences for w in s.words} == {"_"}
        assert all(sum(h == 0 for h in to_tree(s, str(out)).heads) == 1 for s in sentences)


def test_udpipe_eta_weighs_the_components_rounds(monkeypatch):
    """The ETA after the tokenizer's epochs counts the parser's iterations at their own cost (with the `small`
    preset, about seven tokenizer epochs' worth each), not at the tokenizer's rate: the one rate over all rounds
    it replaces underestimated by >3x."""
    import io

    from synprep.parse import train as udpipe_train

    clock = [0.0]
    monkeypatch.setattr(udpipe_train.time, "monotonic", lambda: clock[0])
    rounds = udpipe_train.planned_component_rounds(component_options("small"))
    assert rounds == {"tokenizer": 4, "tagger": 4, "parser": 4}
    tracker = udpipe_train.Progress(rounds, io.StringIO(), bar=False, costs=udpipe_train.ROUND_COST["small"])
    tracker.begin()
    tracker.line("Training tokenizer with the following options: ...")
    for epoch in range(1, 5):
        clock[0] += 20.0
        tracker.line(f"Epoch {epoch}, logprob: -1e+04, training acc: 99%")
    cost = udpipe_train.ROUND_COST["small"]
    uniform = 20.0 * (12 - 4)  # the old estimate: every round at the tokenizer's 20 s
    assert tracker.eta() == pytest.approx(4 * 20.0 * cost["tagger"] + 4 * 20.0 * cost["parser"])
    assert tracker.eta() > 3 * uniform
    tracker.line("Training tagger model 1.")
    clock[0] += 30.0
    tracker.line("Iteration 1: done, accuracy 81%")
    per_unit = (80.0 + 30.0) / (4 * 1.0 + 1 * cost["tagger"])
    assert tracker.eta() == pytest.approx(3 * 30.0 + 4 * cost["parser"] * per_unit)
    tracker.close()


def test_stanza_trained_from_conllu_parses_through_the_cli(tiny_stanza_trained, tmp_path):
    """`parser train --backend stanza` (tiny preset: tokenizer, tagger, parser, no word vectors) reports progress
    and held-out scores, and `synprep parse` reads the folder, raw and pre-tokenized: one tree per line."""
    from synprep.conllu import read_conllu, read_trees

    model, stderr = tiny_stanza_trained
    lines = stderr.splitlines()
    progress = [line for line in lines if line.startswith("parser train: stanza ")]
    assert progress and re.fullmatch(r"parser train: stanza tokenize \d+/80 steps \(\d+%\), [\d.]+ steps/s, "
                                     r"\d+m\d\ds elapsed(, ETA \d+m\d\ds)?", progress[0])
    assert progress[-1].startswith("parser train: stanza depparse 80/80 steps")
    held = [line for line in lines if line.startswith("held-out ")]
    assert len(held) == 2 and "gold tokenization" in held[0] and "raw text" in held[1]
    assert 0 < float(re.search(r"UAS +([\d.]+)", held[0]).group(1)) <= 100
    interim = [line for line in lines if line.startswith("parser train: held-out LAS ")]  # stanza's dev LAS
    assert interim and interim[-1].endswith(" at depparse step 30/30")
    record = json.loads((Path(model) / "en.scores.json").read_text())
    assert record["sha256"] == path_sha256(str(Path(model) / "en")) and record["scores"]["gold"]["uas"] == float(
        re.search(r"UAS +([\d.]+)", held[0]).group(1))
    source = tmp_path / "in.txt"
    source.write_text("The dog chased a cat .\n\nMy sister lives in Paris .\n", encoding="utf-8")
    for extra in ([], ["--pretokenized"]):
        out = tmp_path / f"out{len(extra)}.conllu"
        done = synprep("parse", "--backend", "stanza", "--model-dir", model, "--lang", "en", "-i", str(source),
                       "-o", str(out), "--workers", "1", *extra)
        assert done.returncode == 0, done.stderr
        assert len(list(read_trees(str(out)))) == 3  # read_trees refuses a tree without exactly one root, a cycle
        sentences = list(read_conllu(str(out)))
        assert not sentences[1].words and all(s.words for s in (sentences[0], sentences[2]))
        if extra:
            assert [w[1] for w in sentences[2].words] == "My sister lives in Paris .".split()


def test_stanza_options_are_checked_before_training(tmp_path):
    out = str(tmp_path / "m")
    refusals = [(["--backend", "stanza", "--max-minutes", "1"], "--max-minutes is for --backend spacy"),
                (["--set", "pos.hidden_dim=8"], "--set is for --backend spacy or stanza, not udpipe"),
                (["--backend", "stanza", "--set", "pos.no_such_option=1"], "no option --no_such_option")]
    for args, message in refusals:
        done = synprep("parser", "train", "--conllu", EN, "-o", out, *args)
        assert done.returncode == 2 and message in done.stderr, (args, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1 or "Usage:" in done.stderr
    assert not Path(out).exists()
