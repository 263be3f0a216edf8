"""Target-side tree decoding (Choshen & Abend; docs/tree-decoding.md): the generated graph of any prefix (one
transition system, shared with synprep's inverse), no future leak for PARENT / GCN / BiTran, constrained
decoding always yields valid projective trees, a tiny model learns synthetic transitions to exact trees, batch
invariance, and the shards errors. Real torch, real synth shards, small models."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from synprep.conllu import read_trees
from synprep.features import TransitionState, from_transitions, to_transitions, transition_edges
from synprep.synth import SynthConfig, write_corpus
from synprep.trees import is_projective, lift_projective
from syntrain.cli import cli
from syntrain.dataset import ParallelData
from syntrain.model import build_model
from syntrain.search import beam_search, greedy
from syntrain.switches import target_column
from syntrain.switches.tree_decoding import TreeConstraint, arc_label_vocabulary, graph_rows, parent_mask
from syntrain.switches.tree_output import tree_rows
from syntrain.train import accumulate_gradients
from syntrain.vocab import BOS_ID, PAD_ID, SPECIALS, Vocab

LABELS = ["nsubj", "obj", "det", "amod", "compound:prt"]


@st.composite
def trees(draw, max_tokens=9):
    """(heads, labels, pieces) of a random projective tree (random heads, lifted) with random sub-word splits."""
    n = draw(st.integers(1, max_tokens))
    root = draw(st.integers(1, n))
    heads = [0 if t == root else draw(st.sampled_from([h for h in range(1, n + 1) if h != t]))
             for t in range(1, n + 1)]
    for t in range(1, n + 1):  # make it a tree: a token whose head chain runs into a cycle hangs on the root
        seen, h = {t}, heads[t - 1]
        while h and h not in seen:
            seen.add(h)
            h = heads[h - 1]
        if h:
            heads[t - 1] = root
    heads = heads if is_projective(heads) else lift_projective(heads)
    labels = [draw(st.sampled_from(LABELS)) for _ in range(n)]
    pieces = []
    for t in range(n):
        k = draw(st.integers(1, 3))
        pieces.append([f"w{t}p{i}@@" for i in range(k - 1)] + [f"w{t}e"])
    return heads, labels, pieces


def expected_edges(sequence: list[str], heads: list[int], labels: list[str], root: str) -> set:
    """The paper's edges, from the tree (not from the transition system): per arc x with head H, dependent D:
    H -> D, x -> D, H -> x (a word = each of its sub-words), step = x's position."""
    owner, token = [], -1
    for position, item in enumerate(sequence):
        if "-ARC:" in item:
            owner.append(None)
            continue
        if token < 0 or not sequence[position - 1].endswith("@@") or "-ARC:" in sequence[position - 1]:
            token += 1
        owner.append(token)
    pieces = {}
    for position, t in enumerate(owner):
        if t is not None:
            pieces.setdefault(t, []).append(position)
    # which arc attached each dependent: the arcs, in order, attach the tokens the oracle reduces
    edges = set()
    state = TransitionState(root)
    for position, item in enumerate(sequence):
        before = list(state.heads)
        state.push(item)
        if "-ARC:" not in item:
            continue
        changed = [t for t in range(len(before)) if before[t] != state.heads[t]]
        label = item.split(":", 1)[1]
        if not changed:  # the root arc (keep)
            root_token = heads.index(0)
            edges |= {(p, position, position, label) for p in pieces[root_token]}
            continue
        (dependent,) = changed
        head = heads[dependent] - 1  # the tree's head, not the state's
        assert label == labels[dependent]
        edges |= {(h, d, position, label) for h in pieces[head] for d in pieces[dependent]}
        edges |= {(position, d, position, label) for d in pieces[dependent]}
        edges |= {(h, position, position, label) for h in pieces[head]}
    return edges


