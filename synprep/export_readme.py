"""The README.md that `synprep export` writes into each format folder: the released trainer's commands, from
this folder to a trained model and a BLEU score, for this dataset (languages, split names, joint or per-side
BPE). docs/handoff.md explains the same commands and what each release expects; the commits named here are the
ones the formats were checked against."""

from __future__ import annotations

import shlex
from typing import Any

from .languages import UNSPACED
from .subwords import registry

COMMITS = {"pascal": "e-bug/pascal `251a9ca` (its fairseq fork, first commit `b042c4c`)",
           "dbsa-current": "de9uch1/dbsa master `b0cdef6` (`.dep` format since `b96fb46`, 2021-09-02)",
           "dbsa-2020": "de9uch1/dbsa `0e9dd5c` (2020; the `.dep` format of `43eef77` to `664571d`)",
           "nematus": "borgr/nematus branch `generation` `f629db7`"}


def split_names(configuration: dict[str, Any]) -> tuple[str, str, str]:
    """(train, valid, test) split names of the dataset: those names when present, else first / second / last."""
    names = [split.get("name") for split in configuration.get("splits", []) if split.get("name")] or ["train"]
    train = "train" if "train" in names else names[0]
    valid = next((n for n in ("valid", "dev", "validation") if n in names), names[min(1, len(names) - 1)])
    test = "test" if "test" in names else names[-1]
    return train, valid, test


def _score(src: str, tgt: str, test: str, hypotheses: str, marker: tuple[str, str] | None = None) -> str:
    """Shell lines: tokenized hypotheses (sub-words joined) -> detokenized text -> sacrebleu against the raw
    references, as `syntrain eval` scores (sacremoses, or synprep's rule for unspaced languages; ja-mecab/zh).
    `marker`: an hf-tokenizer dataset's target (marker, kind), whose pieces fairseq leaves apart: the first stage
    joins each line's pieces into tokens by synprep's rule (`synprep.subwords.pieces_to_tokens`)."""
    if tgt in UNSPACED:
        detok = (f"python -c \"import sys; from synprep.languages import detokenize; "
                 f"[print(detokenize(l.split(), '{tgt}')) for l in sys.stdin]\"")
    else:
        detok = f"sacremoses -l {tgt} detokenize"
    tokenize = {"ja": " --tokenize ja-mecab", "zh": " --tokenize zh"}.get(tgt, "")
    join = ""
    if marker is not None:
        joined = f"$E/hyp.{test}.joined"
        join = ("python -c \"import sys; from synprep.subwords import pieces_to_tokens as tokens; "
                "[print(' '.join(tokens(l.split(), *sys.argv[1:]))) for l in sys.stdin]\" "
                f"{shlex.quote(marker[0])} {shlex.quote(marker[1])} < {hypotheses} > {joined}   # pieces -> tokens "
                f"by their marker ({marker[1]}): synprep's rule (pip install 'synprep[subwords]')\n")
        hypotheses = joined
    return (f"{join}sed 's/▁/ /g' {hypotheses} | {detok} > $E/hyp.{test}.{tgt}   # ▁: a space inside a token\n"
            f"sacrebleu $E/{test}.ref.{tgt} -i $E/hyp.{test}.{tgt} -m bleu chrf{tokenize}\n")


