"""syntrain syntax switches (docs/switches.md): syntax-directed attention (single, double context),
DBSA, SyncAttn, LISA, S&H. Real torch, small models: only the configured layers/heads change, gradients reach
each mechanism's parameters, uninformative syntax reduces to plain attention, causal masks hold, batch
invariance, and the shards/raw-text errors."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from synprep.features import subword_distances, tree_distances
from synprep.synth import SynthConfig, write_corpus
from syntrain.cli import cli
from syntrain.config.model import ModelConfig
from syntrain.dataset import ParallelData, read_split
from syntrain.model import Transformer, build_model
from syntrain.runfolder.checkpoints import load_checkpoint
from syntrain.switches import declared
from syntrain.switches.active import ActiveSwitches
from syntrain.switches.parse_head import dependency_loss
from syntrain.switches.sync import sync_loss
from syntrain.train import TrainConfig, accumulate_gradients, train
from syntrain.vocab import EOS_ID, PAD_ID, Vocab

SMALL = dict(vocab_size=40, d_model=32, n_heads=4, d_ff=64, enc_layers=2, dec_layers=3, dropout=0.0)
# switch name -> (model options, (stack, 0-based layer, heads) first touched in forward order)
SWITCHES = {
    "directed": (dict(directed_heads=[0, 2]), ("decoder.1.cross_attn", [0, 1])),
    "directed_double": (dict(directed_heads=[0, 2], double_context=True), ("decoder.1.cross_attn", [])),
    "dbsa_encoder": (dict(dbsa_encoder=True, dbsa_layer=2), ("encoder.1.attn", [3])),
    "dbsa_decoder": (dict(dbsa_decoder=True, dbsa_layer=2), ("decoder.1.self_attn", [3])),
    "lisa": (dict(lisa_layer=2), ("encoder.1.attn", [])),  # dot product: same scores as a plain head
    "sync": (dict(dbsa_encoder=True, dbsa_decoder=True, sync_lambda=1.0), ("encoder.0.attn", [3])),
    "labels": (dict(label_embedding=10, source_labels=["nsubj", "obj", "root"]), ("encoder.0.attn", [0, 1, 2, 3])),
}


def _batch(lengths, tgt_lengths=None, seed=0, vocab=40):
    """Random right-padded sentences with random trees: (src, tgt_in, distances, labels, src_head, tgt_head)."""
    rng = np.random.default_rng(seed)
    tgt_lengths = tgt_lengths or [n + 1 for n in lengths]
    b, s, t = len(lengths), max(lengths), max(tgt_lengths)
    src = torch.full((b, s), PAD_ID)
    tgt = torch.full((b, t), PAD_ID)
    distances = torch.zeros((b, s, s), dtype=torch.uint8)
    labels = torch.zeros((b, s), dtype=torch.long)
    src_head = torch.full((b, s), -1)
    tgt_head = torch.full((b, t), -1)
    for i, (n, m) in enumerate(zip(lengths, tgt_lengths)):
        words = n - 1  # + EOS
        heads = [0] + [int(rng.integers(1, k + 1)) for k in range(1, words)]  # token k's head: an earlier one
        owner = np.arange(words)
        src[i, :words] = torch.from_numpy(rng.integers(4, vocab, words))
        src[i, words] = EOS_ID
        distances[i, :words, :words] = torch.from_numpy(subword_distances(tree_distances(heads), owner))
        labels[i, :words] = torch.from_numpy(rng.integers(1, 5, words))
        src_head[i, :words] = torch.tensor([max(h - 1, 0) if h else k for k, h in enumerate(heads)])
        tgt[i, :m] = torch.from_numpy(rng.integers(4, vocab, m))
        tgt_head[i, 1:m] = torch.from_numpy(rng.integers(1, np.arange(1, m) + 1))  # itself or earlier
    return src, tgt, distances, labels, src_head, tgt_head


def _heads(src_head, tgt_head):
    """The head supervision of both dbsa_rule's columns (the test trees give both rules the same heads)."""
    return {f"{side}_{rule}": heads for side, heads in (("src", src_head), ("tgt", tgt_head))
            for rule in ("parent_first", "dbsa_head")}


