"""A Hugging Face Marian (OPUS-MT) or M2M100 (NLLB) folder loaded into syntrain's Transformer
(syntrain.pretrained): on tiny random models built offline, the logits equal transformers' at every non-pad
position (fp32, <= 1e-5), greedy decoding gives generate()'s tokens, a wrong mapping fails the comparison, and a
family or setting syntrain cannot represent is refused in one line naming the config key."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("transformers")
pytest.importorskip("safetensors")

import torch  # noqa: E402

from syntrain.pretrained import PretrainedSource, load_mapped, load_pretrained, read_weights, syntrain_weights  # noqa: E402
from syntrain.search import greedy  # noqa: E402
from syntrain.vocab import BOS_ID, EOS_ID, PAD_ID  # noqa: E402

from .hf_models import build, load_hf  # noqa: E402

FAMILIES = ("marian", "m2m100")
TOLERANCE = 1e-5


def batch(vocab_size: int, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """Sources (pieces + EOS, right-padded) and decoder inputs (BOS + pieces, right-padded) in syntrain ids."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(4, vocab_size, (3, 9), generator=g)
    src[:, -1] = EOS_ID
    src[1, 5], src[1, 6:] = EOS_ID, PAD_ID
    tgt = torch.randint(4, vocab_size, (3, 7), generator=g)
    tgt[:, 0] = BOS_ID
    tgt[2, 4:] = PAD_ID
    return src, tgt


def logit_difference(model, hf, source: PretrainedSource, relative: bool = False) -> float:
    """Max |syntrain - transformers| over the logits of every non-pad decoder position, syntrain's ids mapped;
    the start token's column, out of the softmax and never decoded (`outside_softmax`), aside. `relative`: each
    difference over max(1, |logit|) (a switch's explicit attention path rounds otherwise than the fused kernel)."""
    from syntrain.loss import outside_softmax

    order = torch.tensor(source.order)
    src, tgt = batch(len(order))
    with torch.no_grad():
        ours = model(src, tgt).logits
        theirs = hf(input_ids=order[src], attention_mask=(src != PAD_ID).long(),
                    decoder_input_ids=order[tgt]).logits[..., order]
    columns = [i for i in range(len(order)) if i not in outside_softmax(model.cfg)]
    difference = (ours - theirs).abs() / (theirs.abs().clamp(min=1) if relative else 1)
    return float(difference[tgt != PAD_ID][:, columns].max())


@pytest.fixture(scope="module", params=FAMILIES)
def family_folder(request, tmp_path_factory):
    return request.param, build(tmp_path_factory.mktemp(request.param), request.param)


def test_logits_equal_transformers_at_every_non_pad_position(family_folder):
    _, folder = family_folder
    model, vocab, source = load_pretrained(str(folder))
    assert len(vocab) == len(source.order) == json.loads((folder / "config.json").read_text())["vocab_size"] + 1
    assert logit_difference(model, load_hf(folder), source) <= TOLERANCE


def test_greedy_decoding_gives_generate_tokens(family_folder):
    """num_beams 1, the family's start token, no forced BOS/EOS, pad forbidden (as OPUS-MT's generation config
    forbids it), max_new_tokens N; compared up to the first EOS."""
    import transformers

    family, folder = family_folder
    model, _, source = load_pretrained(str(folder))
    hf, config, order = load_hf(folder), source.config, torch.tensor(source.order)
    src, _ = batch(len(order), seed=3)
    steps = 8
    generation = transformers.GenerationConfig(
        num_beams=1, do_sample=False, max_new_tokens=steps, decoder_start_token_id=config["decoder_start_token_id"],
        eos_token_id=config["eos_token_id"], pad_token_id=config["pad_token_id"],
        bad_words_ids=[[config["pad_token_id"]]], forced_bos_token_id=None, forced_eos_token_id=None)
    with torch.no_grad():
        theirs = hf.generate(input_ids=order[src], attention_mask=(src != PAD_ID).long(),
                             generation_config=generation)[:, 1:].tolist()
    ours = [[source.order[i] for i in row][:steps] for row in greedy(model, src)]

    def upto_eos(ids: list[int]) -> list[int]:
        eos = config["eos_token_id"]
        return ids[: ids.index(eos) + 1] if eos in ids else ids

    assert [upto_eos(row) for row in ours] == [upto_eos(row[:steps]) for row in theirs]
    if family == "m2m100":  # tiny random post-norm Marian models repeat one token whatever the input
        assert len({token for row in ours for token in row}) > 1, ours