def _header(fmt: str, configuration: dict[str, Any], codes: list[str], release: str) -> str:
    src, tgt = configuration.get("src_lang") or "src", configuration.get("tgt_lang") or "tgt"
    splits = " ".join(dict.fromkeys(split_names(configuration)))
    joint = configuration.get("bpe", {}).get("joint", True)
    release_option = " --dbsa-release 2020" if fmt == "dbsa" and release == "2020" else ""
    what = registry.of(configuration).export_what()
    bpe = (f"no {what} (the dataset had none, or it was not found when exporting)" if not codes else
           f"`{codes[0]}`: the joint {what}" if joint else
           f"`{'`, `'.join(codes)}`: the {what} of each side")
    return (f"# {fmt} hand-off of dataset `{configuration.get('name', '')}` ({src} -> {tgt})\n\n"
            f"Written by `synprep export` (docs/handoff.md explains every step). Export every split into this "
            f"folder first:\n\n```\nfor s in {splits}; do synprep export OUT/$s -o EXPORT "
            f"--format {fmt}{release_option}; done\n```\n\nThe commands below name the files after those splits; "
            f"a split exported with `--name NAME` is written as `NAME.*`: use NAME for it below.\n\n"
            f"{bpe}; `<split>.ref.{tgt}`: the raw target sentences (BLEU references).\n"
            "Set `E` to this folder (absolute path) in the shell before the commands below.\n\n")


def readme(fmt: str, configuration: dict[str, Any], codes: list[str], dbsa_release: str = "current",
           maxlen: int = 0, marker: tuple[str, str] | None = None) -> str:
    """The README.md of one format folder; `maxlen`: the most tokens of an exported nematus row (source or
    transitions), its trainer's `--maxlen`; `marker`: the target pieces' (marker, kind) of an hf-tokenizer
    dataset (`synprep.subwords.load.dataset_marker`), by which the scoring line joins the hypotheses' pieces
    (None: fairseq joins them, `_remove_pieces`)."""
    body = {"pascal": _pascal, "dbsa": _dbsa, "nematus": _nematus}[fmt]
    return _header(fmt, configuration, codes, dbsa_release) + body(configuration, dbsa_release, maxlen, marker)


def _remove_pieces(configuration: dict[str, Any], flag: str) -> str:
    """fairseq's option that joins the hypotheses' pieces back into tokens: `--remove-bpe` (`@@ `), or for a
    SentencePiece dataset fairseq's sentencepiece BPE with the exported model (a tokenizer.json: none, the
    scoring line joins the pieces by the dataset's marker, `_score`)."""
    return registry.of(configuration).fairseq_pieces(configuration, flag) or ""


def _pascal(configuration: dict[str, Any], _release: str, _maxlen: int, marker: tuple[str, str] | None) -> str:
    src, tgt = configuration.get("src_lang") or "src", configuration.get("tgt_lang") or "tgt"
    train, valid, test = split_names(configuration)
    joint = configuration.get("bpe", {}).get("joint", True)
    share = "--share-all-embeddings" if joint else "--share-decoder-input-output-embed"
    return (f"Checked against {COMMITS['pascal']}. Run from `pascal/fairseq` (its own `preprocess.py`, `train.py`, "
            "`generate.py`; `conda env create -f environment.yml`).\n\n```\n"
            f"python preprocess.py --source-lang {src} --target-lang {tgt} --trainpref $E/{train} "
            f"--validpref $E/{valid} --testpref $E/{test} --destdir $E/data-bin --workers 8"
            f"{' --joined-dictionary' if joint else ''}\n"
            f"python preprocess.py --source-lang {src} --target-lang {tgt} --trainpref $E/tags/{train} "
            f"--validpref $E/tags/{valid} --testpref $E/tags/{test} --destdir $E/tags-bin --only-source "
            f"--srcdict $E/tags/dict.{src}.txt --workers 8\n"
            "python train.py $E/data-bin --tags-data $E/tags-bin --task tags_translation "
            "--arch pascal_transformer_wmt_en_de --encoder-pascal-heads 5 0 0 0 0 0 --parent-ignoring 0.0 "
            f"{share} --dropout 0.1 --optimizer adam --adam-betas '(0.9,0.98)' --adam-eps 1e-09 --clip-norm 0.0 "
            "--lr-scheduler inverse_sqrt --warmup-init-lr 1e-07 --warmup-updates 8000 --lr 0.0007 --min-lr 1e-09 "
            "--weight-decay 0.0 --criterion label_smoothed_cross_entropy --label-smoothing 0.1 --max-tokens 2048 "
            "--max-update 100000 --save-dir $E/checkpoints\n"
            "python generate.py $E/data-bin --tags-data $E/tags-bin --gen-subset test --task tags_translation "
            "--path $E/checkpoints/checkpoint_last.pt --batch-size 1 "
            f"{_remove_pieces(configuration, '--remove-bpe')}--beam 4 --lenpen 0.6 "
            f"> $E/generate.{test}.txt\n"
            f"grep '^H-' $E/generate.{test}.txt | sed 's/^H-//' | sort -n -k1 | cut -f3 > $E/hyp.{test}.tok\n"
            + _score(src, tgt, test, f"$E/hyp.{test}.tok", marker) + "```\n\n"
            "`tags/dict.<src>.txt` holds every parent position (0.0, 0.5, ...) below 1,024 sub-words, so that no "
            "valid or test tag is `<unk>` (the encoder reads `<unk>` as the last position). The released trainer "
            "pads the tags on the right but the source on the left: in a batch, every sentence but the longest "
            "reads its parents shifted by its padding (docs/fidelity.md): `generate.py` therefore translates one "
            "sentence at a time (`--batch-size 1`); training keeps the released batches.\n")