def _pair(options, seed=0):
    """(vanilla, switch model) with the shared weights equal; the switch's own parameters randomized so
    that it is not the identity by construction (U = I would equal a plain head)."""
    torch.manual_seed(seed)
    vanilla = build_model("tiny", **SMALL).eval()
    model = build_model("tiny", **SMALL, **options).eval()
    missing, unexpected = model.load_state_dict(vanilla.state_dict(), strict=False)
    assert not unexpected
    with torch.no_grad():
        for name in missing:
            model.get_parameter(name).normal_(0, 0.5)
    return vanilla, model


def _head_contexts(model, *inputs):
    """Forward once; per attention module, the per-head contexts (B, H, T, D) entering its output projection."""
    contexts, hooks = {}, []
    for name, module in model.named_modules():
        if name.endswith("attn"):
            def hook(_, args, name=name, attn=module):
                x = args[0]
                contexts[name] = x.view(*x.shape[:2], attn.n_heads, attn.head_dim).transpose(1, 2)
            hooks.append(module.out.register_forward_pre_hook(hook))
    with torch.no_grad():
        logits = model(*inputs).logits
    for hook in hooks:
        hook.remove()
    return contexts, logits


def _forward_inputs(options, src, tgt, distances, labels):
    parent = torch.zeros(src.shape, dtype=torch.float32)
    return (src, tgt, {"src_parent_mid": parent, "distances": distances if options.get("directed_heads") else None,
                       "src_labels": labels if options.get("label_embedding") else None})


def test_subword_distances_pieces_share_their_token_row():
    heads = [2, 0, 2]  # 0 <- 1 -> 2
    matrix = subword_distances(tree_distances(heads).reshape(-1), [0, 0, 1, 2, 2])
    assert matrix.dtype == np.uint8 and matrix.shape == (5, 5)
    assert matrix[0, 1] == 0 and matrix[3, 4] == 0  # pieces of one token
    assert matrix[0, 2] == 1 and matrix[1, 4] == 2 and (matrix == matrix.T).all()


@pytest.mark.parametrize("switch", sorted(SWITCHES))
def test_only_the_configured_layer_and_heads_change(switch):
    options, (first, heads) = SWITCHES[switch]
    vanilla, model = _pair(options)
    src, tgt, distances, labels, _, _ = _batch([7, 5, 6])
    plain, _ = _head_contexts(vanilla, *_forward_inputs({}, src, tgt, distances, labels))
    changed, _ = _head_contexts(model, *_forward_inputs(options, src, tgt, distances, labels))
    order = [f"encoder.{i}.attn" for i in range(2)] + [f"decoder.{i}.{kind}" for i in range(3)
                                                        for kind in ("self_attn", "cross_attn")]
    for name in order[: order.index(first)]:  # everything before the configured module: identical
        torch.testing.assert_close(changed[name], plain[name], rtol=0, atol=0)
    differs = [h for h in range(4) if not torch.allclose(changed[first][:, h], plain[first][:, h], atol=1e-6)]
    assert differs == heads
    if switch == "directed_double":  # the global heads stay; the syntax-directed contexts are added (eq. 14)
        _, with_context = _head_contexts(model, *_forward_inputs(options, src, tgt, distances, labels))
        _, without = _head_contexts(vanilla, *_forward_inputs({}, src, tgt, distances, labels))
        assert not torch.allclose(with_context, without, atol=1e-5)