def test_a_wrong_mapping_fails_the_comparison(family_folder):
    """Two decoder layers' weights swapped (and, apart, two encoder layers'): the logits differ far beyond the
    tolerance, so the comparison above would catch a mapping error."""
    _, folder = family_folder
    model, _, source = load_pretrained(str(folder))
    hf = load_hf(folder)
    mapped = syntrain_weights(read_weights(str(folder)), model.cfg, source)
    for stack in ("decoder", "encoder"):
        swapped = dict(mapped)
        for name in mapped:
            if name.startswith(f"{stack}.0."):
                other = name.replace(f"{stack}.0.", f"{stack}.1.", 1)
                swapped[name], swapped[other] = mapped[other], mapped[name]
        load_mapped(model, swapped, str(folder))
        assert logit_difference(model, hf, source) > 1e-2
    load_mapped(model, mapped, str(folder))
    assert logit_difference(model, hf, source) <= TOLERANCE


@pytest.mark.parametrize(("change", "key"), [
    ({"model_type": "bart"}, "model_type"),
    ({"activation_function": "tanh"}, "activation_function"),
    ({"decoder_attention_heads": 4}, "decoder_attention_heads"),
    ({"decoder_ffn_dim": 64}, "decoder_ffn_dim"),
    ({"share_encoder_decoder_embeddings": False}, "share_encoder_decoder_embeddings"),
    ({"decoder_start_token_id": None}, "decoder_start_token_id"),
])
def test_a_setting_syntrain_cannot_represent_is_refused_naming_the_config_key(tmp_path, change, key):
    folder = build(tmp_path / "m", "marian")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **change}))
    with pytest.raises(ValueError) as error:
        load_pretrained(str(folder))
    message = str(error.value)
    assert "\n" not in message and f"{key} = " in message and "config.json" in message


# ------------------------------------------------------------------ switches on a pretrained model

STARTS_AT_PRETRAINED = {  # a switch that adds parameters or only a loss: step 0 equals the pretrained model
    "dbsa (paper)": {"dbsa_encoder": True, "dbsa_decoder": True},
    "dbsa (released)": {"dbsa_encoder": True, "dbsa_decoder": True, "dbsa_biaffine": "released"},
    "lisa": {"lisa_layer": 1},
    "syncattn": {"dbsa_encoder": True, "dbsa_decoder": True, "sync_lambda": 0.5},
    "s&h label embeddings (add)": {"label_embedding": 4, "label_combine": "add", "source_labels": ["nsubj", "obj"]},
    "depth embeddings": {"depth_embedding": True},
}


def switch_inputs(src: torch.Tensor) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(5)
    return {"src_labels": torch.randint(0, 4, src.shape, generator=g),
            "src_depth": torch.randint(-1, 6, src.shape, generator=g)}


@pytest.mark.parametrize("options", STARTS_AT_PRETRAINED.values(), ids=STARTS_AT_PRETRAINED)
def test_a_switch_that_adds_parameters_or_a_loss_starts_at_the_pretrained_output(family_folder, options):
    _, folder = family_folder
    plain, _, source = load_pretrained(str(folder))
    switched, _, _ = load_pretrained(str(folder), **options)
    assert len(switched.switches.switches) >= 1
    src, tgt = batch(len(source.order))
    with torch.no_grad():
        ours = switched(src, tgt, switch_inputs(src)).logits
        theirs = plain(src, tgt).logits
    # a parse head's scores go through the explicit attention path (log-softmax, then exp), the plain head through
    # the fused kernel: equal up to float32 rounding, relative to the logits (up to ~15 in these random models)
    torch.testing.assert_close(ours[tgt != PAD_ID], theirs[tgt != PAD_ID], rtol=TOLERANCE, atol=TOLERANCE)


def test_replacing_embedding_dimensions_by_label_embeddings_is_refused_on_a_pretrained_model(tmp_path):
    folder = build(tmp_path / "m", "marian")
    with pytest.raises(ValueError, match="label_combine"):
        load_pretrained(str(folder), label_embedding=4, source_labels=["nsubj"])


def test_pascal_changes_attention_from_step_0(family_folder):
    """Pascal has no parameters: it scales the pretrained heads' scores from the first step (docs/pretrained.md)."""
    _, folder = family_folder
    plain, _, source = load_pretrained(str(folder))
    pascal, _, _ = load_pretrained(str(folder), pascal_heads=[1, 0])
    src, tgt = batch(len(source.order))
    parents = torch.zeros(src.shape, dtype=torch.float32)
    with torch.no_grad():
        ours = pascal(src, tgt, src_parent_mid=parents).logits
        theirs = plain(src, tgt).logits
    assert float((ours - theirs)[tgt != PAD_ID].abs().max()) > 1e-3