@settings(max_examples=150, deadline=None)
@given(trees(), st.sampled_from(["drop", "keep"]))
def test_graph_of_every_prefix_matches_the_inverse_and_the_tree(tree, root):
    heads, labels, pieces = tree
    sequence = to_transitions(heads, labels, pieces, root)
    assert sequence is not None
    subwords, owner, heads_back, labels_back = from_transitions(sequence, root)
    assert heads_back == heads and subwords == [p for ps in pieces for p in ps]
    full, full_labels = transition_edges(sequence, root)
    got = {(p, c, s, lab) for (p, c, s), lab in zip(full.tolist(), full_labels)}
    assert got == expected_edges(sequence, heads, labels, root)
    # word -> word edges of the full graph = the inverse's tree: every piece's parents = its head's pieces
    items = [i for i, item in enumerate(sequence) if "-ARC:" not in item]
    for position, token in zip(items, owner):
        parents = {p for p, c, _, _ in got if c == position and p in items}
        assert parents == {items[j] for j, t in enumerate(owner) if t == heads_back[token] - 1}
    for k in range(len(sequence) + 1):  # any prefix: exactly the edges added so far
        prefix, prefix_labels = transition_edges(sequence[:k], root)
        assert {(p, c, s, lab) for (p, c, s), lab in zip(prefix.tolist(), prefix_labels)} == \
            {e for e in got if e[2] < k}


def test_from_transitions_errors_are_unchanged():
    with pytest.raises(ValueError, match="item 1: LEFT-ARC:det needs two items on the stack"):
        from_transitions(["a", "LEFT-ARC:det"])
    with pytest.raises(ValueError, match="arc inside an unfinished token"):
        from_transitions(["a", "b@@", "LEFT-ARC:det"])
    with pytest.raises(ValueError, match="ends with 2 items"):
        from_transitions(["a", "b"])
    with pytest.raises(ValueError, match="final root arc is missing"):
        from_transitions(["a"], root="keep")
    with pytest.raises(ValueError, match=r"item 2 \('b'\) after the root arc"):
        from_transitions(["a", "RIGHT-ARC:root", "b"], root="keep")


# ---- models

VOCAB_ITEMS = list(SPECIALS) + ["der", "Hund", "lie@@", "f", "schnell", ".", "ein", "Ball",
                                "LEFT-ARC:det", "LEFT-ARC:nsubj", "RIGHT-ARC:obj", "RIGHT-ARC:punct",
                                "RIGHT-ARC:advmod", "RIGHT-ARC:root"]
ARC_LABELS = sorted({item.split(":", 1)[1] for item in VOCAB_ITEMS if "-ARC:" in item})
SMALL = dict(d_model=32, n_heads=4, d_ff=64, enc_layers=2, dec_layers=2, dropout=0.0, decoder_target="transitions",
             arc_labels=ARC_LABELS)
TREE_SWITCHES = {
    "linearized": {},
    "parent": dict(parent_layers=[1, 2]),
    "gcn": dict(gcn_layer_count=2),
    "gcn_unlabeled_ungated": dict(gcn_layer_count=2, gcn_labeled=False, gcn_gated=False),
    "parent_gcn_bitran": dict(parent_layers=[2], gcn_layer_count=2, bidirectional=True),
    "bitran": dict(bidirectional=True),
}
SENTENCES = [
    "der Hund LEFT-ARC:det lie@@ f LEFT-ARC:nsubj schnell RIGHT-ARC:advmod . RIGHT-ARC:punct",
    "ein Ball LEFT-ARC:det",
    "der Hund LEFT-ARC:det lie@@ f LEFT-ARC:nsubj ein Ball LEFT-ARC:det RIGHT-ARC:obj",
]


def _model(options, vocab, seed=0, root="drop"):
    torch.manual_seed(seed)
    model = build_model("tiny", vocab_size=len(vocab), transition_root=root, **SMALL, **options).eval()
    if options.get("gcn_layer_count"):
        with torch.no_grad():  # not the identity-like start: make the GCN matter
            for p in model.gcn.parameters():
                p.normal_(0, 0.3)
    return model


def _inputs(vocab, sentences, uses_graph=True):
    ids = [[BOS_ID] + [vocab.stoi[i] for i in s.split()] for s in sentences]
    t = max(map(len, ids))
    tgt = torch.full((len(ids), t), PAD_ID)
    for b, row in enumerate(ids):
        tgt[b, : len(row)] = torch.tensor(row)
    labels = {label: i + 2 for i, label in enumerate(ARC_LABELS)}
    graph = torch.from_numpy(graph_rows([s.split() for s in sentences], labels)) if uses_graph else None
    src = torch.randint(4, len(vocab), (len(ids), 5), generator=torch.Generator().manual_seed(3))
    return src, tgt, graph


