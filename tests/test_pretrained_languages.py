"""A multilingual M2M100 model's language codes (`[model] src_lang_code`, `tgt_lang_code`: syntrain.pretrained):
on a tiny random model laid out as facebook/m2m100_418M (codes numbered after vocab.json, as M2M100Tokenizer
numbers them), the batches begin as the tokenizer encodes them with src_lang / tgt_lang (the source with its
code, the decoder input with the start token and the target code, which has no loss), the logits equal
transformers' on them, greedy decoding gives generate()'s tokens with the target code forced first, every
source batch column moves with the code, and a run converted end to end from the folder trains, scores and
exports with its codes."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("transformers")
pytest.importorskip("sentencepiece")

import pyarrow as pa  # noqa: E402
import torch  # noqa: E402

from syntrain.columns import ID, SRC_SUBWORDS, SRC_TEXT, TGT_SUBWORDS, TGT_TEXT  # noqa: E402
from syntrain.dataset import NO_PREFIXES, ParallelData  # noqa: E402
from syntrain.pretrained import PretrainedSource, load_pretrained  # noqa: E402
from syntrain.search import beam_search, greedy  # noqa: E402
from syntrain.vocab import BOS_ID, PAD_ID  # noqa: E402

from .conftest import SAMPLE_DATA, cli_in_process  # noqa: E402
from .hf_models import load_hf, m2m100_with_sentencepiece, nllb_with_tokenizer  # noqa: E402

SOURCES = ["The cat sleeps on the mat.", "A dog runs.", "We read books in the garden every day."]
TARGETS = ["Die Katze schläft.", "Ein Hund läuft schnell nach Hause.", "Wir lesen."]
CODES = {"src_lang_code": "en", "tgt_lang_code": "de"}
NLLB_CODES = {"src_lang_code": "eng_Latn", "tgt_lang_code": "deu_Latn"}
TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    parallel = SAMPLE_DATA / "parallel"
    return m2m100_with_sentencepiece(tmp_path_factory.mktemp("models") / "m2m100", [parallel / "train.en",
                                                                                    parallel / "train.de"])


@pytest.fixture(scope="module")
def nllb(tmp_path_factory):
    parallel = SAMPLE_DATA / "parallel"
    return nllb_with_tokenizer(tmp_path_factory.mktemp("models") / "nllb", [parallel / "train.en",
                                                                            parallel / "train.de"])


@pytest.fixture(scope="module", params=["m2m100", "nllb"])
def multilingual(request):
    """(an M2M100 folder (codes after vocab.json) or an NLLB-style one (codes added tokens of tokenizer.json), its
    language codes en -> de)."""
    return (request.getfixturevalue("folder"), CODES) if request.param == "m2m100" else (
        request.getfixturevalue("nllb"), NLLB_CODES)


def tokenizer(folder, codes=CODES):
    import transformers

    return transformers.AutoTokenizer.from_pretrained(folder, src_lang=codes["src_lang_code"],
                                                      tgt_lang=codes["tgt_lang_code"])


def text_split(model, vocab, folder, prefixes=None, codes=CODES) -> ParallelData:
    """SOURCES / TARGETS cut by the model's tokenizer, as a split with the model's data arguments (its
    prefixes), or with other `prefixes`."""
    cut = tokenizer(folder, codes)
    table = pa.table({ID: list(range(len(SOURCES))), SRC_TEXT: SOURCES, TGT_TEXT: TARGETS,
                      SRC_SUBWORDS: [cut.tokenize(text) for text in SOURCES],
                      TGT_SUBWORDS: [cut.tokenize(text) for text in TARGETS]})
    arguments = model.switches.parallel_data_arguments(training=False)
    if prefixes is not None:
        arguments["prefixes"] = prefixes
    return ParallelData("<texts>", vocab, table=table, **arguments)


def test_nllb_codes_are_the_added_tokens_of_its_tokenizer_json(nllb):
    cut, source = tokenizer(nllb, NLLB_CODES), PretrainedSource.read(str(nllb))
    assert not (nllb / "vocab.json").exists()
    assert source.codes["deu_Latn"] == cut.convert_tokens_to_ids("deu_Latn") and "<mask>" not in source.codes
    assert len(source.codes) == 202  # transformers' NLLB language list


def test_the_codes_are_read_where_the_tokenizer_numbers_them(folder):
    cut, source = tokenizer(folder), PretrainedSource.read(str(folder))
    assert source.codes["en"] == cut.convert_tokens_to_ids("__en__") == len(json.loads(
        (folder / "vocab.json").read_text(encoding="utf-8"))) + 18  # "en": index 18 of M2M100's list
    assert source.pieces[source.order.index(source.codes["de"])] == "__de__"
    prefixes = source.prefixes("en", "de")
    assert [source.order[i] for i in prefixes["source_prefix"] + prefixes["target_prefix"]] == [
        cut.convert_tokens_to_ids("__en__"), cut.convert_tokens_to_ids("__de__")]


def test_batches_begin_as_the_tokenizer_encodes_and_logits_equal_transformers(multilingual):
    folder, codes = multilingual
    model, vocab, source = load_pretrained(str(folder), **codes)
    order = torch.tensor(source.order)
    batch = text_split(model, vocab, folder, codes=codes).collate([0, 1, 2])
    encoded = tokenizer(folder, codes)(SOURCES, text_target=TARGETS, padding=True, return_tensors="pt")
    assert torch.equal(order[batch.src], encoded["input_ids"])
    labels, config = encoded["labels"], source.config
    decoder_input = torch.cat([torch.full((len(labels), 1), config["decoder_start_token_id"]), labels[:, :-1]], 1)
    seen = batch.tgt_in != PAD_ID
    assert torch.equal(order[batch.tgt_in][seen], decoder_input[seen]) and batch.tgt_in[0, 0] == BOS_ID
    assert (batch.tgt_out[:, 0] == PAD_ID).all()  # the target code is given, never predicted: no loss
    scored = batch.tgt_out != PAD_ID
    assert torch.equal(order[batch.tgt_out][scored], labels[scored])
    assert batch.target_tokens == int((labels != config["pad_token_id"]).sum()) - len(labels)
    hf = load_hf(folder)
    with torch.no_grad():
        ours = model(batch.src, batch.tgt_in).logits
        theirs = hf(input_ids=encoded["input_ids"], attention_mask=encoded["attention_mask"],
                    decoder_input_ids=order[batch.tgt_in]).logits[..., order]
    columns = [i for i in range(len(order)) if i != BOS_ID]  # the start token's column: outside the softmax
    assert float((ours - theirs).abs()[seen][:, columns].max()) <= TOLERANCE


def test_without_the_codes_the_batches_and_logits_differ(multilingual):
    """Left out (a split collated without the model's prefixes), the source is not the tokenizer's and the
    logits of the target pieces are not transformers' on the tokenizer's encoding: the test above can fail."""
    folder, codes = multilingual
    model, vocab, source = load_pretrained(str(folder), **codes)
    order = torch.tensor(source.order)
    plain = text_split(model, vocab, folder, NO_PREFIXES, codes).collate([0, 1, 2])
    encoded = tokenizer(folder, codes)(SOURCES, text_target=TARGETS, padding=True, return_tensors="pt")
    assert plain.src.shape[1] == encoded["input_ids"].shape[1] - 1
    coded = text_split(model, vocab, folder, codes=codes).collate([0, 1, 2])
    with torch.no_grad():
        ours = model(plain.src, plain.tgt_in).logits[:, 1:]  # the pieces' positions, without the codes
        theirs = load_hf(folder)(input_ids=encoded["input_ids"], attention_mask=encoded["attention_mask"],
                                 decoder_input_ids=order[coded.tgt_in]).logits[:, 2:, order]
    seen = plain.tgt_in[:, 1:] != PAD_ID
    assert float((ours - theirs).abs()[seen].max()) > 1e-2


def test_greedy_decoding_gives_generate_tokens_with_the_target_code_forced(multilingual):
    """num_beams 1, decoder start = eos, forced_bos_token_id = the target code, pad forbidden (as the Marian
    comparison), max_new_tokens N; compared up to the first EOS; the code is not in syntrain's output. Beam
    search starts with the code too, and leaves it out."""
    import transformers

    folder, codes = multilingual
    model, vocab, source = load_pretrained(str(folder), **codes)
    config, order, steps = source.config, torch.tensor(source.order), 10
    batch = text_split(model, vocab, folder, codes=codes).collate([0, 1, 2])
    code = source.codes[codes["tgt_lang_code"]]
    generation = transformers.GenerationConfig(
        num_beams=1, do_sample=False, max_new_tokens=steps, decoder_start_token_id=config["decoder_start_token_id"],
        eos_token_id=config["eos_token_id"], pad_token_id=config["pad_token_id"],
        bad_words_ids=[[config["pad_token_id"]]], forced_bos_token_id=code, forced_eos_token_id=None)
    with torch.no_grad():
        theirs = load_hf(folder).generate(input_ids=order[batch.src], attention_mask=(batch.src != PAD_ID).long(),
                                          generation_config=generation)
    assert (theirs[:, 1] == code).all()
    theirs = theirs[:, 2:].tolist()
    ours = [[source.order[i] for i in row][: steps - 1] for row in greedy(model, batch.src)]

    def upto_eos(ids: list[int]) -> list[int]:
        eos = config["eos_token_id"]
        return ids[: ids.index(eos) + 1] if eos in ids else ids

    assert [upto_eos(row) for row in ours] == [upto_eos(row) for row in theirs]
    assert len({token for row in ours for token in row}) > 1, ours
    beamed = beam_search(model, batch.src, beam=2)
    assert all(row and source.order[row[0]] != code for row in beamed), beamed


@pytest.mark.parametrize(("codes", "words"), [
    ({}, "src_lang_code: the pretrained model"),
    ({"src_lang_code": "en"}, "tgt_lang_code: the pretrained model"),
    ({"src_lang_code": "en", "tgt_lang_code": "xx"}, 'tgt_lang_code = "xx": not a language code'),
])
def test_a_code_missing_or_unknown_is_refused_naming_the_option(folder, codes, words):
    with pytest.raises(ValueError, match=words):
        load_pretrained(str(folder), **codes)


def test_a_code_for_a_model_without_codes_is_refused(tmp_path):
    from .hf_models import build

    marian = build(tmp_path / "marian", "marian")
    with pytest.raises(ValueError, match='src_lang_code = "en": the pretrained model .* has no language codes'):
        load_pretrained(str(marian), src_lang_code="en", tgt_lang_code="de")


DAMAGES = {"cut short": lambda data: data[: len(data) // 2], "bad bytes": lambda data: b"\xff\xfe" + data[2:],
           "another kind": lambda data: b"[]"}


@pytest.mark.parametrize("damage", DAMAGES)
def test_every_json_file_of_a_model_folder_damaged_is_one_line_naming_it(multilingual, tmp_path, damage):
    """Each JSON file of a multilingual model folder (whatever the folder holds: config, vocabularies, tokenizer
    files), cut short, with bad bytes or of another kind: the model loads (a file it does not read) or one line
    naming the file, never a traceback of the JSON reader."""
    import shutil

    source, codes = multilingual
    names = sorted(path.name for path in source.glob("*.json"))
    assert {"config.json"} < set(names)
    for name in names:
        copy = tmp_path / name
        shutil.copytree(source, copy)
        (copy / name).write_bytes(DAMAGES[damage]((copy / name).read_bytes()))
        try:
            load_pretrained(str(copy), **codes)
        except ValueError as err:
            assert "\n" not in str(err) and name in str(err), (name, str(err))


def test_tree_decoding_with_a_target_prefix_is_refused_naming_it(folder):
    """Tree decoding reads its decoder input from the start token on: a target code does not fit it (and it cannot
    start from a pretrained model at all)."""
    from syntrain.config.model import ModelConfig

    with pytest.raises(ValueError, match=r"target_prefix \[5\]: decoder_target = 'transitions'"):
        ModelConfig.from_dict({"target_prefix": [5], "decoder_target": "transitions", "vocab_size": 8})
    with pytest.raises(ValueError, match="target_prefix \\[[0-9]+\\]: decoder_target = 'transitions'"):
        load_pretrained(str(folder), decoder_target="transitions", **CODES)


@pytest.fixture(scope="module")
def converted(folder, tmp_path_factory, tiny_udpipe):
    """The sample pipeline cut by the model's own tokenizer files (`[bpe] scheme = "pretrained"`), with the
    source's parents and DBSA heads and the target's parents, converted by `synprep convert`."""
    return convert_with(folder, tmp_path_factory.mktemp("m2m100-scheme"), tiny_udpipe)


def convert_with(folder, root, tiny_udpipe):
    """The sample pipeline cut by `folder`'s tokenizer files, converted into root/out (its folder)."""
    from .test_subwords import _pipeline

    path = _pipeline(root, f'scheme = "pretrained"\nmodel = "{folder}"',
                     'src = ["parents", "dbsa", "labels"]\ntgt = ["parents", "dbsa"]')
    text = path.read_text(encoding="utf-8").replace('train_conllu = "en.conllu"', f'model = "{tiny_udpipe("en")}"')
    path.write_text(text.replace('train_conllu = "de.conllu"', f'model = "{tiny_udpipe("de")}"'), encoding="utf-8")
    code, err = cli_in_process("synprep", ["convert", path, "--workers", "1"])  # its accounting checked too
    assert code == 0, err
    return root / "out"


def run_args(folder, out, run, *more, codes=CODES):
    return ["run", "--pretrained", folder, "--src-lang-code", codes["src_lang_code"], "--tgt-lang-code",
            codes["tgt_lang_code"], "--data", out / "train",
            "--valid", out / "valid", "--out", run, "--max-steps", "2", "--max-tokens", "800", "--warmup", "1",
            "--eval-interval", "2", "--eval-sentences", "4", "--log-interval", "1", *more]


@pytest.fixture(scope="module")
def fine_tune(folder, converted, tmp_path_factory):
    """A run from the model with its codes and Pascal heads plus DBSA on both sides (its folder, stderr)."""
    run = tmp_path_factory.mktemp("runs") / "pascal"
    code, err = cli_in_process("syntrain", run_args(folder, converted, run, "--pascal-heads", "1,0", "--set",
                                                    "model.dbsa_encoder=true", "--set", "model.dbsa_decoder=true"))
    assert code == 0, err
    return run, err


def test_a_converted_run_trains_with_its_codes_and_its_columns_move_with_them(folder, converted, fine_tune):
    import tomllib

    from syntrain.dataset import read_split
    from syntrain.runfolder.checkpoints import load_checkpoint

    run, err = fine_tune
    assert "not in the pretrained model's vocabulary" not in err
    assert "language codes: each source begins with __en__, the decoder input with __de__ after its start" in err
    with open(run / "config.toml", "rb") as handle:
        table = tomllib.load(handle)["model"]
    assert table["src_lang_code"] == "en" and table["tgt_lang_code"] == "de" and "source_prefix" not in table
    model, vocab, ckpt = load_checkpoint(str(run / "best.pt"))
    source = PretrainedSource.from_record(ckpt["pretrained"])
    en, de = (source.order.index(source.codes[code]) for code in ("en", "de"))
    assert model.cfg.architecture.source_prefix == [en] and model.cfg.architecture.target_prefix == [de]
    data = ParallelData(str(converted / "train"), vocab, **model.switches.parallel_data_arguments(training=True))
    rows = list(range(4))
    batch = data.collate(rows)
    shards = read_split(str(converted / "train"))[0].slice(0, 4).to_pylist()
    assert (batch.src[:, 0] == en).all() and (batch.tgt_in[:, 1] == de).all()
    for b, row in enumerate(shards):
        n, m = len(row["src_subwords"]), len(row["tgt_subwords"])
        assert [vocab.itos[i] for i in batch.src[b, 1 : n + 1]] == row["src_subwords"]
        mid = batch.inputs["src_parent_mid"][b]
        assert mid[0] < 0 and mid[1 : n + 1].tolist() == pytest.approx([p + 1 for p in row["src_parent_mid"]])
        head = batch.inputs["src_dbsa_head"][b]  # the first sub-word's head: the same sub-word, one further on
        assert head[0] == -1 and head[1] == row["src_dbsa_head"][0] + 1
        assert batch.src[b, head[1]] == vocab.stoi[row["src_subwords"][row["src_dbsa_head"][0]]]
        target = batch.inputs["tgt_dbsa_head"][b]
        assert target[:2].tolist() == [-1, -1]  # the start token and the code: no supervision
        expected = [h + 2 if h <= i else -1 for i, h in enumerate(row["tgt_dbsa_head"])]
        assert target[2 : m + 2].tolist() == expected


def test_eval_of_the_fine_tune_and_of_the_model_with_its_codes(folder, converted, fine_tune, tmp_path):
    run, _ = fine_tune
    code, err = cli_in_process("syntrain", ["eval", "--checkpoint", run / "best.pt", "--data", converted / "test",
                                            "--beam", "2", "--json", tmp_path / "scores.json",
                                            "-o", tmp_path / "test.hyp"])
    assert code == 0, err
    assert json.loads((tmp_path / "scores.json").read_text(encoding="utf-8"))["loss"] > 0
    assert "__de__" not in (tmp_path / "test.hyp").read_text(encoding="utf-8")
    code, err = cli_in_process("syntrain", ["eval", "--pretrained", folder, "--src-lang-code", "en",
                                            "--tgt-lang-code", "de", "--data", converted / "test", "--beam", "1"])
    assert code == 0, err
    code, err = cli_in_process("syntrain", ["eval", "--pretrained", folder, "--data", converted / "test"])
    assert code != 0 and "src_lang_code: the pretrained model" in err and "multilingual" in err, err


def test_compare_of_the_fine_tune_and_the_multilingual_folder_with_its_codes(folder, converted, fine_tune, tmp_path):
    """Both rows scored (the folder decoded with the codes), nothing written into the model's folder; the folder
    without the codes, or the codes without a multilingual folder among the runs, refused in one line naming the
    flags (the command line's and the Python API's)."""
    import syntrain

    run, _ = fine_tune
    before = sorted((path.name, path.stat().st_mtime_ns) for path in folder.iterdir())
    code, err = cli_in_process("syntrain", ["compare", "--data", converted / "test", "--beam", "1", "--samples", "10",
                                            "--src-lang-code", "en", "--tgt-lang-code", "de", "--json",
                                            tmp_path / "table.json", run, folder])
    assert code == 0, err
    systems = json.loads((tmp_path / "table.json").read_text(encoding="utf-8"))["systems"]
    assert [row["system"] for row in systems] == [run.name, folder.name]
    assert all(row["bleu"] >= 0 and row["chrf"] > 0 for row in systems), systems
    assert sorted((path.name, path.stat().st_mtime_ns) for path in folder.iterdir()) == before
    result = syntrain.compare([str(folder)], str(converted / "test"), beam=1, samples=10, src_lang_code="en",
                              tgt_lang_code="de")
    assert result.rows[0]["bleu"] == systems[1]["bleu"] and result.written == []
    refused = [(["--src-lang-code", "en"], [folder], "give --src-lang-code and --tgt-lang-code"),
               ([], [run, folder], "multilingual pretrained model (language codes af, "),
               (["--src-lang-code", "en", "--tgt-lang-code", "de"], [run], "do nothing without a multilingual"),
               (["--src-lang-code", "en", "--tgt-lang-code", "xx"], [folder], 'tgt_lang_code = "xx": not a language')]
    for flags, runs, words in refused:
        code, err = cli_in_process("syntrain", ["compare", "--data", converted / "test", *flags, *runs])
        assert code != 0 and words in err and len(err.strip().splitlines()) == 1, err
    with pytest.raises(ValueError, match="do nothing without a multilingual"):
        syntrain.compare([str(run)], str(converted / "test"), src_lang_code="en", tgt_lang_code="de")
    with pytest.raises(ValueError, match="give --src-lang-code and --tgt-lang-code"):
        syntrain.compare([str(folder)], str(converted / "test"))


def test_compare_gives_the_codes_to_the_multilingual_folders_only(folder, tmp_path):
    """A Marian folder beside a multilingual one takes no codes (it has none, and would refuse them)."""
    from syntrain.compare import check_codes, row_codes

    from .hf_models import build

    marian = str(build(tmp_path / "marian", "marian"))
    assert row_codes(str(folder), CODES) == CODES and row_codes(marian, CODES) == {}
    check_codes([marian, str(folder)], CODES)
    with pytest.raises(ValueError, match="do nothing without a multilingual"):
        check_codes([marian], CODES)


def test_an_nllb_folder_converts_trains_and_scores_with_its_codes(tmp_path, tiny_udpipe):
    """An NLLB folder as facebook/nllb-200 lays it out (sentencepiece.bpe.model, tokenizer.json with fairseq's ids
    and the codes as added tokens, no vocab.json): `synprep convert` with `[bpe] scheme = "pretrained"` cuts both
    sides into the model's pieces (none unknown to it), a 2-step run with its codes trains, and eval scores it."""
    from .hf_models import nllb_with_sentencepiece

    parallel = SAMPLE_DATA / "parallel"
    folder = nllb_with_sentencepiece(tmp_path / "nllb", [parallel / "train.en", parallel / "train.de"])
    assert not (folder / "vocab.json").exists()
    out = convert_with(folder, tmp_path, tiny_udpipe)
    stored = json.loads((out / "pretrained-vocab.json").read_text(encoding="utf-8"))
    assert stored["model"]["vocab"]["<unk>"] == 3 and any(t["content"] == "deu_Latn" for t in stored["added_tokens"])
    code, err = cli_in_process("syntrain", run_args(folder, out, tmp_path / "run", codes=NLLB_CODES))
    assert code == 0, err
    assert "not in the pretrained model's vocabulary" not in err
    assert "each source begins with eng_Latn, the decoder input with deu_Latn" in err, err
    from syntrain.dataset import read_split
    from syntrain.runfolder.checkpoints import load_checkpoint

    _, vocab, ckpt = load_checkpoint(str(tmp_path / "run" / "best.pt"))
    order, cut = PretrainedSource.from_record(ckpt["pretrained"]).order, tokenizer(folder, NLLB_CODES)
    for row in read_split(str(out / "train"))[0].slice(0, 4).to_pylist():  # the model's ids, as transformers' are
        for pieces in (row["src_subwords"], row["tgt_subwords"]):
            assert [order[vocab.stoi[piece]] for piece in pieces] == cut.convert_tokens_to_ids(pieces)
            assert cut.unk_token_id not in cut.convert_tokens_to_ids(pieces)
    code, err = cli_in_process("syntrain", ["eval", "--checkpoint", tmp_path / "run" / "best.pt", "--data",
                                            out / "test", "--beam", "1", "--json", tmp_path / "scores.json"])
    assert code == 0, err
    assert json.loads((tmp_path / "scores.json").read_text(encoding="utf-8"))["loss"] > 0


def test_a_run_with_codes_resumes_with_them(folder, converted, tmp_path):
    """`--resume --out RUN` reads the codes back from the run's config.toml; another code is refused."""
    code, err = cli_in_process("syntrain", run_args(folder, converted, tmp_path / "run"))
    assert code == 0, err
    code, err = cli_in_process("syntrain", ["run", "--resume", "--out", tmp_path / "run", "--max-steps", "3"])
    assert code == 0, err
    ckpt = torch.load(tmp_path / "run" / "last.pt", weights_only=False)
    assert ckpt["step"] == 3 and ckpt["model_config"]["target_prefix"]
    code, err = cli_in_process("syntrain", ["run", "--resume", "--out", tmp_path / "run", "--max-steps", "4",
                                            "--tgt-lang-code", "fr"])
    assert code == 2 and "tgt_lang_code 'de' -> 'fr'" in err, err


def test_a_code_without_a_pretrained_model_is_refused(converted, tmp_path):
    code, err = cli_in_process("syntrain", ["run", "--data", converted / "train", "--preset", "cpu",
                                            "--src-lang-code", "en", "--out", tmp_path / "run"])
    assert code == 2 and 'src_lang_code = "en"' in err and "without pretrained" in err, err


def test_export_hf_of_a_fine_tune_with_codes(folder, converted, tmp_path):
    """A fine-tune with the codes and a training-only switch exports to a folder transformers loads with the
    checkpoint's logits; its generation config forces the target code first and its tokenizer config names
    the languages."""
    from syntrain.runfolder.checkpoints import load_checkpoint

    code, err = cli_in_process("syntrain", run_args(folder, converted, tmp_path / "lisa", "--set",
                                                    "model.lisa_layer=1"))
    assert code == 0, err
    code, err = cli_in_process("syntrain", ["export-hf", tmp_path / "lisa" / "best.pt", "-o", tmp_path / "hf"])
    assert code == 0, err
    generation = json.loads((tmp_path / "hf" / "generation_config.json").read_text(encoding="utf-8"))
    source = PretrainedSource.read(str(folder))
    assert generation["forced_bos_token_id"] == source.codes["de"]
    settings = json.loads((tmp_path / "hf" / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert (settings["src_lang"], settings["tgt_lang"]) == ("en", "de")
    model, vocab, _ = load_checkpoint(str(tmp_path / "lisa" / "best.pt"))
    order = torch.tensor(source.order)
    batch = text_split(model, vocab, folder).collate([0, 1, 2])
    hf = load_hf(tmp_path / "hf")
    with torch.no_grad():
        ours = model(batch.src, batch.tgt_in).logits
        theirs = hf(input_ids=order[batch.src], attention_mask=(batch.src != PAD_ID).long(),
                    decoder_input_ids=order[batch.tgt_in]).logits[..., order]
    seen, columns = batch.tgt_in != PAD_ID, [i for i in range(len(order)) if i != BOS_ID]
    difference = (ours - theirs).abs() / theirs.abs().clamp(min=1)
    assert float(difference[seen][:, columns].max()) <= TOLERANCE
    import transformers

    cut = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    assert cut(SOURCES[0])["input_ids"][0] == source.codes["en"]


@pytest.mark.slow
def test_the_pages_language_code_blocks_run(tmp_path, tiny_udpipe):
    """docs/pretrained.md's language-code commands and Python, in a folder holding a tiny multilingual M2M100
    model as `m2m100_418M`, the page's pipeline with its output and model changed as the page says."""
    import sys

    from .conftest import REPO
    from .test_docs_commands import fenced_blocks
    from .test_pretrained_docs import run_block

    text = (REPO / "docs" / "pretrained.md").read_text(encoding="utf-8")
    (tmp_path / "sample_data").symlink_to(SAMPLE_DATA)
    parallel = SAMPLE_DATA / "parallel"
    m2m100_with_sentencepiece(tmp_path / "m2m100_418M", [parallel / "train.en", parallel / "train.de"])
    [(_, pipeline)] = fenced_blocks(text, {"toml"})
    for old, new in (('output = "out/en-de-opus"', 'output = "out/en-de-m2m100"'),
                     ('model = "../opus-mt-en-de"', 'model = "../m2m100_418M"'),
                     ('train_conllu = "en.conllu"', f'model = "{tiny_udpipe("en")}"'),
                     ('train_conllu = "de.conllu"', f'model = "{tiny_udpipe("de")}"')):
        assert old in pipeline
        pipeline = pipeline.replace(old, new)
    (tmp_path / "en-de-m2m100.toml").write_text(pipeline, encoding="utf-8")
    [(_, commands)] = fenced_blocks(text, {"bash"}, after="<!-- pretrained-languages-run -->")
    done = run_block(["bash", "-e", "-c", commands], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "m2m100-baseline.json").is_file() and (tmp_path / "test-m2m100.de").read_text(encoding="utf-8")
    mark = ("<!-- pretrained-languages-python (run by tests/test_pretrained_languages.py in a folder holding the "
            "model) -->")
    [(_, python)] = fenced_blocks(text, {"py"}, after=mark)
    done = run_block([sys.executable, "-c", python], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    generation = json.loads((tmp_path / "m2m100-en-de-finetuned" / "generation_config.json").read_text())
    assert generation["forced_bos_token_id"] == PretrainedSource.read(str(tmp_path / "m2m100_418M")).codes["de"]