def test_tree_decoding_is_refused_on_a_pretrained_model(tmp_path):
    folder = build(tmp_path / "m", "m2m100")
    with pytest.raises(ValueError, match="decoder_target = 'transitions' cannot start from the pretrained model"):
        load_pretrained(str(folder), decoder_target="transitions")


def test_the_loss_equals_transformers_loss_with_label_smoothing(family_folder):
    """The start token's column (a copy of the model's pad or end row) is out of the loss's softmax: syntrain's
    label-smoothed cross-entropy equals transformers' (its Trainer's smoothing spreads over the model's vocabulary,
    as F.cross_entropy's does)."""
    import torch.nn.functional as F

    from syntrain.loss import cross_entropy_sum, outside_softmax

    _, folder = family_folder
    model, _, source = load_pretrained(str(folder))
    order = torch.tensor(source.order)
    src, tgt_in = batch(len(order))
    gold = torch.cat([tgt_in[:, 1:], torch.full((len(tgt_in), 1), EOS_ID)], 1).masked_fill(tgt_in == PAD_ID, PAD_ID)
    with torch.no_grad():
        ours = cross_entropy_sum(model(src, tgt_in).logits, gold, 0.1, outside_softmax(model.cfg))
        logits = load_hf(folder)(input_ids=order[src], attention_mask=(src != PAD_ID).long(),
                                 decoder_input_ids=order[tgt_in]).logits
        theirs = F.cross_entropy(logits.flatten(0, 1), order[gold].masked_fill(gold == PAD_ID, -100).flatten(),
                                 ignore_index=-100, label_smoothing=0.1, reduction="sum")
    assert outside_softmax(model.cfg) == (BOS_ID,)
    torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=1e-4)


# ------------------------------------------------------------------ back to Hugging Face (export-hf)

def fine_tuned_checkpoint(folder, path, **options) -> tuple[object, PretrainedSource]:
    """A checkpoint of the loaded model with every parameter moved (as a fine-tune moves them; the start
    token's own row too), as a run writes one (model, model_config, vocab, pretrained)."""
    from syntrain.runfolder.checkpoints import save_checkpoint

    model, vocab, source = load_pretrained(str(folder), **options)
    torch.manual_seed(7)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.1)
    save_checkpoint({"model": model.state_dict(), "model_config": model.cfg.to_dict(), **vocab.checkpoint_fields(),
                     "pretrained": source.record()}, str(path))
    return model, source


def test_export_hf_round_trip_gives_equal_logits(family_folder, tmp_path):
    from syntrain.export_hf import export_hf

    _, folder = family_folder
    model, source = fine_tuned_checkpoint(folder, tmp_path / "best.pt", lisa_layer=1)
    written = export_hf(str(tmp_path / "best.pt"), str(tmp_path / "hf")).files
    assert str(tmp_path / "hf" / "vocab.json") in written
    exported = load_hf(tmp_path / "hf")
    assert logit_difference(model, exported, source, relative=True) <= TOLERANCE  # LISA: the explicit path
    assert logit_difference(model, load_hf(folder), source) > 1e-2  # the moved weights, not the original's


def test_export_hf_refuses_switches_that_change_inference(family_folder, tmp_path):
    from syntrain.export_hf import export_hf

    _, folder = family_folder
    fine_tuned_checkpoint(folder, tmp_path / "best.pt", pascal_heads=[1, 0], dbsa_encoder=True)
    with pytest.raises(ValueError) as error:
        export_hf(str(tmp_path / "best.pt"), str(tmp_path / "hf"))
    message = str(error.value)
    assert "\n" not in message and "pascal (pascal_heads)" in message and "parse_head" in message
    assert not (tmp_path / "hf").exists()


def test_a_vocabulary_from_tokenizer_json_as_nllb_ships_it(tmp_path):
    """No vocab.json: the pieces come from tokenizer.json with its added tokens (NLLB's language codes)."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel

    from .hf_models import m2m100_pieces

    pieces = m2m100_pieces()
    folder = build(tmp_path / "nllb", "m2m100", pieces)
    (folder / "vocab.json").unlink()
    tokenizer = Tokenizer(WordLevel({piece: i for i, piece in enumerate(pieces[:-2])}, unk_token="<unk>"))
    tokenizer.add_special_tokens(pieces[-2:])  # as NLLB adds its language codes
    tokenizer.save(str(folder / "tokenizer.json"))
    source = PretrainedSource.read(str(folder))
    assert [source.pieces[source.order.index(i)] for i in range(4, len(pieces))] == pieces[4:]
    assert source.pieces[:4] == ("<pad>", "<s>", "</s>", "<unk>") and "<s>#0" in source.pieces
