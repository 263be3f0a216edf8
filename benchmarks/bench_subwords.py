"""Benchmark: the sub-word schemes (subword-nmt, sentencepiece, hf-tokenizer) on the tokens of a treebank.

    python benchmarks/bench_subwords.py [--treebank PATH] [--size 8000] [--repeat 3]

On the gold tokens of UD EWT train (12,544 sentences; `SYNPREP_SHARED` or ../shared, else sample_data/en.conllu),
in one run on one machine, each timed `--repeat` times (the best kept):
- learn: synprep's learners on the token counts, as `synprep convert` learns them, against the library's own
  command line or API on the same tokens: `subword-nmt learn-joint-bpe-and-vocab` (its command line) for BPE,
  `SentencePieceTrainer.train` on the token text for SentencePiece (pip's sentencepiece has no spm_train).
- apply: each token cut on its own (`synprep bpe apply [--scheme]`'s code) against the library cutting the
  same lines: `synprep bpe apply` against `subword-nmt apply-bpe` (both commands),
  `SentencePieceProcessor.encode(lines)`, `Tokenizer.encode_batch(lines)`
  (the tokenizer: the SentencePiece model's pieces in a Metaspace Unigram tokenizer.json).
- features: `featurize` with every per-piece feature on all sentences, as convert's phase 3 runs it, with each
  scheme's cutter: per sentence, and the ratio to subword-nmt (target: sentencepiece <= 1.0x).
- convert: `synprep convert` of the first `--convert-pairs` Multi30k pairs (pipelines/multi30k-en-de.toml and
  multi30k-en-de-sentencepiece.toml, transitions left out of both; the shared UDPipe models), parsed once into a
  parse cache first, so that the two timed converts differ only in their sub-words: wall time per pair and the
  stages' seconds (learning, sub-words + features), sentencepiece against subword-nmt (target: <= 1.0x).
- raw cut: with tokenizers learned on the treebank's raw `# text` lines (Metaspace unigram, and WordPiece
  behind a Whitespace pre-tokenizer, as pretrained tokenizers are), how many test sentences and tokens the
  raw-text cut (`hf_tokenizer.raw_cut`) gives other pieces than the token-by-token cut.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED = Path(os.environ.get("SYNPREP_SHARED", ROOT.parent / "shared"))
BIN = Path(sys.executable).parent  # the synprep and subword-nmt commands of this environment
EWT = SHARED / "data" / "ud" / "UD_English-EWT"


def best(func: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        func()
        times.append(time.perf_counter() - started)
    return min(times)


def load(path: Path) -> tuple[list, list[str]]:
    from synprep.conllu import read_conllu, to_tree

    sentences = list(read_conllu(str(path)))
    trees = [to_tree(s, str(path)) for s in sentences]
    return trees, [s.text or " ".join(t.tokens) for s, t in zip(sentences, trees)]


def hf_from_spm(model: str, path: str) -> None:
    """The SentencePiece model's pieces and scores as a Metaspace Unigram tokenizer.json."""
    import sentencepiece as spm
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    processor = spm.SentencePieceProcessor(model_file=model)
    vocab = [(processor.id_to_piece(i), processor.get_score(i)) for i in range(processor.get_piece_size())]
    tok = Tokenizer(models.Unigram(vocab, unk_id=processor.unk_id()))
    tok.pre_tokenizer, tok.decoder = pre_tokenizers.Metaspace(), decoders.Metaspace()
    tok.save(path)