@pytest.mark.parametrize("switch", sorted(SWITCHES))
def test_gradients_reach_the_mechanism(switch):
    options, _ = SWITCHES[switch]
    _, model = _pair(options)
    model.train()
    src, tgt, distances, labels, src_head, tgt_head = _batch([7, 5, 6])
    outputs = model(*_forward_inputs(options, src, tgt, distances, labels))
    losses = model.auxiliary_losses(outputs, **_heads(src_head, tgt_head))
    total = sum(losses.values()) if losses else outputs.logits.logsumexp(-1).sum()
    total.backward()
    names = {"directed": ["decoder.1.cross_attn.align_hidden.weight", "decoder.1.cross_attn.align_out.weight"],
             "directed_double": ["decoder.1.cross_attn.align_out.weight", "decoder.1.cross_attn.directed_out.weight"],
             "dbsa_encoder": ["encoder.1.attn.parse_bilinear"], "dbsa_decoder": ["decoder.1.self_attn.parse_bilinear"],
             "lisa": ["encoder.1.attn.query.weight"],
             "sync": ["encoder.0.attn.parse_bilinear", "decoder.0.self_attn.parse_bilinear",
                      "decoder.1.cross_attn.query.weight"],
             "labels": ["label_embed.weight"]}[switch]
    for name in names:
        grad = model.get_parameter(name).grad
        assert grad is not None and grad.abs().sum() > 0, name
    if switch == "sync":  # the sync loss alone reaches both DBSA heads and C's layer
        model.zero_grad()
        outputs = model(*_forward_inputs(options, src, tgt, distances, labels))
        model.auxiliary_losses(outputs, **_heads(src_head, tgt_head))["sync"].backward()
        for name in names:
            assert model.get_parameter(name).grad.abs().sum() > 0, name


def test_uninformative_syntax_is_plain_attention():
    """All distances 0: scaling exp(0) = 1 and every key inside the window, so single-context syntax-directed
    heads are plain heads (eqs. 10-11); double context adds L_cs c_s with c_s = the global heads' context;
    a bi-affine DBSA head with U = I is a plain dot-product head."""
    src, tgt, distances, _, _, _ = _batch([7, 5, 6])
    zeros = torch.zeros_like(distances)
    vanilla, single = _pair(dict(directed_heads=[2, 2, 2]))
    parent = torch.zeros(src.shape)
    with torch.no_grad():
        expected = vanilla(src, tgt, src_parent_mid=parent).logits
        torch.testing.assert_close(single(src, tgt, src_parent_mid=parent, distances=zeros).logits, expected)
        changed = single(src, tgt, src_parent_mid=parent, distances=distances).logits
        assert not torch.allclose(changed, expected, atol=1e-4)
        _, double = _pair(dict(directed_heads=[0, 0, 2], double_context=True))
        layer = double.decoder[2].cross_attn
        layer.directed_out.weight.zero_()
        layer.directed_out.bias.zero_()
        torch.testing.assert_close(double(src, tgt, src_parent_mid=parent, distances=zeros).logits, expected)
        _, dbsa = _pair(dict(dbsa_encoder=True, dbsa_decoder=True))
        for module in (dbsa.encoder[0].attn, dbsa.decoder[0].self_attn):
            module.parse_bilinear.copy_(torch.eye(module.head_dim))
        torch.testing.assert_close(dbsa(src, tgt, src_parent_mid=parent).logits, expected)


def test_released_biaffine_scores():
    """dbsa_biaffine = "released" scores as de9uch1/dbsa's DependencyBasedSelfAttention (read at b0cdef6,
    written here from its rule): log_softmax((q / sqrt(d_k)) W^T k^T + k . b) on the parse head, the bias
    unscaled; W Xavier-uniform with gain 1/sqrt(2), b zeros; the bias reaches the loss's gradient; "paper"
    has U only."""
    torch.manual_seed(0)
    paper = build_model("tiny", **SMALL, dbsa_encoder=True)
    model = build_model("tiny", **SMALL, dbsa_encoder=True, dbsa_biaffine="released").eval()
    attn = model.encoder[0].attn
    assert [n for n, _ in paper.named_parameters() if "parse" in n] == ["encoder.0.attn.parse_bilinear"]
    assert [n for n, _ in model.named_parameters() if "parse" in n] == [
        "encoder.0.attn.parse_biaffine_weight", "encoder.0.attn.parse_biaffine_bias"]
    d = attn.head_dim
    weight, bias = attn.parse_biaffine_weight, attn.parse_biaffine_bias
    bound = (1 / np.sqrt(2)) * np.sqrt(6 / (2 * d))  # xavier_uniform_ with gain 1/sqrt(2)
    assert weight.abs().max() <= bound and weight.abs().max() > 0.8 * bound and not bias.any()
    src, tgt, _, _, src_head, tgt_head = _batch([7, 5, 6])
    with torch.no_grad():
        bias.normal_()  # a trained bias: its term is in the scores
    captured = {}  # the parse layer's input, to score it here
    hook = attn.register_forward_hook(lambda module, args, output: captured.update(x=args[0]))
    outputs = model(src, tgt)
    hook.remove()
    weights = outputs.records["parse_encoder"]  # (B, S, S) log-weights of the parse head
    x, mask = captured["x"], (src != PAD_ID)[:, None, :]
    q = attn._heads(attn.query(x))[:, -1]
    k = attn._heads(attn.key_value(x)[..., :x.shape[-1]])[:, -1]
    scores = (q / np.sqrt(d)) @ weight.T @ k.transpose(-1, -2) + (k @ bias)[:, None, :]
    expected = torch.log_softmax(scores.masked_fill(~mask, float("-inf")), -1)
    valid = mask.expand_as(expected)
    torch.testing.assert_close(weights[valid], expected[valid], rtol=1e-4, atol=1e-5)
    model.auxiliary_losses(outputs, **_heads(src_head, tgt_head))["dep_src"].backward()
    assert bias.grad.abs().sum() > 0 and weight.grad.abs().sum() > 0