def test_graph_rows_follow_the_decoder_positions():
    labels = {label: i + 2 for i, label in enumerate(ARC_LABELS)}
    rows = graph_rows([SENTENCES[1].split()], labels)
    # ein(1) Ball(2) LEFT-ARC:det(3): Ball -> ein, x -> ein, Ball -> x, all added at input position 3
    assert sorted(map(tuple, rows.tolist())) == [(0, 2, 1, labels["det"], 3), (0, 2, 3, labels["det"], 3),
                                                 (0, 3, 1, labels["det"], 3)]
    mask = parent_mask(torch.from_numpy(rows), torch.arange(4)[None])
    assert mask[0, 3].tolist() == [False, False, True, True]  # the arc token: itself and its head word
    assert mask[0, 1].tolist() == [False, True, False, False]  # ein's parents come later: only itself


@pytest.mark.parametrize("name", list(TREE_SWITCHES))
def test_no_future_leak(name):
    """Changing later tokens leaves the outputs of earlier positions identical (graph rebuilt from the new
    sequence: an arc whose edges reach back to earlier tokens changes nothing before it)."""
    vocab = Vocab(VOCAB_ITEMS)
    options = TREE_SWITCHES[name]
    model = _model(options, vocab)
    a = SENTENCES[0]
    b = "der Hund LEFT-ARC:det ein Ball LEFT-ARC:det RIGHT-ARC:obj . RIGHT-ARC:punct"  # same first 3 items
    src, tgt, graph = _inputs(vocab, [a, b])
    src[1] = src[0]
    with torch.no_grad():
        logits = model(src, tgt, graph=graph).logits
    same = 4  # BOS + 3 shared items
    assert torch.allclose(logits[0, :same], logits[1, :same], atol=1e-5)
    assert not torch.allclose(logits[0, same:9], logits[1, same:9], atol=1e-3)


@pytest.mark.parametrize("name", ["parent", "gcn", "parent_gcn_bitran"])
def test_graph_changes_the_output(name):
    """The switch reads the graph: a graph with its edges removed gives other logits after the first arc."""
    vocab = Vocab(VOCAB_ITEMS)
    model = _model(TREE_SWITCHES[name], vocab)
    src, tgt, graph = _inputs(vocab, SENTENCES[:1])
    with torch.no_grad():
        with_graph = model(src, tgt, graph=graph).logits
        without = model(src, tgt, graph=graph[:0]).logits
    assert torch.allclose(with_graph[0, :3], without[0, :3], atol=1e-5)  # before the first arc
    assert not torch.allclose(with_graph[0, 3:], without[0, 3:], atol=1e-4)


def test_bitran_prefix_pass_equals_decoding_that_prefix_alone():
    """Exact BiTran: the prediction at position p = a bidirectional pass over the prefix 0..p alone."""
    vocab = Vocab(VOCAB_ITEMS)
    model = _model(TREE_SWITCHES["parent_gcn_bitran"], vocab)
    src, tgt, graph = _inputs(vocab, SENTENCES[:1])
    with torch.no_grad():
        logits = model(src, tgt, graph=graph).logits
        memory, src_mask = model.encode(src)
        items = SENTENCES[0].split()
        labels = {label: i + 2 for i, label in enumerate(ARC_LABELS)}
        for p in range(tgt.shape[1]):
            prefix_graph = torch.from_numpy(graph_rows([items[:p]], labels))
            alone = model.decode(tgt[:, : p + 1], memory, src_mask, graph=prefix_graph)[0, p]
            assert torch.allclose(logits[0, p], alone, atol=1e-5)
        # the bidirectional pass differs from a causal one once an arc links earlier tokens
        full = model.decode(tgt, memory, src_mask, graph=graph)[0, 2]
        assert not torch.allclose(logits[0, 2], full, atol=1e-4)


@pytest.mark.parametrize("name", list(TREE_SWITCHES))
def test_batch_invariance(name):
    vocab = Vocab(VOCAB_ITEMS)
    model = _model(TREE_SWITCHES[name], vocab)
    src, tgt, graph = _inputs(vocab, SENTENCES)
    with torch.no_grad():
        batched = model(src, tgt, graph=graph).logits
        for b, sentence in enumerate(SENTENCES):
            s1, t1, g1 = _inputs(vocab, [sentence])
            alone = model(src[b : b + 1], t1, graph=g1).logits
            n = t1.shape[1]
            assert torch.allclose(batched[b, :n], alone[0], atol=1e-5), (name, b)


