"""synprep filter: reasons, check order, determinism across workers, real noisy data, errors, the CLI."""

import gzip
import json
import lzma
import subprocess
import sys
from pathlib import Path

import pytest

from synprep.errors import InputError
from synprep.filter import (
    REASONS,
    FilterSettings,
    FilterSummary,
    check_pair,
    check_pair_detailed,
    filter_files,
    make_identifier,
)

DATA = Path(__file__).parent / "data"
TOY = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "parallel" / "opennmt-toy-ende"
needs_toy = pytest.mark.skipif(not (TOY / "src-train.txt").is_file(), reason="../shared opennmt-toy-ende absent")

# one pair per reason (and two kept pairs), in REASONS order; settings below: min_len 2, max_len 12, ratio 2
PAIRS = [
    (b"The weather is nice today .", b"Das Wetter ist heute sch\xc3\xb6n ."),  # kept
    (b"The hotel is near the station .", b"Das Hotel liegt in der N\xc3\xa4he \xff des Bahnhofs ."),  # invalid_utf8
    (b"   ", b"Nichts ."),  # empty
    (b"Hotel Adlon Berlin", b"Hotel Adlon Berlin"),  # identical
    (b"Yes", b"Ja , das stimmt ."),  # too_short
    (b"one two three four five six seven eight nine ten eleven twelve thirteen",
     b"eins zwei drei vier f\xc3\xbcnf sechs sieben acht neun zehn elf zw\xc3\xb6lf dreizehn"),  # too_long
    (b"Thank you .", b"Vielen Dank f\xc3\xbcr Ihre freundliche Antwort und Hilfe ."),  # ratio
    (b"Le restaurant est ouvert tous les jours .", b"Das Restaurant ist jeden Tag ge\xc3\xb6ffnet ."),  # src_lang
    (b"The museum is closed on Mondays .", b"El museo est\xc3\xa1 cerrado los lunes ."),  # tgt_lang
    (b"We would like to thank everyone .", b"Wir m\xc3\xb6chten uns bei allen bedanken ."),  # kept
]
CHECKED = tuple(r for r in REASONS if r != "line_too_long")  # line_too_long has its own test
EXPECTED = [None, *CHECKED, None]


def settings(backend="py3langid", **kwargs):
    return FilterSettings("en", "de", **{"min_len": 2, "max_len": 12, "max_ratio": 2.0, "langid": backend, **kwargs})


def write_pairs(folder, pairs, src="train.en", tgt="train.de"):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / src).write_bytes(b"".join(s + b"\n" for s, _ in pairs))
    (folder / tgt).write_bytes(b"".join(t + b"\n" for _, t in pairs))
    return str(folder / src), str(folder / tgt)


def outputs(out_dir):
    return {p.name: p.read_bytes() for p in sorted(Path(out_dir).iterdir())}


@pytest.mark.parametrize("backend", ["py3langid", "langdetect"])
def test_every_reason_in_check_order(backend):
    config = settings(backend)
    langid = make_identifier(config)
    assert [check_pair(s, t, config, langid) for s, t in PAIRS] == EXPECTED


def test_first_failing_check_wins():
    config = settings()
    langid = make_identifier(config)
    assert check_pair(b"\xff", b"", config, langid) == "invalid_utf8"  # also empty
    assert check_pair("", "", config, langid) == "empty"  # also identical
    assert check_pair("a", "a", config, langid) == "identical"  # also too short
    assert check_pair("Merci", "Danke sch\u00f6n viele Male", config, langid) == "too_short"  # also src_lang
    assert check_pair("Bonjour mes amis", "Hallo", config, None) == "too_short"
    assert check_pair("Bonjour mes amis", "Hallo meine Freunde", config, None) is None  # no language checks