def test_dependency_loss_is_zero_on_its_heads_and_skips_rows_without_one():
    heads = torch.tensor([[1, 1, 0, -1]])
    one_hot = torch.nn.functional.one_hot(heads.clamp(min=0), 4).float()
    assert dependency_loss(torch.log(one_hot * 0.999 + 0.00025), heads) < 0.01
    uniform = torch.full((1, 4, 4), 0.25).log()
    torch.testing.assert_close(dependency_loss(uniform, heads), torch.tensor(3 * np.log(4.0), dtype=torch.float32))


def test_sync_loss_is_zero_when_d_prime_equals_d_and_positive_otherwise():
    """C = I and E = 0: C E C^T = 0, so D' = the uniform causal attention over the valid target inputs."""
    t = 5
    valid = torch.tensor([[True] * t, [True] * 3 + [False] * 2])
    cross = torch.eye(t).expand(2, t, t)
    encoder = torch.zeros(2, t, t)
    allowed = torch.ones(t, t).tril()[None] * valid[:, None, :] * valid[:, :, None]
    uniform = allowed / allowed.sum(-1, keepdim=True).clamp(min=1)
    assert sync_loss(encoder, uniform, cross, valid) == 0
    garbage = uniform + 5.0 * (1 - allowed)  # masked cells are zero in both: their values do not count
    assert sync_loss(encoder, garbage, cross, valid) == 0
    diagonal = torch.eye(t).expand(2, t, t)
    assert sync_loss(encoder, diagonal, cross, valid) > 0


@pytest.mark.parametrize("switch", ["directed", "directed_double", "dbsa_decoder", "sync"])
def test_decoder_positions_never_see_later_target_tokens(switch):
    options, _ = SWITCHES[switch]
    _, model = _pair(options)
    src, tgt, distances, labels, src_head, tgt_head = _batch([7, 6], [8, 8])
    later = tgt.clone()
    later[:, 5:] = torch.randint(4, 40, later[:, 5:].shape)
    cut = tgt_head.clone()
    cut[:, 5:] = -1
    results = []
    for target in (tgt, later):
        with torch.no_grad():
            outputs = model(*_forward_inputs(options, src, target, distances, labels))
            early = target.clone()
            early[:, 5:] = PAD_ID  # losses over the first 5 positions only
            first = dataclasses.replace(outputs, target_valid=early != PAD_ID)
            results.append((outputs.logits[:, :5], model.auxiliary_losses(first, **_heads(src_head, cut))))
        if "dbsa_decoder" in options or "sync_lambda" in options:
            log_weights = outputs.records["parse_decoder"]
            assert torch.isneginf(log_weights[:, torch.ones(8, 8).triu(1).bool()]).all()
    torch.testing.assert_close(results[0][0], results[1][0], rtol=0, atol=0)
    assert results[0][1].keys() == results[1][1].keys()
    for name in results[0][1]:
        torch.testing.assert_close(results[0][1][name], results[1][1][name], rtol=0, atol=0)