@pytest.mark.parametrize("name", ["parent", "gcn", "parent_gcn_bitran"])
def test_switches_read_the_root_arc_under_root_keep(name):
    """Root policy keep (the released nematus code's): the final RIGHT-ARC:root adds its edges (root word -> arc
    item) to the graph, PARENT / GCN / BiTran read them at that position only (earlier positions unchanged)."""
    vocab = Vocab(VOCAB_ITEMS)
    model = _model(TREE_SWITCHES[name], vocab, root="keep")
    items = (SENTENCES[0] + " RIGHT-ARC:root").split()
    src, tgt, _ = _inputs(vocab, [" ".join(items)], uses_graph=False)
    labels = {label: i + 2 for i, label in enumerate(ARC_LABELS)}
    keep = torch.from_numpy(graph_rows([items], labels, "keep"))
    arc = len(items)  # the root arc's decoder input position (BOS shift)
    without = keep[keep[:, 4] < arc]  # the same graph without the root arc's edges
    assert len(without) < len(keep) and (keep[keep[:, 4] == arc][:, 2] == arc).all()
    with pytest.raises(ValueError, match="needs two items on the stack"):
        graph_rows([items], labels, "drop")  # under drop the root arc is not a valid item
    with torch.no_grad():
        read = model(src, tgt, graph=keep).logits
        unread = model(src, tgt, graph=without).logits
    assert torch.allclose(read[0, :arc], unread[0, :arc], atol=1e-5)
    assert not torch.allclose(read[0, arc], unread[0, arc], atol=1e-4)


@pytest.mark.parametrize("root", ["drop", "keep"])
@pytest.mark.parametrize("name", ["linearized", "parent_gcn_bitran"])
def test_constrained_decoding_always_gives_valid_trees(name, root, tmp_path):
    """Untrained models (random preferences): greedy and beam outputs are all valid projective trees, also when
    the length limit cuts in (short sources)."""
    vocab = Vocab(VOCAB_ITEMS)
    for seed in range(3):
        model = _model(TREE_SWITCHES[name], vocab, seed, root)
        # favour a continuing piece and arcs, the moves that break trees (an output bias on the shared weights)
        biased = torch.nn.Linear(model.cfg.sizes.d_model, len(vocab))
        with torch.no_grad():
            biased.weight = model.output.weight
            biased.bias.zero_()
            biased.bias[[vocab.stoi["lie@@"], vocab.stoi["LEFT-ARC:det"], vocab.stoi["RIGHT-ARC:root"]]] = 3.0
        model.output = biased
        src = torch.randint(4, len(vocab), (4, 1 + seed * 3), generator=torch.Generator().manual_seed(seed))
        outputs = greedy(model, src, vocab=vocab) + beam_search(model, src, beam=3, vocab=vocab)
        path = tmp_path / f"{seed}.conllu"
        with open(path, "w", encoding="utf-8") as f:
            for i, ids in enumerate(outputs):
                items = vocab.decode(ids)
                rows = tree_rows(items, root)  # the inverse accepts it (ValueError otherwise)
                assert rows and is_projective([h for _, h, _ in rows])
                if root == "keep":
                    assert items[-1].startswith("RIGHT-ARC:")
                f.write(f"# sent_id = {i}\n" + "".join(f"{j}\t{form}\t_\t_\t_\t_\t{h}\t{lab}\t_\t_\n"
                                                       for j, (form, h, lab) in enumerate(rows, 1)) + "\n")
        assert len(list(read_trees(str(path)))) == len(outputs)  # synprep's CoNLL-U reader validates them


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, len(VOCAB_ITEMS) - 1), min_size=40, max_size=40), st.integers(2, 30),
       st.sampled_from(["drop", "keep"]))