@pytest.mark.parametrize("backend", ["py3langid", "langdetect"])
def test_langid_min_letters_skips_short_sides_only(backend):
    """A side with fewer letters than langid_min_letters is not language-checked; longer ones still are."""
    # letters: "Le restaurant est ouvert tous les jours ." 33, "El museo está cerrado los lunes ." 26
    for min_letters, expected in ((0, EXPECTED), (27, [None, *CHECKED[:-1], None, None]),
                                  (34, [None, *CHECKED[:-2], None, None, None])):
        config = settings(backend, langid_min_letters=min_letters)
        assert [check_pair(s, t, config, make_identifier(config)) for s, t in PAIRS] == expected, min_letters
    short = ("Merci beaucoup", "Vielen Dank")  # French source, 13 letters
    assert check_pair(*short, settings(backend), make_identifier(settings(backend))) == "src_lang"
    assert check_pair(*short, settings(backend, langid_min_letters=14), None) is None
    with pytest.raises(ValueError, match="langid_min_letters"):
        settings(langid_min_letters=-1)


def test_filter_files_outputs_and_accounting(tmp_path):
    src, tgt = write_pairs(tmp_path / "in", PAIRS)
    summary = filter_files(src, tgt, str(tmp_path / "out"), settings(), workers=1)
    assert summary.total == len(PAIRS) == summary.kept + summary.rejected_total
    assert summary.rejected == {**{reason: 1 for reason in CHECKED}, "line_too_long": 0}
    out = outputs(tmp_path / "out")
    assert set(out) == {"train.en", "train.de", "ids", "rejected.tsv"}
    assert out["ids"] == b"0\n9\n"
    assert out["train.en"] == PAIRS[0][0] + b"\n" + PAIRS[9][0] + b"\n"
    assert out["train.de"] == PAIRS[0][1] + b"\n" + PAIRS[9][1] + b"\n"
    rows = [line.split("\t") for line in out["rejected.tsv"].decode("utf-8").splitlines()]
    assert [(int(r[0]), r[1]) for r in rows] == [(i, EXPECTED[i]) for i in range(1, 9)]
    assert all(len(r) == 5 for r in rows)  # line, reason, detail, source, target
    assert rows[0][4].startswith("Das Hotel") and "\ufffd" in rows[0][4]  # undecodable byte shown as U+FFFD
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".synprep")]  # temp folder gone


def test_workers_and_chunks_do_not_change_output(tmp_path):
    pairs = PAIRS * 37
    src, tgt = write_pairs(tmp_path / "in", pairs)
    filter_files(src, tgt, str(tmp_path / "one"), settings(), workers=1)
    filter_files(src, tgt, str(tmp_path / "two"), settings(), workers=2, chunk_size=7)
    filter_files(src, tgt, str(tmp_path / "three"), settings(), workers=3, chunk_size=1)
    assert outputs(tmp_path / "one") == outputs(tmp_path / "two") == outputs(tmp_path / "three")


def test_compressed_inputs_and_crlf(tmp_path):
    src, tgt = write_pairs(tmp_path / "plain", PAIRS)
    filter_files(src, tgt, str(tmp_path / "out-plain"), settings(), workers=1)
    packed = tmp_path / "packed"
    packed.mkdir()
    (packed / "train.en.gz").write_bytes(gzip.compress(Path(src).read_bytes().replace(b"\n", b"\r\n")))
    (packed / "train.de.xz").write_bytes(lzma.compress(Path(tgt).read_bytes()))
    filter_files(str(packed / "train.en.gz"), str(packed / "train.de.xz"), str(tmp_path / "out-packed"),
                 settings(), workers=2)
    assert outputs(tmp_path / "out-plain") == outputs(tmp_path / "out-packed")  # names without .gz/.xz