@pytest.mark.parametrize("switch", sorted(SWITCHES))
def test_batch_invariance(switch):
    """A sentence alone = in a padded batch: logits and its share of each auxiliary loss."""
    options, _ = SWITCHES[switch]
    _, model = _pair(options)
    lengths, tgt_lengths = [9, 4, 7], [6, 9, 3]
    src, tgt, distances, labels, src_head, tgt_head = _batch(lengths, tgt_lengths)
    with torch.no_grad():
        outputs = model(*_forward_inputs(options, src, tgt, distances, labels))
        logits = outputs.logits
        batch_losses = model.auxiliary_losses(outputs, **_heads(src_head, tgt_head))
        alone_sums = {name: 0.0 for name in batch_losses}
        for i, (n, m) in enumerate(zip(lengths, tgt_lengths)):
            one = src[i : i + 1, :n], tgt[i : i + 1, :m], distances[i : i + 1, :n, :n], labels[i : i + 1, :n]
            alone = model(*_forward_inputs(options, *one))
            torch.testing.assert_close(alone.logits[0], logits[i, :m], atol=2e-5, rtol=1e-4)
            for name, value in model.auxiliary_losses(alone, **_heads(src_head[i : i + 1, :n],
                                                                            tgt_head[i : i + 1, :m])).items():
                alone_sums[name] += value
    for name, value in batch_losses.items():
        torch.testing.assert_close(value, torch.as_tensor(alone_sums[name]), atol=1e-4, rtol=1e-4)


def test_old_config_loads_with_the_switches_off():
    model = build_model("tiny", **SMALL)
    old = {k: v for k, v in model.cfg.to_dict().items() if k not in ("directed_heads", "dbsa_encoder", "sync_lambda",
                                                                     "label_embedding", "source_labels")}
    again = Transformer(ModelConfig.from_dict(old))
    again.load_state_dict(model.state_dict())
    assert again.switches.describe() == "none (vanilla)"


def test_switch_combinations_are_checked():
    with pytest.raises(ValueError, match="dbsa_encoder and dbsa_decoder"):
        build_model("tiny", **SMALL, sync_lambda=0.5, dbsa_encoder=True)
    with pytest.raises(ValueError, match="lisa_layer"):
        build_model("tiny", **SMALL, lisa_layer=1, dbsa_encoder=True)
    build_model("tiny", **SMALL, pascal_heads=[4], dbsa_encoder=True)  # Pascal's scale on the parse head: composes
    build_model("tiny", **SMALL, pascal_heads=[2], dbsa_encoder=True, lisa_layer=2, label_embedding=10,
                directed_heads=[1])  # Pascal + the encoder-side switches together


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """Synthetic corpus with src distances/labels/parents and tgt parents (synprep synth's features)."""
    root = tmp_path_factory.mktemp("synth")
    write_corpus(str(root / "corpus"), 400, 1, SynthConfig(max_depth=1, non_projective_rate=0), bpe_symbols=60)
    subprocess.run([sys.executable, "-m", "synprep.cli", "convert", str(root / "corpus" / "pipeline.toml"),
                    "--output", str(root / "shards")], check=True, capture_output=True)
    return root / "shards"


def test_collated_features_follow_the_conventions(shards):
    table, _ = read_split(str(shards / "train"))
    vocab = Vocab.build([table])
    labels = sorted({x for row in table.column("src_labels").to_pylist() for x in row})
    columns = {declared(name): why for name, why in {"distances": "a", "src_labels": "b", "src_parent_first": "c",
                                                     "tgt_parent_first": "d"}.items()}
    data = ParallelData(str(shards / "train"), vocab, batch_columns=columns,
                        data_options={"source_labels": labels})
    batch = data.collate(data.keep[:16])
    distances, src_labels, src_head, tgt_head = (batch.inputs[column.name] for column in columns)
    for b, row in enumerate(data.keep[:16]):
        record = table.slice(int(row), 1).to_pylist()[0]
        owner, n, m = record["src_subword_token"], len(record["src_subwords"]), len(record["tgt_subwords"])
        expected = subword_distances(tree_distances(record["src_heads"]), owner)
        assert (distances[b, :n, :n].numpy() == expected).all() and distances[b, n:].sum() == 0
        assert src_labels[b, :n].tolist() == [labels.index(record["src_labels"][t]) + 2 for t in owner]
        assert src_labels[b, n:].sum() == 0  # EOS, pad: "none"
        assert src_head[b, :n].tolist() == record["src_parent_first"] and (src_head[b, n:] == -1).all()
        head = tgt_head[b]
        assert head[0] == -1 and (head[m + 1 :] == -1).all()
        for i, first in enumerate(record["tgt_parent_first"]):
            assert head[i + 1] == (first + 1 if first <= i else -1)  # BOS shift; a later head: no loss
    assert (tgt_head < torch.arange(tgt_head.shape[1]) + 1).all()