def raw_tokenizers(texts: list[str], size: int, folder: str) -> dict[str, str]:
    """Tokenizers learned on raw text, as pretrained ones are: Metaspace unigram, WordPiece (Whitespace)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    unigram = Tokenizer(models.Unigram())
    unigram.pre_tokenizer, unigram.decoder = pre_tokenizers.Metaspace(), decoders.Metaspace()
    unigram.train_from_iterator(texts, trainers.UnigramTrainer(vocab_size=size, unk_token="<unk>",
                                                               special_tokens=["<unk>"]))
    wordpiece = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    wordpiece.pre_tokenizer = pre_tokenizers.Whitespace()
    wordpiece.train_from_iterator(texts, trainers.WordPieceTrainer(vocab_size=size, special_tokens=["[UNK]"]))
    paths = {}
    for name, tok in (("metaspace-unigram", unigram), ("wordpiece", wordpiece)):
        paths[name] = os.path.join(folder, f"{name}.json")
        tok.save(paths[name])
    return paths


def convert_pipeline(name: str, pairs: int, folder: str) -> str:
    """A copy of a Multi30k pipeline: absolute paths, the first `pairs` train pairs, a shared parse cache, no
    transitions (sentencepiece pieces cannot carry them)."""
    text = (ROOT / "pipelines" / name).read_text(encoding="utf-8")
    text = text.replace('data_root = "../../shared"', f'data_root = "{SHARED}"')
    text = text.replace('filter = true\n', f'filter = true\nmax_pairs = {pairs}\n', 1)
    text = text.replace('model = "models/', f'model = "{SHARED}/models/')
    text = text.replace('tgt = ["parents", "transitions", "labels"]', 'tgt = ["parents", "labels"]')
    text += f'\n[parse]\ncache = "{folder}/parse-cache"\n'
    path = os.path.join(folder, name)
    Path(path).write_text(text, encoding="utf-8")
    return path


def convert_section(pairs: int, folder: str) -> None:
    import json

    print(f"\n== convert: Multi30k, first {pairs} train pairs + valid + test, 2 workers, parses from a warm cache")
    runs = {}
    for label, name in (("warm-up", "multi30k-en-de.toml"), ("subword-nmt", "multi30k-en-de.toml"),
                        ("sentencepiece", "multi30k-en-de-sentencepiece.toml")):
        out = os.path.join(folder, "convert-" + label)
        command = [str(BIN / "synprep"), "convert", convert_pipeline(name, pairs, folder), "--output", out,
                   "--workers", "2", "--overwrite"]
        started = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        wall = time.perf_counter() - started
        with open(os.path.join(out, "run.json"), encoding="utf-8") as handle:
            seconds = json.load(handle)["seconds"]
        rows = sum(json.loads(Path(out, split, "manifest.json").read_text())["input_lines"]
                   for split in ("train", "valid", "test"))
        runs[label] = (wall, rows, sum(s.get("learn_bpe", 0) for s in seconds.values()),
                       sum(s.get("bpe+features", 0) for s in seconds.values()))
    base = runs["subword-nmt"]
    for label in ("subword-nmt", "sentencepiece"):
        wall, rows, learning, features = runs[label]
        print(f"{label:14} wall {wall:6.1f} s = {wall / rows * 1e3:6.2f} ms/pair ({wall / base[0]:4.2f}x)   learn "
              f"{learning:5.2f} s   sub-words+features {features:5.2f} s ({features / base[3]:4.2f}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--treebank", default=None, help="CoNLL-U to learn on and cut (default: EWT train)")
    parser.add_argument("--test", default=None, help="CoNLL-U for the raw-cut count (default: EWT test)")
    parser.add_argument("--size", type=int, default=8000, help="merges / pieces of each learned model")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--convert-pairs", type=int, default=2000, help="Multi30k pairs converted (0: skip)")
    args = parser.parse_args()

    import sentencepiece as spm
    from tokenizers import Tokenizer

    from synprep.bpe import Bpe, apply_file
    from synprep.bpe_learn import learn_joint_from_counts
    from synprep.featurize import FeatureConfig, featurize
    from synprep.subwords.hf_tokenizer import TokenizerCutter, compare_cuts
    from synprep.subwords.sentencepiece_scheme import SentencePieceCutter, learn

    treebank = Path(args.treebank) if args.treebank else EWT / "en_ewt-ud-train.conllu"
    test = Path(args.test) if args.test else EWT / "en_ewt-ud-test.conllu"
    if not treebank.is_file():
        treebank = test = ROOT / "sample_data" / "en.conllu"
    trees, texts = load(treebank)
    lines = [" ".join(t.tokens).replace("\u00a0", " ") + "\n" for t in trees]
    counts = Counter(token for t in trees for token in t.tokens)
    print(f"{treebank.name}: {len(trees)} sentences, {sum(counts.values())} tokens, {len(counts)} distinct; "
          f"{args.size} merges / pieces; best of {args.repeat}")
    with tempfile.TemporaryDirectory(prefix="bench-subwords-") as folder:
        text = os.path.join(folder, "tokens.txt")
        Path(text).write_text("".join(lines), encoding="utf-8")
        codes, model, tokenizer = (os.path.join(folder, name) for name in ("codes.bpe", "m.model", "t.json"))

        print("\n== learn (s)")
        ours = best(lambda: learn_joint_from_counts([counts], codes, args.size), args.repeat)
        cli = [str(BIN / "subword-nmt"), "learn-joint-bpe-and-vocab", "-i", text, "-o",
               os.path.join(folder, "ref.bpe"), "-s", str(args.size), "--write-vocabulary", os.path.join(folder, "v")]
        theirs = best(lambda: subprocess.run(cli, check=True, capture_output=True), args.repeat)
        print(f"subword-nmt    synprep (from counts) {ours:7.2f}   subword-nmt learn-joint-bpe-and-vocab {theirs:7.2f}"
              f"   ratio {ours / theirs:5.2f}x")
        ours = best(lambda: learn([counts], model, args.size), args.repeat)

        def library_learn() -> None:
            spm.SentencePieceTrainer.train(input=text, model_prefix=os.path.join(folder, "ref"),
                                           vocab_size=args.size, character_coverage=1.0, hard_vocab_limit=False,
                                           minloglevel=2, num_threads=1)
        theirs = best(library_learn, args.repeat)
        print(f"sentencepiece  synprep {ours:7.2f}   SentencePieceTrainer.train(tokens) {theirs:7.2f}   "
              f"ratio {ours / theirs:5.2f}x")
        hf_from_spm(model, tokenizer)

        print("\n== apply: every token of the treebank (s)")
        bpe, sp, hf = Bpe(codes), SentencePieceCutter(model), TokenizerCutter(tokenizer)
        out = os.path.join(folder, "out")
        ours = best(lambda: subprocess.run([str(BIN / "synprep"), "bpe", "apply", "-c", codes, "-i", text, "-o", out],
                                           check=True, capture_output=True), args.repeat)
        cli = [str(BIN / "subword-nmt"), "apply-bpe", "-c", codes, "-i", text, "-o", out]
        theirs = best(lambda: subprocess.run(cli, check=True, capture_output=True), args.repeat)
        print(f"subword-nmt    synprep bpe apply {ours:6.2f}   subword-nmt apply-bpe {theirs:6.2f}   "
              f"ratio {ours / theirs:5.2f}x")
        processor = spm.SentencePieceProcessor(model_file=model)
        ours = best(lambda: apply_file(SentencePieceCutter(model), text, out), args.repeat)
        theirs = best(lambda: processor.encode([line.rstrip("\n") for line in lines], out_type=str), args.repeat)
        print(f"sentencepiece  synprep bpe apply --scheme {ours:6.2f}   SentencePieceProcessor.encode(lines) "
              f"{theirs:6.2f}   ratio {ours / theirs:5.2f}x")
        library = Tokenizer.from_file(tokenizer)
        ours = best(lambda: apply_file(TokenizerCutter(tokenizer), text, out), args.repeat)
        theirs = best(lambda: library.encode_batch([line.rstrip("\n") for line in lines], add_special_tokens=False),
                      args.repeat)
        print(f"hf-tokenizer   synprep bpe apply --scheme {ours:6.2f}   Tokenizer.encode_batch(lines) "
              f"{theirs:6.2f}   ratio {ours / theirs:5.2f}x")

        print("\n== features (convert's phase 3: pieces + every per-piece feature), per sentence")
        config = FeatureConfig(("parents", "dbsa", "depth", "labels"), root="keep", non_projective="keep")
        base = None
        fresh = {"subword-nmt": lambda: Bpe(codes), "sentencepiece": lambda: SentencePieceCutter(model),
                 "hf-tokenizer": lambda: TokenizerCutter(tokenizer)}  # a cold cache each time, as a worker's
        for name, cutter in (("subword-nmt", bpe), ("sentencepiece", sp), ("hf-tokenizer", hf)):
            seconds = best(lambda n=name: featurize(trees, config, fresh[n]().segment_word), args.repeat)
            base = base or seconds
            pieces = sum(len(cutter.segment_word(token).split(" ")) for t in trees for token in t.tokens)
            print(f"{name:14} {seconds / len(trees) * 1e6:7.1f} us/sentence   {pieces / sum(counts.values()):.3f} "
                  f"pieces/token   ratio to subword-nmt {seconds / base:5.2f}x")

        if args.convert_pairs and (SHARED / "data" / "parallel" / "multi30k").is_dir():
            convert_section(args.convert_pairs, folder)

        print("\n== raw-text cut against token by token (tokenizers learned on raw text)")
        test_trees, test_texts = load(test)
        for name, path in raw_tokenizers(texts, args.size, folder).items():
            found = compare_cuts(TokenizerCutter(path), [(text_, t.tokens) for text_, t in zip(test_texts,
                                                                                               test_trees)])
            print(f"{name:18} {test.name}: {found['differ']}/{found['sentences']} sentences differ "
                  f"({found['differ'] / found['sentences']:.1%}; {found['unaligned']} where the raw cut leaves a "
                  f"token without a piece or the tokens are not in the text), {found['tokens_differ']}/"
                  f"{found['tokens']} tokens cut otherwise in the others")


if __name__ == "__main__":
    main()