@pytest.mark.parametrize("compressed", [False, True])
def test_mismatched_line_counts_write_nothing(tmp_path, compressed):
    src, tgt = write_pairs(tmp_path / "in", PAIRS)
    short = tmp_path / "in" / "short.de"
    short.write_bytes(b"".join(t + b"\n" for _, t in PAIRS[:7]))
    if compressed:
        short = tmp_path / "in" / "short.de.gz"
        short.write_bytes(gzip.compress(b"".join(t + b"\n" for _, t in PAIRS[:7])))
    out = tmp_path / "deep" / "out"
    with pytest.raises(InputError, match=r"has 10 lines, .*short\.de(\.gz)? has 7 lines"):
        filter_files(src, str(short), str(out), settings(), workers=2, chunk_size=3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in"]


def test_last_line_without_newline_counts(tmp_path):
    (tmp_path / "a.en").write_bytes(b"Good morning to you all .\nSee you tomorrow , my friend .")
    (tmp_path / "a.de").write_bytes(b"Guten Morgen euch allen .\nBis morgen , mein Freund .\n")
    summary = filter_files(str(tmp_path / "a.en"), str(tmp_path / "a.de"), str(tmp_path / "o"), settings(), 1)
    assert (summary.total, summary.kept) == (2, 2)
    assert (tmp_path / "o" / "a.en").read_bytes().endswith(b"friend .\n")


def test_settings_serializable_and_validated():
    config = settings(langid_languages=("FR", "en", "hr"), langid_min_letters=20)
    data = json.loads(json.dumps(config.to_dict()))
    assert FilterSettings.from_dict(data) == config
    assert config.identifier_languages() == ("de", "en", "fr", "hr")
    for bad in ({"src_lang": "eng"}, {"min_len": 5, "max_len": 4}, {"max_ratio": 0.5}, {"langid": "cld9"}):
        with pytest.raises(ValueError):
            FilterSettings(**{"src_lang": "en", "tgt_lang": "de", **bad})


def test_warning_on_unusual_rejected_share(tmp_path):
    src, tgt = write_pairs(tmp_path / "in", PAIRS)
    messages = []
    filter_files(src, tgt, str(tmp_path / "out"), settings(), 1, warn=messages.append)
    assert len(messages) == 1 and "80.0% of 10 pairs rejected" in messages[0]
    assert FilterSummary(total=10, kept=8, rejected={**dict.fromkeys(REASONS, 0), "ratio": 2}).warning() is None


def labelled_toy_lines():
    rows = []
    for line in (DATA / "opennmt_toy_other_languages.tsv").read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            side, number, lang = line.split("\t")
            rows.append((side, int(number), lang))
    return rows


# real noise in opennmt-toy-ende (0-based line numbers), found by reading the data
TOY_REJECTIONS = {
    4: "empty",  # source line empty
    30: "tgt_lang",  # "This page was last modified ..." left in English on the German side
    152: "src_lang",  # Croatian source: "Ljeto i ljetovanje na Kornatima ..."
    386: "tgt_lang",  # French target: "Il est exploité depuis 43 ans ..."
    1224: "src_lang",  # French source: "Ajoutez de bonnes photos de vous ..."
    1507: "identical",  # "." on both sides
    2960: "src_lang",  # Ukrainian on both sides
    9218: "ratio",  # Croatian source, unrelated German target three times shorter
}


@needs_toy
def test_toy_corpus_fast_backend(tmp_path):
    src, tgt = str(TOY / "src-train.txt"), str(TOY / "tgt-train.txt")
    summary = filter_files(src, tgt, str(tmp_path / "out"), FilterSettings("en", "de", langid="py3langid"), 2)
    assert summary.total == 10000 == summary.kept + summary.rejected_total
    rows = (tmp_path / "out" / "rejected.tsv").read_text(encoding="utf-8").splitlines()
    reasons = {int(r.split("\t")[0]): r.split("\t")[1] for r in rows}
    assert {n: reasons.get(n) for n in TOY_REJECTIONS} == TOY_REJECTIONS
    labelled = {n for _, n, _ in labelled_toy_lines()}
    assert len(labelled & set(reasons)) >= 0.95 * len(labelled)  # hand-labelled non-en/de lines are caught
    kept_ids = [int(x) for x in (tmp_path / "out" / "ids").read_text().split()]
    assert sorted(kept_ids + list(reasons)) == list(range(10000))
    filter_files(src, tgt, str(tmp_path / "one"), FilterSettings("en", "de", langid="py3langid"), 1)
    assert outputs(tmp_path / "out") == outputs(tmp_path / "one")


@needs_toy
@pytest.mark.slow
def test_toy_corpus_langdetect_deterministic(tmp_path):
    head = {side: b"".join((TOY / f"{side}-train.txt").read_bytes().splitlines(keepends=True)[:1600])
            for side in ("src", "tgt")}
    write_pairs(tmp_path / "in", [(b"", b"")])
    (tmp_path / "in" / "train.en").write_bytes(head["src"])
    (tmp_path / "in" / "train.de").write_bytes(head["tgt"])
    src, tgt = str(tmp_path / "in" / "train.en"), str(tmp_path / "in" / "train.de")
    config = FilterSettings("en", "de", langid="langdetect")
    filter_files(src, tgt, str(tmp_path / "two"), config, 2, chunk_size=97)
    rows = (tmp_path / "two" / "rejected.tsv").read_text(encoding="utf-8").splitlines()
    reasons = {int(r.split("\t")[0]): r.split("\t")[1] for r in rows}
    assert {n: reasons.get(n) for n in TOY_REJECTIONS if n < 1600} == {
        n: r for n, r in TOY_REJECTIONS.items() if n < 1600}
    (tmp_path / "in" / "small.en").write_bytes(b"".join(head["src"].splitlines(keepends=True)[:400]))
    (tmp_path / "in" / "small.de").write_bytes(b"".join(head["tgt"].splitlines(keepends=True)[:400]))
    small = str(tmp_path / "in" / "small.en"), str(tmp_path / "in" / "small.de")
    filter_files(*small, str(tmp_path / "s1"), config, 1)
    filter_files(*small, str(tmp_path / "s2"), config, 2, chunk_size=13)
    assert outputs(tmp_path / "s1") == outputs(tmp_path / "s2")
    assert outputs(tmp_path / "s1")["rejected.tsv"] == b"".join(
        r.encode("utf-8") + b"\n" for r in rows if int(r.split("\t")[0]) < 400)


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "synprep.cli", "filter", *args], capture_output=True, text=True)