def test_constraint_follows_any_preference_to_a_tree(preferences, limit, root):
    """Whatever the model prefers (a random ranking per step), the constrained choice completes a valid tree
    within `limit` items + the end, once the limit leaves room for one word."""
    vocab = Vocab(VOCAB_ITEMS)
    constraint = TreeConstraint(vocab, root, 1)
    chosen = []
    for step in range(limit):
        mask = constraint.mask(limit - step, torch.device("cpu"))[0]
        order = [preferences[(step + j) % len(preferences)] for j in range(len(preferences))] + list(range(len(vocab)))
        token = next(t for t in order if mask[t])
        if token == 2:  # EOS
            break
        chosen.append(token)
        constraint.push([token])
    else:
        pytest.fail("no end within the limit")
    items = [vocab.itos[t] for t in chosen]
    if limit < 2 + (root == "keep"):
        return
    from_transitions(items, root)


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """Synthetic corpus (gold trees) converted twice: non-projective trees kept as null transitions, and
    without the transitions feature."""
    root = tmp_path_factory.mktemp("synth")
    write_corpus(str(root / "corpus"), 300, 2, SynthConfig(max_depth=0, non_projective_rate=0.1), bpe_symbols=60)
    pipeline = (root / "corpus" / "pipeline.toml").read_text()
    (root / "corpus" / "keep.toml").write_text(pipeline.replace('non_projective = "lift"', 'non_projective = "keep"'))
    (root / "corpus" / "none.toml").write_text(pipeline.replace('tgt = ["parents", "transitions", "labels"]',
                                                                'tgt = ["parents", "labels"]'))
    for name in ("keep", "none"):
        subprocess.run([sys.executable, "-m", "synprep.cli", "convert", str(root / "corpus" / f"{name}.toml"),
                        "--output", str(root / name)], check=True, capture_output=True)
    return root


def test_null_transitions_are_skipped_and_counted(shards):
    from syntrain.dataset import read_split

    table, _ = read_split(str(shards / "keep" / "train"))
    nulls = table.column("tgt_transitions").null_count
    assert nulls > 0
    vocab = Vocab.build([table], decoder_target=target_column("transitions"))
    assert any(item.startswith("LEFT-ARC:") for item in vocab.itos)
    data = ParallelData(str(shards / "keep" / "train"), vocab, skip_null=True,
                        decoder_target=target_column("transitions"))
    assert data.skipped_null == nulls and len(data) == table.num_rows - nulls
    kept = ParallelData(str(shards / "keep" / "train"), vocab, decoder_target=target_column("transitions"))
    assert len(kept) == table.num_rows and len(kept.loss_rows) == table.num_rows - nulls


def test_missing_transitions_is_one_line_naming_the_feature(shards, tmp_path):
    from syntrain.dataset import read_split

    path = str(shards / "none" / "train")
    vocab = Vocab.build([read_split(path)[0]])
    with pytest.raises(ValueError, match=r"needs tgt_transitions: convert with \[features\] tgt = \[\.\.\., "
                                         r"\"transitions\"\]"):
        ParallelData(path, vocab, decoder_target=target_column("transitions"))
    recipe = tmp_path / "r.toml"
    recipe.write_text(f'[data]\ntrain = "{path}"\n[model]\ndecoder_target = "transitions"\n[train]\nmax_steps = 1\n')
    done = subprocess.run([sys.executable, "-m", "syntrain", "run", str(recipe), "--out", str(tmp_path / "run")],
                          capture_output=True, text=True)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "tgt_transitions" in lines[0] and '"transitions"' in lines[0]


def test_tiny_model_learns_synthetic_transitions_to_exact_trees(shards):
    """Memorize 6 synthetic pairs (PARENT + GCN): greedy decoding then gives exactly the reference
    transitions, i.e. the reference trees."""
    from syntrain.dataset import read_split

    path = str(shards / "keep" / "train")
    table, _ = read_split(path)
    vocab = Vocab.build([table], decoder_target=target_column("transitions"))

    options = dict(SMALL, arc_labels=arc_label_vocabulary(vocab), d_model=64, d_ff=128, parent_layers=[1],
                   gcn_layer_count=1)
    torch.manual_seed(0)
    model = build_model("tiny", vocab_size=len(vocab), **options)
    data = ParallelData(path, vocab, skip_null=True, **model.switches.parallel_data_arguments(training=True))
    rows = data.keep[np.argsort(data.tgt_len[data.keep], kind="stable")][:6]
    batch = data.collate(rows)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    references = [table.column("tgt_transitions")[int(r)].as_py() for r in rows]
    for _ in range(12):  # at most 300 updates; stop once greedy decoding reproduces every reference
        model.train()
        for _ in range(25):
            accumulate_gradients(model, [batch], torch.device("cpu"), contextlib.nullcontext(), 0.0)
            optimizer.step()
            optimizer.zero_grad()
        model.eval()
        outputs = greedy(model, batch.src, vocab=vocab)
        if [vocab.decode(ids) for ids in outputs] == references:
            break
    for ids, reference in zip(outputs, references):
        assert vocab.decode(ids) == reference
        assert tree_rows(vocab.decode(ids)) == tree_rows(reference)


