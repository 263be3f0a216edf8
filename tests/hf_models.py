"""Tiny Hugging Face translation models built offline from configs (transformers), every tensor random (norms,
biases and Marian's final logits bias too: a weight mapped wrong anywhere changes the logits), saved with a
vocab.json: what tests/test_pretrained*.py load."""

from __future__ import annotations

import json
from pathlib import Path

import torch

SIZES = dict(d_model=16, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2, decoder_attention_heads=2,
             encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=64, dropout=0.0, attention_dropout=0.0,
             activation_dropout=0.0)


def marian_pieces(n: int = 40) -> list[str]:
    """Marian's id order: </s> 0, <unk> 1, the pieces, <pad> last."""
    return ["</s>", "<unk>", *(f"\u2581w{i}" for i in range(n - 3)), "<pad>"]


def m2m100_pieces(n: int = 40) -> list[str]:
    """M2M100's (fairseq's) id order: <s> 0, <pad> 1, </s> 2, <unk> 3, the pieces."""
    return ["<s>", "<pad>", "</s>", "<unk>", *(f"\u2581w{i}" for i in range(n - 4))]


def build(folder: Path, family: str, pieces: list[str] | None = None, seed: int = 0, scale: float = 1.0,
          **config: object) -> Path:
    """A tiny random `family` ("marian" or "m2m100") model saved in `folder` with vocab.json (`pieces` in id
    order), every parameter `scale` x a standard normal draw; `config`: config values on top."""
    import transformers

    pieces = pieces or (marian_pieces() if family == "marian" else m2m100_pieces())
    ids = {piece: i for i, piece in enumerate(pieces)}
    config = {"vocab_size": len(pieces), **config}  # more than the pieces: room for M2M100's language codes
    if family == "marian":
        cfg = transformers.MarianConfig(pad_token_id=ids["<pad>"], eos_token_id=ids["</s>"],
                                        decoder_start_token_id=ids["<pad>"], forced_eos_token_id=None,
                                        activation_function="swish", scale_embedding=True, **{**SIZES, **config})
        model = transformers.MarianMTModel(cfg)
    else:
        cfg = transformers.M2M100Config(pad_token_id=ids["<pad>"], eos_token_id=ids["</s>"],
                                        bos_token_id=ids["<s>"], decoder_start_token_id=ids["</s>"],
                                        activation_function="relu", scale_embedding=True, **{**SIZES, **config})
        model = transformers.M2M100ForConditionalGeneration(cfg)
    torch.manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(torch.randn_like(parameter) * scale)
        if family == "marian":
            model.final_logits_bias.copy_(torch.randn_like(model.final_logits_bias) * scale)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    (folder / "vocab.json").write_text(json.dumps(ids, ensure_ascii=False), encoding="utf-8")
    return folder


def load_hf(folder: Path) -> object:
    """The folder loaded by transformers, fp32, eval mode."""
    import transformers

    return transformers.AutoModelForSeq2SeqLM.from_pretrained(folder, torch_dtype=torch.float32).eval()


def marian_with_sentencepiece(folder: Path, texts: list[Path], vocab_size: int = 200, seed: int = 0,
                              target_texts: list[Path] | None = None) -> Path:
    """A tiny random Marian model whose vocabulary is a SentencePiece model learned on the tokens of `texts`
    (source.spm = target.spm, vocab.json: </s> 0, <unk> 1, the model's pieces, <pad> last), as OPUS-MT folders
    are laid out; with `target_texts`, target.spm is learned on those and vocab.json holds both models' pieces."""
    import shutil

    import sentencepiece as spm

    from synprep.bpe_learn import word_counts
    from synprep.subwords.sentencepiece_scheme import learn

    folder.mkdir(parents=True, exist_ok=True)
    pieces: list[str] = []
    for name, paths in (("source.spm", texts), ("target.spm", target_texts)):
        model = folder / name
        if paths is None:
            shutil.copy(folder / "source.spm", model)
            continue
        learn([word_counts(str(path)) for path in paths], str(model), vocab_size)
        processor = spm.SentencePieceProcessor(model_file=str(model))
        pieces += [piece for i in range(processor.get_piece_size())
                   if not (processor.is_unknown(i) or processor.is_control(i))
                   and (piece := processor.id_to_piece(i)) not in pieces]
    return build(folder, "marian", ["</s>", "<unk>", *pieces, "<pad>"], seed=seed, scale=0.5)