def test_cli_end_to_end(tmp_path):
    src, tgt = write_pairs(tmp_path / "in", PAIRS)
    out = tmp_path / "out"
    result = run_cli("--src", src, "--tgt", tgt, "--src-lang", "en", "--tgt-lang", "de", "-o", str(out),
                     "--langid", "py3langid", "--min-len", "2", "--max-len", "12", "--max-ratio", "2",
                     "--workers", "2")
    assert result.returncode == 0, result.stderr
    assert "10 pairs: 2 kept, 8 rejected" in result.stdout
    assert all(f"{reason}" in result.stdout for reason in REASONS)
    assert "warning: 80.0%" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert (out / "ids").read_text() == "0\n9\n"


def test_cli_errors_exit_2(tmp_path):
    src, tgt = write_pairs(tmp_path / "in", PAIRS)
    (tmp_path / "in" / "short.de").write_text("Hallo\n")
    result = run_cli("--src", src, "--tgt", str(tmp_path / "in" / "short.de"), "--src-lang", "en",
                     "--tgt-lang", "de", "-o", str(tmp_path / "out"))
    assert result.returncode == 2
    assert "has 10 lines" in result.stderr and "has 1 lines" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not (tmp_path / "out").exists()
    result = run_cli("--src", src, "--tgt", tgt, "--src-lang", "english", "--tgt-lang", "de", "-o", "x")
    assert result.returncode == 2 and "ISO 639-1" in result.stderr


def test_overlong_lines_are_rejected_first_on_every_split():
    """line_too_long comes right after empty, also without settings (valid/test in convert), with the length."""
    long = "Das ist gut . " * 400  # 5,599 characters without the last space
    for config in (settings(), None):
        assert check_pair_detailed(long, "Das ist gut .", config) == ("line_too_long", "5599 characters > 5000")
    assert check_pair(long, "Kurz .", settings(max_chars=6000), None) == "too_long"  # tokens: the next check
    assert check_pair_detailed("Yes", "Ja", None, max_chars=2) == ("line_too_long", "3 characters > 2")