def _dbsa(configuration: dict[str, Any], release: str, _maxlen: int, marker: tuple[str, str] | None) -> str:
    src, tgt = configuration.get("src_lang") or "src", configuration.get("tgt_lang") or "tgt"
    train, valid, test = split_names(configuration)
    joint = configuration.get("bpe", {}).get("joint", True)
    prepare = (f"fairseq-preprocess --source-lang {src} --target-lang {tgt} --trainpref $E/{train} "
               f"--validpref $E/{valid} --testpref $E/{test} --destdir $E/data-bin --workers 8"
               f"{' --joined-dictionary' if joint else ''}\n"
               f"for pair in train:{train} valid:{valid} test:{test}; do for l in {src} {tgt}; do\n"
               "  cp $E/${pair#*:}.dep.$l $E/data-bin/${pair%%:*}.dep.$l   # the name the task opens\n"
               "done; done\n")
    if release == "2020":
        train_cmd = ("fairseq-train $E/data-bin --user-dir dbsa/ --task translation_dep --arch transformer_dep "
                     "--optimizer adam --adam-betas '(0.9, 0.98)' --clip-norm 0.0 --activation-fn relu --lr 7e-4 "
                     "--lr-scheduler inverse_sqrt --warmup-updates 4000 --warmup-init-lr 1e-7 --dropout 0.1 "
                     "--attention-dropout 0.1 --activation-dropout 0.1 --weight-decay 0.0 --max-tokens 12000 "
                     "--label-smoothing 0.1 --save-dir $E/checkpoints --max-update 100000 --load-dependency "
                     "--criterion label_smoothed_cross_entropy_with_dependency --source-dependency-lambda 0.5 "
                     "--target-dependency-lambda 0.5 --dependency-layer 2\n")
        generate = f"{_remove_pieces(configuration, '--remove-bpe')}--beam 4"
        note = (f"Checked against {COMMITS['dbsa-2020']}: heads 1-based, read as `int(x) - 1`. Install that "
                "commit (`git checkout 0e9dd5c && pip install ./`: its pyproject installs de9uch1/fairseq, branch "
                "`return_self_attn`).\n\n")
    else:
        train_cmd = ("fairseq-hydra-train --config-dir dbsa/configs/ --config-name transformer_dep "
                     "common.user_dir=dbsa/ task.data=$E/data-bin checkpoint.save_dir=$E/checkpoints\n")
        generate = f"{_remove_pieces(configuration, '--post-process')}--beam 5"
        note = (f"Checked against {COMMITS['dbsa-current']}: heads 0-based, read as `[i, int(x)]`. "
                "Run from the dbsa clone (`pip install ./`). For the 2020 release export with "
                "`--dbsa-release 2020`, into another folder. Leave `task.dependency_with_input` unset: at "
                "`b0cdef6` it drops every target sentence (no target loss; docs/handoff.md).\n\n")
    return (note + "```\n" + prepare + train_cmd
            + "fairseq-generate $E/data-bin --gen-subset test --user-dir dbsa/ --task translation_dep "
            f"--path $E/checkpoints/checkpoint_last.pt --max-len-a 1 --max-len-b 50 {generate} --nbest 1 "
            f"> $E/generate.{test}.txt\n"
            f"grep '^H-' $E/generate.{test}.txt | sed 's/^H-//' | sort -n -k1 | cut -f3 > $E/hyp.{test}.tok\n"
            + _score(src, tgt, test, f"$E/hyp.{test}.tok", marker) + "```\n")