def m2m100_with_sentencepiece(folder: Path, texts: list[Path], vocab_size: int = 200, seed: int = 0) -> Path:
    """A tiny random multilingual M2M100 model laid out as facebook/m2m100_418M is: one sentencepiece.bpe.model
    learned on the tokens of `texts`, vocab.json (<s> 0, <pad> 1, </s> 2, <unk> 3, the model's pieces) without
    the language codes, which M2M100Tokenizer numbers after it (len(vocab.json) + their index), and room for
    them and its 8 made-up words in vocab_size; the tokenizer's files saved beside (tokenizer_config.json)."""
    import sentencepiece as spm
    import transformers
    from transformers.models.m2m_100.tokenization_m2m_100 import FAIRSEQ_LANGUAGE_CODES

    from synprep.bpe_learn import word_counts
    from synprep.subwords.sentencepiece_scheme import learn

    folder.mkdir(parents=True, exist_ok=True)
    model = folder / "sentencepiece.bpe.model"
    learn([word_counts(str(path)) for path in texts], str(model), vocab_size)
    processor = spm.SentencePieceProcessor(model_file=str(model))
    pieces = [piece for i in range(processor.get_piece_size())
              if not (processor.is_unknown(i) or processor.is_control(i))
              and (piece := processor.id_to_piece(i)) not in ("<s>", "<pad>", "</s>", "<unk>")]
    ids = ["<s>", "<pad>", "</s>", "<unk>", *pieces]
    size = len(ids) + len(FAIRSEQ_LANGUAGE_CODES["m2m100"]) + 8
    build(folder, "m2m100", ids, seed=seed, scale=0.5, vocab_size=size)
    tokenizer = transformers.M2M100Tokenizer(str(folder / "vocab.json"), str(model), src_lang="en", tgt_lang="de")
    tokenizer.save_pretrained(folder)
    return folder


def nllb_with_tokenizer(folder: Path, texts: list[Path], seed: int = 0) -> Path:
    """A tiny random NLLB-style model: an M2M100 model whose vocabulary is a tokenizer.json written by
    NllbTokenizer (the characters of `texts` as pieces, no merges; its language codes, eng_Latn ..., added tokens
    after them), no vocab.json, vocab_size the tokenizer's length."""
    import transformers

    chars = sorted({char for path in texts for char in path.read_text(encoding="utf-8") if not char.isspace()})
    vocab = {piece: i for i, piece in enumerate(["<s>", "<pad>", "</s>", "<unk>", "\u2581", *chars])}
    tokenizer = transformers.NllbTokenizer(vocab=vocab, merges=[], src_lang="eng_Latn", tgt_lang="deu_Latn")
    build(folder, "m2m100", list(vocab), seed=seed, scale=0.5, vocab_size=len(tokenizer))
    (folder / "vocab.json").unlink()  # NLLB folders have none: the vocabulary is tokenizer.json's
    tokenizer.save_pretrained(folder)
    return folder


def nllb_with_sentencepiece(folder: Path, texts: list[Path], vocab_size: int = 200, seed: int = 0) -> Path:
    """A tiny random NLLB model laid out as facebook/nllb-200-distilled-600M is: one sentencepiece.bpe.model (BPE)
    learned on the tokens of `texts`, and a tokenizer.json written by NllbTokenizer from it (fairseq's ids: <s> 0,
    <pad> 1, </s> 2, <unk> 3, the model's other pieces one further on, as NLLB's converter numbers them; its
    merges; its language codes, eng_Latn ..., added tokens after them), no vocab.json, vocab_size the tokenizer's
    length."""
    import transformers
    from transformers.convert_slow_tokenizer import SentencePieceExtractor

    from synprep.bpe_learn import word_counts
    from synprep.subwords.sentencepiece_scheme import learn

    folder.mkdir(parents=True, exist_ok=True)
    model = folder / "sentencepiece.bpe.model"
    learn([word_counts(str(path)) for path in texts], str(model), vocab_size, model_type="bpe")
    extracted = SentencePieceExtractor(str(model)).extract(None)
    specials = ["<s>", "<pad>", "</s>", "<unk>"]
    vocab = {piece: i for i, piece in enumerate(specials)}
    vocab.update({piece: i + 1 for piece, i in extracted["vocab"].items() if piece not in specials})
    tokenizer = transformers.NllbTokenizer(vocab=vocab, merges=extracted["merges"], src_lang="eng_Latn",
                                           tgt_lang="deu_Latn")
    build(folder, "m2m100", sorted(vocab, key=vocab.__getitem__), seed=seed, scale=0.5, vocab_size=len(tokenizer))
    (folder / "vocab.json").unlink()  # NLLB folders have none: the vocabulary is tokenizer.json's
    tokenizer.save_pretrained(folder)
    return folder