def test_eval_writes_trees_and_the_tree_measure(shards, tmp_path):
    """End to end: `syntrain run` (2 steps, PARENT + GCN + BiTran) then `syntrain eval --trees --json` (a missing
    output folder is refused before decoding)."""
    recipe = tmp_path / "r.toml"
    data = shards / "keep"
    recipe.write_text(f'[data]\ntrain = "{data}/train"\nvalid = "{data}/valid"\n[model]\npreset = "tiny"\n'
                      f'd_model = 32\nd_ff = 64\nenc_layers = 1\ndec_layers = 2\ndecoder_target = "transitions"\n'
                      f'parent_layers = [2]\ngcn_layer_count = 2\nbidirectional = true\n[train]\nmax_steps = 2\n'
                      f'warmup = 2\neval_interval = 2\neval_sentences = 4\nmax_tokens = 800\n')
    out = tmp_path / "run"
    result = CliRunner().invoke(cli, ["run", str(recipe), "--out", str(out)])
    assert result.exit_code == 0, result.output
    trees_path, json_path = tmp_path / "trees.conllu", tmp_path / "scores.json"
    args = ["eval", "--checkpoint", str(out / "best.pt"), "--data", f"{data}/test", "--beam", "2"]
    missing = CliRunner().invoke(cli, [*args, "--json", str(tmp_path / "nowhere" / "s.json")])
    assert missing.exit_code == 1 and "s.json: the folder" in missing.output and "BLEU" not in missing.output
    result = CliRunner().invoke(cli, [*args, "--trees", str(trees_path), "--json", str(json_path)])
    assert result.exit_code == 0, result.output
    assert "valid trees 100.0%" in result.output
    rows = ParallelData(f"{data}/test", Vocab(VOCAB_ITEMS)).table.num_rows
    assert len(list(read_trees(str(trees_path)))) == rows
    scores = json.loads(json_path.read_text(encoding="utf-8"))
    assert f"BLEU {scores['bleu']:.2f}  BLEU signature: {scores['bleu_signature']}" in result.output
    assert (scores["valid_trees"], scores["pairs"], scores["beam"]) == (100.0, rows, 2)
    assert "chrf" in scores and "exact_outputs" in scores and scores["data"] == os.path.abspath(f"{data}/test")
    result = CliRunner().invoke(cli, ["env", "--checkpoint", str(out / "best.pt")])
    assert "PARENT head in decoder layers [2]" in result.output and "BiTran (exact" in result.output


@pytest.mark.parametrize("name", ["linearized", "parent", "gcn", "bitran"])
def test_multi30k_recipes_load(name):
    """The Multi30k tree-decoding recipes are valid configs with the vanilla recipe's budget and seed."""
    from syntrain.cli import load_run_config
    from syntrain.config.core import PRESETS
    from syntrain.config.model import ModelConfig
    from syntrain.switches.active import ActiveSwitches
    from syntrain.train import TrainConfig

    from .conftest import REPO

    recipes = REPO / "pipelines" / "train"
    values = TrainConfig.from_dict(load_run_config(str(recipes / f"multi30k-trans-{name}.toml")))
    vanilla = TrainConfig.from_dict(load_run_config(str(recipes / "multi30k-vanilla.toml")))
    model = ModelConfig.from_dict({**PRESETS[values.preset], **values.model, "vocab_size": 100})
    assert ActiveSwitches(model).decoder_target_name == "transitions"  # from_dict checked it
    assert (values.seed, values.max_minutes, values.lr, values.data) == (vanilla.seed, vanilla.max_minutes,
                                                                         vanilla.lr, vanilla.data)
    assert values.max_tokens * values.accum_steps == vanilla.max_tokens * vanilla.accum_steps