def test_missing_shard_field_is_a_one_line_error(shards):
    table, manifest = read_split(str(shards / "train"))
    vocab = Vocab.build([table])
    with pytest.raises(ValueError) as error:
        ParallelData("x/train", vocab, table=table.drop_columns(["src_parent_first"]),
                     batch_columns=ActiveSwitches(ModelConfig(lisa_layer=1)).batch_columns(training=True))
    message = str(error.value)
    assert "\n" not in message and "LISA needs src_parent_first" in message
    assert '"parents"' in message


def test_all_switches_train_together_and_translate(shards, tmp_path):
    """Pascal + every switch in one tiny run: aux losses logged separately, checkpoint records the switches,
    eval reads the features from shards."""
    model = dict(d_model=32, d_ff=64, enc_layers=2, dec_layers=2, dropout=0.1, pascal_heads=[2],
                 directed_heads=[0, 2], double_context=True, dbsa_encoder=True, dbsa_decoder=True,
                 sync_lambda=0.5, lisa_layer=2, label_embedding=4)
    cfg = TrainConfig(data=str(shards / "train"), valid=str(shards / "valid"), out=str(tmp_path / "run"),
                      model=model, max_steps=6, max_tokens=600, warmup=2, eval_interval=6, eval_sentences=5,
                      log_interval=3, threads=1)
    train(cfg)
    lines = [line for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines() if '"loss"' in line]
    assert all(f'"loss_{name}"' in lines[-1] for name in ("dep_src", "dep_tgt", "lisa", "sync"))
    trained, _, ckpt = load_checkpoint(str(tmp_path / "run" / "best.pt"))
    assert ckpt["model_config"]["source_labels"] and trained.cfg.section("directed").double_context
    runner = CliRunner()
    result = runner.invoke(cli, ["eval", "--checkpoint", str(tmp_path / "run" / "best.pt"), "--data",
                                 str(shards / "test"), "--beam", "2"])
    assert result.exit_code == 0, result.output
    assert "BLEU" in result.output


def test_accumulated_aux_losses_equal_one_batch(shards):
    """Aux losses are normalized like the translation loss (by target tokens), so accumulation matches."""
    table, _ = read_split(str(shards / "train"))
    vocab = Vocab.build([table])
    options = dict(d_model=32, n_heads=4, d_ff=64, enc_layers=2, dec_layers=2, dropout=0.0, dbsa_encoder=True,
                   dbsa_decoder=True, sync_lambda=1.0)
    cfg = ModelConfig.from_dict({**options, "vocab_size": len(vocab)})
    data = ParallelData(str(shards / "train"), vocab, batch_columns=ActiveSwitches(cfg).batch_columns(training=True))
    rows = data.keep[:12]
    plain = torch.autocast("cpu", enabled=False)
    grads = []
    for groups in ([rows], [rows[:5], rows[5:]]):
        torch.manual_seed(0)
        model = Transformer(cfg)
        aux: dict = {}
        accumulate_gradients(model, [data.collate(r) for r in groups], torch.device("cpu"), plain, 0.1, aux)
        grads.append((model.encoder[0].attn.parse_bilinear.grad.clone(), {k: float(v) for k, v in aux.items()}))
    torch.testing.assert_close(grads[0][0], grads[1][0], atol=1e-5, rtol=1e-4)
    assert grads[0][1].keys() == {"dep_src", "dep_tgt", "sync"}
    for name in grads[0][1]:
        assert grads[0][1][name] == pytest.approx(grads[1][1][name], rel=1e-4)