def test_cli_refuses_a_non_empty_output_folder_without_overwrite(tmp_path):
    src, tgt = write_pairs(tmp_path / "in", PAIRS)
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    args = ["--src", src, "--tgt", tgt, "--src-lang", "en", "--tgt-lang", "de", "-o", str(out), "--workers", "1"]
    refused = run_cli(*args)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert str(out) in refused.stderr and "not empty" in refused.stderr and "--overwrite" in refused.stderr
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]  # nothing written
    done = run_cli(*args, "--overwrite")
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in out.iterdir()) == ["ids", "notes.txt", "rejected.tsv", "train.de", "train.en"]
    (out / "ids").write_text("stale\n")
    assert run_cli(*args).returncode == 2 and (out / "ids").read_text() == "stale\n"  # a filter output, too
    assert run_cli(*args, "--overwrite").returncode == 0 and (out / "ids").read_text() != "stale\n"
    (tmp_path / "empty").mkdir()
    assert run_cli(*args[:-4], "-o", str(tmp_path / "empty")).returncode == 0  # an empty folder is fine
    (tmp_path / "file").write_text("x\n")
    as_file = run_cli(*args[:-4], "-o", str(tmp_path / "file"), "--overwrite")
    assert as_file.returncode == 2 and "is a file" in as_file.stderr and as_file.stderr.count("\n") == 1


def test_cli_default_identifier_is_py3langid(tmp_path):
    """py3langid is the default (docs/langid.md): it keeps this genuine caption pair, langdetect calls it Danish."""
    src, tgt = write_pairs(tmp_path / "in", [(b"A black dog leaps over a log.",
                                              b"Ein schwarzer Hund springt \xc3\xbcber einen Baumstamm.")])
    args = ["--src", src, "--tgt", tgt, "--src-lang", "en", "--tgt-lang", "de", "--workers", "1"]
    default = run_cli(*args, "-o", str(tmp_path / "default"))
    assert default.returncode == 0 and "1 pairs: 1 kept" in default.stdout, default.stdout + default.stderr
    slow = run_cli(*args, "-o", str(tmp_path / "langdetect"), "--langid", "langdetect")
    assert slow.returncode == 0 and "1 pairs: 0 kept" in slow.stdout
    assert (tmp_path / "langdetect" / "rejected.tsv").read_text().startswith("0\tsrc_lang\tdetected da")
    assert FilterSettings("en", "de").langid == "py3langid" == make_identifier(FilterSettings("en", "de")).name


def test_filter_command_batches_the_detector_like_convert(tmp_path, monkeypatch):
    """`synprep filter` hands each chunk's sides to the language identifier in one batch, as convert's filter does,
    and rejects exactly the pairs convert rejects, with the same details."""
    from synprep.convert.filter_parse import ParseJob, filter_setups, filter_split_piece
    from synprep.langid.langdetect_backend import LangdetectIdentifier

    from .conftest import SAMPLE_DATA

    src = (SAMPLE_DATA / "parallel" / "train.en").read_bytes().splitlines()
    tgt = (SAMPLE_DATA / "parallel" / "train.de").read_bytes().splitlines()
    settings = FilterSettings("en", "de", langid="langdetect", langid_languages=("en", "de", "fr"))
    batches: list[int] = []
    original = LangdetectIdentifier.detect_scored_many

    def counted(self, texts):  # noqa: ANN001, ANN202
        batches.append(len(texts))
        return original(self, texts)

    monkeypatch.setattr(LangdetectIdentifier, "detect_scored_many", counted)
    filter_files(str(SAMPLE_DATA / "parallel" / "train.en"), str(SAMPLE_DATA / "parallel" / "train.de"),
                 str(tmp_path / "out"), settings, workers=1)
    assert len(batches) == 2 and batches[0] > 40  # one batch per side for the chunk, not one call per pair
    job = ParseJob(settings, (None, None), False, settings.max_chars)
    convert = filter_split_piece(filter_setups((job,)), (0, (0, (src, tgt))))["rejected"]
    rejected = [line.split("\t")[:3] for line in (tmp_path / "out" / "rejected.tsv").read_text().splitlines()]
    assert rejected == [[str(r[0]), r[1], r[2]] for r in convert] and any(r[1] == "src_lang" for r in rejected)