def _nematus(configuration: dict[str, Any], _release: str, maxlen: int, marker: tuple[str, str] | None) -> str:
    src, tgt = configuration.get("src_lang") or "src", configuration.get("tgt_lang") or "tgt"
    train, valid, test = split_names(configuration)
    labels = (f"$(grep -oE '\"[LR][^\"]*@@[|]\"' $E/{train}.trns1.{tgt}.json | cut -c3- | sort -u | wc -l)")
    maxlen_option = f"--maxlen {maxlen} " if maxlen else ""
    return (f"Checked against {COMMITS['nematus']}. Run from the nematus clone (TensorFlow 1.x) in an "
            "environment that also has `django`, `conllu` and `numpy<1.24` (its reader imports django and "
            "conllu; its GCN code uses `np.bool`, gone from numpy 1.24): "
            "`pip install django conllu 'numpy<1.24'`.\n"
            f"`{train}.{src}.json`, `{train}.trns1.{tgt}.json`: the training vocabularies as "
            "`data/build_dictionary.py` writes them (the arc tokens `L<label>@@|`, `R<label>@@|` included); "
            "`<split>.ids`: the input lines of the kept rows (trees that cannot be encoded are left out); "
            f"`<split>.all.{src}`: every source "
            "line of the split, to translate a whole test set.\n\n```\n"
            f"python nematus/train.py --model_type transformer --source_dataset $E/{train}.{src} "
            f"--target_dataset $E/{train}.trns1.{tgt} --dictionaries $E/{train}.{src}.json "
            f"$E/{train}.trns1.{tgt}.json --valid_source_dataset $E/{valid}.{src} "
            f"--valid_target_dataset $E/{valid}.trns1.{tgt} --valid_remove_parse "
            f"--target_graph --parent_head --target_labels_num {labels} --target_gcn_layers 2 {maxlen_option}"
            "--embedding_size 256 --transformer_enc_depth 4 --transformer_dec_depth 4 "
            "--transformer_num_heads 8 --batch_size 128 --learning_rate 1e-4 --warmup_steps 4000 "
            "--adam_beta1 0.9 --adam_beta2 0.999 --adam_epsilon 1e-8 --finish_after 90000 "
            f"--model $E/model/model\n"
            f"python nematus/translate.py -m $E/model/model -i $E/{test}.all.{src} -o $E/out.{test}.trns -k 4\n"
            f"python nematus/parsing/remove_edges.py $E/out.{test}.trns | sed -E 's/@@( |$)//g' "
            f"> $E/hyp.{test}.tok\n" + _score(src, tgt, test, f"$E/hyp.{test}.tok", marker) + "```\n\n"
            "`--target_graph` reads the transitions (`convert_text_to_graph`); `--parent_head` gives one "
            "attention head the parents (drop it for the GCN-only variant; `--no_gcn_gating` removes the gates). "
            "The hyper-parameters are the paper's (appendix B, medium models). "
            + (f"`--maxlen {maxlen}`: the most tokens of an exported row (source, or target transitions), over "
               "the splits exported here; the trainer skips longer training and validation rows (default 100). "
               if maxlen else "")
            + "Every split's target vocabulary holds both arcs of the labels of every split exported here (the "
            "reader stops on an arc whose label the vocabulary lacks); `synprep export` says which it added.\n")
