"""synprep challenge: the phenomenon rules on hand-made trees, an independent brute-force re-check on the
shared UD treebanks, challenge sets of a converted split (ids = the right pairs, empty subsets = 0), and
syntrain eval / syntrain.compare over the subsets (real sacrebleu, a tiny trained model, hypothesis files)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from synprep.challenge import (
    NOMINAL_RELATIONS,
    REFLEXIVE_PRONOUNS,
    RULES,
    Rule,
    conllu_records,
    find_phenomena,
    load_rules,
    load_subsets,
    rule_matches,
    select_rules,
)
from synprep.conllu import parse_conllu_text, to_tree
from synprep.errors import InputError
from synprep.shards import open_split

from .conftest import REPO

RULE = {rule.name: rule for rule in RULES}
SHARED_UD = REPO.parent / "shared" / "data" / "ud"


def run(*args: str, module: str = "synprep.cli") -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, cwd=REPO)
    return result


def tree(spec: str) -> dict:
    """'form/head/label ...' -> a record (1-based heads)."""
    tokens, heads, labels = [], [], []
    for item in spec.split():
        form, head, label = item.rsplit("/", 2)
        tokens.append(form)
        heads.append(int(head))
        labels.append(label)
    return {"tokens": tokens, "heads": heads, "labels": labels}


def arcs(name: str, spec: str, lang: str | None, feats: list[str] | None = None) -> list[tuple[int, int]]:
    record = tree(spec)
    return rule_matches(RULE[name], record["heads"], record["labels"], record["tokens"], lang, feats)


# ------------------------------------------------------------------------------------------ hand-made trees


def test_particle_rule():
    assert arcs("particle", "John/2/nsubj put/0/root the/4/det fire/2/obj out/2/compound:prt", "en") == [(5, 2)]
    assert arcs("particle", "Sie/2/nsubj schlug/0/root einen/4/det Plan/2/obj vor/2/compound:prt", "de") == [(5, 2)]
    assert arcs("particle", "Sie/2/nsubj schlug/0/root einen/4/det Plan/2/obj vor/2/compound:prt", None) == [(5, 2)]
    # adjacent particle, the plain `compound` relation, a particle that is the root: no match
    assert arcs("particle", "She/2/nsubj picked/0/root up/2/compound:prt the/5/det book/2/obj", "en") == []
    assert arcs("particle", "John/2/nsubj put/0/root the/4/det fire/2/obj out/2/compound", "en") == []
    assert arcs("particle", "out/0/compound:prt now/1/advmod please/1/discourse", "en") == []
    # distance 2 is not adjacent: `gives it up`
    assert arcs("particle", "He/2/nsubj gives/0/root it/2/obj up/2/compound:prt", "en") == [(4, 2)]


def test_reflexive_rule():
    sich = "Er/5/nsubj hat/5/aux sich/5/obj sehr/5/advmod gefreut/0/root"
    assert arcs("reflexive", sich, "de") == [(3, 5)]
    assert arcs("reflexive", sich, None) == [(3, 5)]  # unknown language: every listed language's forms
    assert arcs("reflexive", "Er/0/root freut/1/obj sich/2/obj", "de") == []  # adjacent
    assert arcs("reflexive", "Er/5/nsubj hat/5/aux ihn/5/obj sehr/5/advmod gefreut/0/root", "de") == []
    # `mich` is reflexive only as expl:pv, or with Reflex=Yes when features are known
    mich = "Ich/5/nsubj habe/5/aux mich/5/{} sehr/5/advmod gefreut/0/root"
    assert arcs("reflexive", mich.format("expl:pv"), "de") == [(3, 5)]
    assert arcs("reflexive", mich.format("obj"), "de") == []
    feats = ["_", "_", "Case=Acc|Person=1|PronType=Prs|Reflex=Yes", "_", "_"]
    assert arcs("reflexive", mich.format("obj"), "de", feats) == [(3, 5)]
    assert arcs("reflexive", mich.format("obj"), "de", ["_", "_", "Case=Acc|Person=1|PronType=Prs", "_", "_"]) == []
    # English: expletive `there` is no reflexive, `themselves` as obj is; other relations do not count
    assert arcs("reflexive", "There/2/expl is/0/root a/4/det dog/2/nsubj", "en") == []
    assert arcs("reflexive", "They/2/nsubj armed/0/root and/4/cc hid/2/conj themselves/2/obj", "en") == [(5, 2)]
    assert arcs("reflexive", "They/2/nsubj armed/0/root and/4/cc hid/2/conj themselves/2/obl", "en") == []


def test_stranding_rule():
    what = "What/4/obj are/4/aux you/4/nsubj looking/0/root for/1/case ?/4/punct"
    assert arcs("stranding", what, "en") == [(5, 1)]
    assert arcs("stranding", what, None) == []  # English only: not applied to an unknown language
    assert arcs("stranding", what, "de") == []
    # a preposition before its noun; possessive 's (the phrase's head follows); a nominal after it
    assert arcs("stranding", "He/2/nsubj looked/0/root at/5/case the/5/det sky/2/obl", "en") == []
    assert arcs("stranding", "John/3/nmod:poss 's/1/case dog/4/nsubj sleeps/0/root", "en") == []
    assert arcs("stranding", "What/3/obj did/3/aux talk/0/root about/1/case with/6/case Mary/3/obl", "en") == []
    # a nominal after it but outside its phrase (the subtree of `looking`) does not block it
    assert arcs("stranding", "I/2/nsubj know/0/root what/6/obj you/6/nsubj are/6/aux looking/2/ccomp for/3/case "
                "today/2/obl", "en") == [(7, 3)]
    assert "obl" in NOMINAL_RELATIONS


def test_multiword_tokens_count_as_one_token(tmp_path):
    # `gibt's auf`: word 2 (gibt) + word 3 (es) are one token, so the particle is adjacent to its head token
    text = ("# text = Er gibt's auf .\n1\tEr\ter\tPRON\t_\t_\t2\tnsubj\t_\t_\n2-3\tgibt's\t_\t_\t_\t_\t_\t_\t_\t_\n"
            "2\tgibt\tgeben\tVERB\t_\t_\t0\troot\t_\t_\n3\tes\tes\tPRON\t_\t_\t2\tobj\t_\t_\n"
            "4\tauf\tauf\tADP\t_\t_\t2\tcompound:prt\t_\t_\n5\t.\t.\tPUNCT\t_\t_\t2\tpunct\t_\t_\n\n")
    record = to_tree(parse_conllu_text(text)[0])
    assert record.tokens == ["Er", "gibt's", "auf", "."]
    assert rule_matches(RULE["particle"], record.heads, record.labels, record.tokens, "de") == []
    # word level it would match (2 words apart): the same sentence without the multiword line
    plain = to_tree(parse_conllu_text(text.replace("2-3\tgibt's\t_\t_\t_\t_\t_\t_\t_\t_\n", ""))[0])
    assert rule_matches(RULE["particle"], plain.heads, plain.labels, plain.tokens, "de") == [(4, 2)]
    # a reflexive clitic inside a multiword token (it. alzarmi = alzar + mi) is never a match; FEATS of the
    # token are those of its head word
    text = ("1\tDevo\tdovere\tAUX\t_\t_\t2\taux\t_\t_\n2-3\talzarmi\t_\t_\t_\t_\t_\t_\t_\t_\n"
            "2\talzar\talzare\tVERB\t_\tVerbForm=Inf\t0\troot\t_\t_\n"
            "3\tmi\tmi\tPRON\t_\tReflex=Yes\t2\texpl\t_\t_\n4\tpresto\tpresto\tADV\t_\t_\t2\tadvmod\t_\t_\n\n")
    path = tmp_path / "it_test-ud-test.conllu"
    path.write_text(text, encoding="utf-8")
    (record,) = list(conllu_records(str(path)))
    assert record["tokens"] == ["Devo", "alzarmi", "presto"] and record["feats"][1] == "VerbForm=Inf"
    assert find_phenomena(record, RULES, "it") == {}


def test_user_rules_are_data(tmp_path):
    rules = tmp_path / "rules.toml"
    rules.write_text('[[rule]]\nname = "far-obj"\ndescription = "an object 3+ tokens from its verb"\n'
                     'labels = ["obj"]\nmin_distance = 3\n', encoding="utf-8")
    (extra,) = load_rules(str(rules))
    assert extra == Rule("far-obj", "an object 3+ tokens from its verb", "", ("obj",), min_distance=3)
    record = tree("John/2/nsubj put/0/root the/4/det fire/2/obj out/2/compound:prt")
    assert find_phenomena(record, select_rules(None, (extra,)), "en") == {"particle": [(5, 2)]}
    record = tree("John/2/nsubj put/0/root the/5/det old/5/amod fire/2/obj")
    assert find_phenomena(record, select_rules(["far-obj"], (extra,)), "en") == {"far-obj": [(5, 2)]}
    rules.write_text('[[rule]]\nname = "x"\nlabels = ["obj"]\nmin_gap = 3\n', encoding="utf-8")
    with pytest.raises(InputError, match="unknown key.*min_gap"):
        load_rules(str(rules))
    rules.write_text('[[rule]]\nname = "x"\nlabels = "obj"\n', encoding="utf-8")
    with pytest.raises(InputError, match="labels must be a list"):
        load_rules(str(rules))
    with pytest.raises(InputError, match="unknown phenomenon nope"):
        select_rules(["nope"])
    with pytest.raises(InputError, match="phenomenon particle named more than once"):
        select_rules(["particle", "reflexive", "particle"])
    assert [rule.name for rule in select_rules(["reflexive", "particle"])] == ["reflexive", "particle"]


# ------------------------------------------------------------------------------------------ shared treebanks


def brute_force(path: str, lang: str) -> dict[str, set[int]]:
    """Sentence indices with each phenomenon, by a separate reading (the `conllu` library), a separate
    multiword collapse and an all-pairs scan with descendant sets built top-down."""
    import conllu

    found: dict[str, set[int]] = {"particle": set(), "reflexive": set(), "stranding": set()}
    forms = set(REFLEXIVE_PRONOUNS[lang])
    with open(path, encoding="utf-8") as handle:
        for index, sentence in enumerate(conllu.parse_incr(handle)):
            words = [w for w in sentence if isinstance(w["id"], int)]
            ranges = {w["id"][0]: (w["id"][2], w["form"]) for w in sentence
                      if isinstance(w["id"], tuple) and w["id"][1] == "-"}
            word_head = {w["id"]: w["head"] for w in words}

            def depth(word: int, word_head: dict = word_head) -> int:
                return 0 if word_head[word] == 0 else 1 + depth(word_head[word], word_head)

            tokens, rep, token_of = [], [], {}
            i = 1
            while i <= len(words):
                last, form = ranges.get(i, (i, words[i - 1]["form"]))
                span = list(range(i, last + 1))
                rep.append(sorted(span, key=lambda v: (depth(v), v))[0])
                tokens.append(form)
                for v in span:
                    token_of[v] = len(tokens)
                i = last + 1
            heads = [token_of[word_head[v]] if word_head[v] else 0 for v in rep]
            labels = [words[v - 1]["deprel"] for v in rep]
            feats = [words[v - 1]["feats"] or {} for v in rep]
            n = len(tokens)
            children = {t: [d for d in range(1, n + 1) if heads[d - 1] == t] for t in range(0, n + 1)}

            def below(t: int, children: dict = children) -> set[int]:
                out = {t} if t else set()
                for child in children[t]:
                    out |= below(child, children)
                return out

            for d in range(1, n + 1):
                h, label = heads[d - 1], labels[d - 1]
                if h == 0:
                    continue
                if label == "compound:prt" and abs(d - h) > 1:
                    found["particle"].add(index)
                if label in ("expl:pv", "obj", "expl") and abs(d - h) > 1 and (
                        label == "expl:pv" or tokens[d - 1].lower() in forms or feats[d - 1].get("Reflex") == "Yes"):
                    found["reflexive"].add(index)
                if lang == "en" and label == "case" and h < d:
                    g = heads[h - 1]
                    phrase = below(g)
                    if not any(k in phrase and (k == g or labels[k - 1].split(":")[0] in NOMINAL_RELATIONS)
                               for k in range(d + 1, n + 1)):
                        found["stranding"].add(index)
    return found


TREEBANKS = [("UD_English-EWT/en_ewt-ud-train.conllu", "en"), ("UD_English-EWT/en_ewt-ud-test.conllu", "en"),
             ("UD_German-GSD/de_gsd-ud-test.conllu", "de"), ("UD_German-GSD/de_gsd-ud-dev.conllu", "de")]


@pytest.mark.skipif(not SHARED_UD.is_dir(), reason="../shared/data/ud is absent")
@pytest.mark.parametrize("name,lang", TREEBANKS, ids=[name.split("/")[1] for name, _ in TREEBANKS])
def test_shared_treebanks_match_the_brute_force_scan(name, lang):
    path = str(SHARED_UD / name)
    selected: dict[str, set[int]] = {rule.name: set() for rule in RULES}
    for index, record in enumerate(conllu_records(path)):
        for phenomenon in find_phenomena(record, RULES, lang):
            selected[phenomenon].add(index)
    assert selected == brute_force(path, lang)  # every selected sentence has it, none with it is missed
    assert selected["particle"]  # the treebanks do contain particle verbs (EWT, GSD) ...
    if lang == "de":
        assert selected["reflexive"] and not selected["stranding"]  # ... German reflexives; stranding is en only
    again = {rule.name: set() for rule in RULES}
    for index, record in enumerate(conllu_records(path)):
        for phenomenon in find_phenomena(record, RULES, lang):
            again[phenomenon].add(index)
    assert again == selected  # stable


# ------------------------------------------------------------------------------------------ a converted split

# (English tree, German tree): hand-made, pre-parsed input. Pair 4 is rejected by the length-ratio filter, so
# pair ids and row positions differ after it.
PAIRS = [
    ("John/2/nsubj put/0/root the/4/det fire/2/obj out/2/compound:prt ./2/punct",
     "John/2/nsubj löschte/0/root das/4/det Feuer/2/obj ./2/punct"),
    ("What/4/obj are/4/aux you/4/nsubj looking/0/root for/1/case ?/4/punct",
     "Wonach/2/obl suchst/0/root du/2/nsubj ?/2/punct"),
    ("He/3/nsubj was/3/cop happy/0/root ./3/punct",
     "Er/5/nsubj hat/5/aux sich/5/obj sehr/5/advmod gefreut/0/root ./5/punct"),
    ("She/2/nsubj picked/0/root up/2/compound:prt the/5/det book/2/obj ./2/punct",
     "Sie/2/nsubj schlug/0/root einen/4/det Plan/2/obj vor/2/compound:prt ./2/punct"),
    ("Yes/0/root ./1/punct",
     "Ja/9/discourse ,/1/punct das/9/nsubj ist/9/cop wirklich/9/advmod ganz/7/advmod sehr/9/advmod ein/9/det "
     "Ding/0/root ./9/punct"),
    ("They/2/nsubj turned/0/root the/4/det radio/2/obj off/2/compound:prt ./2/punct",
     "Sie/2/nsubj schalteten/0/root das/4/det Radio/2/obj aus/2/compound:prt ./2/punct"),
    ("He/2/nsubj gives/0/root it/2/obj up/2/compound:prt ./2/punct",
     "Er/2/nsubj gibt/0/root es/2/obj auf/2/compound:prt ./2/punct"),
    ("John/3/nmod:poss 's/1/case dog/4/nsubj sleeps/0/root ./4/punct",
     "Johns/2/nmod:poss Hund/3/nsubj schläft/0/root ./3/punct"),
]
EXPECTED = {"src.particle": [0, 5, 6], "src.reflexive": [], "src.stranding": [1], "tgt.particle": [3, 5, 6],
            "tgt.reflexive": [2]}


def conllu_of(spec: str, index: int) -> str:
    record = tree(spec)
    lines = [f"# sent_id = {index + 1}", f"# text = {' '.join(record['tokens'])}"]
    lines += [f"{i}\t{form}\t_\t_\t_\t_\t{head}\t{label}\t_\t_"
              for i, (form, head, label) in enumerate(zip(record["tokens"], record["heads"], record["labels"]), 1)]
    return "\n".join(lines) + "\n\n"


@pytest.fixture(scope="module")
def split(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("challenge")
    for side, column in (("en", 0), ("de", 1)):
        (root / f"pairs.{side}.conllu").write_text("".join(conllu_of(pair[column], i) for i, pair in enumerate(PAIRS)),
                                                  encoding="utf-8")
    (root / "pipeline.toml").write_text(
        '[pipeline]\nname = "challenge"\nsrc_lang = "en"\ntgt_lang = "de"\noutput = "shards"\n'
        '[splits.train]\nsrc = "pairs.en.conllu"\ntgt = "pairs.de.conllu"\nfilter = false\n'
        '[splits.test]\nsrc = "pairs.en.conllu"\ntgt = "pairs.de.conllu"\nfilter = true\n'
        '[filter]\nlangid = "none"\nmax_ratio = 3.0\n[bpe]\nsymbols = 20\n'
        '[features]\nsrc = ["parents", "labels"]\ntgt = ["parents", "transitions", "labels"]\n'
        'non_projective = "lift"\n', encoding="utf-8")  # stranding is often non-projective: keep those pairs
    done = run("convert", str(root / "pipeline.toml"), "--workers", "1")
    assert done.returncode == 0, done.stderr
    assert open_split(str(root / "shards" / "test")).manifest.rows == len(PAIRS) - 1
    return root


def test_challenge_sets_of_a_split(split, tmp_path):
    done = run("challenge", str(split / "shards" / "test"), "-o", str(tmp_path / "c"))
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "c" / "summary.json").read_text(encoding="utf-8"))
    counts = {e["name"]: e["pairs"] for e in summary["subsets"]}
    assert counts == {**{k: len(v) for k, v in EXPECTED.items()}, "tgt.stranding": 0}
    assert [e["name"] for e in summary["subsets"] if e["skipped"]] == ["tgt.stranding"]  # en only
    assert summary["languages"] == {"src": "en", "tgt": "de"} and summary["rows"] == len(PAIRS) - 1
    assert dict(load_subsets(str(tmp_path / "c"))) == EXPECTED  # empty subsets are listed, with 0 pairs
    assert (tmp_path / "c" / "src.reflexive.ids").read_text() == ""
    # the stderr table: counts per phenomenon and side, '-' where skipped
    table = {line.split()[0]: line.split()[1:] for line in done.stderr.splitlines()[2:5]}
    assert table == {"particle": ["3", "3"], "reflexive": ["0", "1"], "stranding": ["1", "-"]}
    # the ids name the right pairs: each subset row's text is the text of that pair id in the full split
    full = open_split(str(split / "shards" / "test")).table(["id", "src_text", "tgt_text"]).to_pydict()
    by_id = {i: (s, t) for i, s, t in zip(full["id"], full["src_text"], full["tgt_text"])}
    assert 4 not in by_id and 5 in by_id  # pair 4 was rejected: ids are not row positions
    for name, ids in EXPECTED.items():
        side = 0 if name.startswith("src") else 1
        rows = (tmp_path / "c" / f"{name}.tsv").read_text(encoding="utf-8").splitlines()[1:]
        assert [int(r.split("\t")[0]) for r in rows] == ids
        for row, pair_id in zip(rows, ids):
            assert row.split("\t")[3] == by_id[pair_id][side]
            assert row.split("\t")[3] == " ".join(tree(PAIRS[pair_id][side])["tokens"])


def test_challenge_options_and_errors(split, tmp_path):
    done = run("challenge", str(split / "shards" / "test"), "-o", str(tmp_path / "c"), "--side", "tgt",
               "--phenomena", "reflexive")
    assert done.returncode == 0, done.stderr
    assert [e["name"] for e in json.loads((tmp_path / "c" / "summary.json").read_text())["subsets"]] == \
        ["tgt.reflexive"]
    done = run("challenge", str(split / "shards" / "test"), "-o", str(tmp_path / "d"), "--phenomena", "nope")
    assert done.returncode == 2 and done.stderr.startswith("synprep: error: unknown phenomenon nope")
    done = run("challenge", str(tmp_path / "missing"), "-o", str(tmp_path / "e"))
    assert done.returncode == 2 and "no such split folder" in done.stderr and "Traceback" not in done.stderr


def test_inspect_shows_phenomenon_counts(split):
    done = run("inspect", str(split / "shards" / "test"))
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line.split()[1:] for line in done.stdout.splitlines() if line.split()}
    assert rows["particle"] == ["3", "3"] and rows["reflexive"] == ["0", "1"] and rows["stranding"] == ["1", "-"]


# ------------------------------------------------------------------------------------------ eval and compare


def test_eval_and_compare_by_subset(split, tmp_path):
    from sacrebleu.metrics import BLEU, CHRF

    from syntrain.train import TrainConfig, train

    test = str(split / "shards" / "test")
    challenge = tmp_path / "c"
    assert run("challenge", test, "-o", str(challenge)).returncode == 0
    train(TrainConfig(data=str(split / "shards" / "train"), valid=test, out=str(tmp_path / "model"), max_steps=3,
                      warmup=1, eval_interval=3, threads=1, max_tokens=400,
                      model=dict(d_model=16, n_heads=2, d_ff=32, enc_layers=1, dec_layers=1, pascal_heads=[0])))
    checkpoint = tmp_path / "model" / "best.pt"
    done = run("eval", "--checkpoint", str(checkpoint), "--data", test, "--subsets", str(challenge), "--beam", "1",
               "-o", str(tmp_path / "hyp"), module="syntrain")
    assert done.returncode == 0, done.stderr
    hyps = (tmp_path / "hyp").read_text(encoding="utf-8").splitlines()
    full = open_split(test).table(["id", "tgt_text"]).to_pydict()
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in done.stdout.splitlines() if line.startswith("| ") and "---" not in line}
    assert set(rows) == {"subset", "all", *EXPECTED}
    for name, ids in [("all", full["id"]), *EXPECTED.items()]:
        picked = [full["id"].index(i) for i in ids]
        if not picked:
            assert rows[name] == ["0", "-", "-"]
            continue
        refs = [full["tgt_text"][r] for r in picked]
        hyp = [hyps[r] for r in picked]
        assert rows[name] == [str(len(ids)), f"{BLEU().corpus_score(hyp, [refs]).score:.2f}",
                              f"{CHRF().corpus_score(hyp, [refs]).score:.2f}"]
    assert "BLEU: `nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:" in done.stdout

    # compare from hypotheses alone (runs trained elsewhere): a perfect run and a damaged one
    perfect, damaged = tmp_path / "perfect", tmp_path / "damaged"
    perfect.mkdir()
    damaged.mkdir()
    (perfect / "test.hyp").write_text("".join(t + "\n" for t in full["tgt_text"]), encoding="utf-8")
    damaged_text = [t if i % 2 else "nichts" for i, t in enumerate(full["tgt_text"])]
    (damaged / "test.hyp").write_text("".join(t + "\n" for t in damaged_text), encoding="utf-8")
    (damaged / "describe.json").write_text(json.dumps({"switches": "pascal heads [1]", "seed": 7, "steps": 99}))
    done = run("--data", test, "--subsets", str(challenge), "--samples", "50", str(perfect), str(damaged),
               module="syntrain.compare")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "| perfect | ? | ? | ? | ? | 100.00 | baseline |" in done.stdout
    assert any(line.startswith("| damaged | pascal heads [1] | 7 | 99 |") for line in lines)
    table = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
             for line in lines[lines.index("Challenge subsets: " + str(challenge) + " (synprep challenge)"):]
             if line.startswith("| ") and "---" not in line}
    assert table["subset"] == ["pairs", "perfect BLEU", "perfect chrF", "damaged BLEU", "damaged chrF"]
    assert table["src.reflexive"] == ["0", "-", "-", "-", "-"]
    marks = set()
    for name, ids in EXPECTED.items():
        if not ids:
            continue
        picked = [full["id"].index(i) for i in ids]
        refs = [full["tgt_text"][r] for r in picked]
        damaged_hyps = [damaged_text[r] for r in picked]
        cells = table[name]
        assert cells[:3] == [str(len(ids)), "100.00", "100.00"]
        mark = " (identical)" if damaged_hyps == refs else " (p "  # sacrebleu's p of identical systems is not shown
        assert cells[3].startswith(f"{BLEU().corpus_score(damaged_hyps, [refs]).score:.2f}{mark}")
        assert cells[4].startswith(f"{CHRF().corpus_score(damaged_hyps, [refs]).score:.2f}{mark}")
        marks.add(mark)
    assert marks == {" (identical)", " (p "}  # both kinds of cell were checked
    # the checkpoint run is described from best.pt, and describe.json is written for later hypothesis-only use
    model_run = tmp_path / "model"
    done = run("--data", test, "--beam", "1", "--samples", "20", str(model_run), str(perfect),
               module="syntrain.compare")
    assert done.returncode == 0, done.stderr
    described = json.loads((model_run / "describe.json").read_text())
    assert set(described) == {"switches", "seed", "steps", "trained_steps", "minutes", "system", "training_data"}
    assert (described["seed"], described["steps"], described["trained_steps"]) == (1, 3, 3)
    assert (model_run / "test.hyp").read_text(encoding="utf-8").splitlines() == hyps  # the same decoding as eval
    # a hypothesis file of another length is an error naming it
    (damaged / "test.hyp").write_text("one line\n", encoding="utf-8")
    done = run("--data", test, str(perfect), str(damaged), module="syntrain.compare")
    assert done.returncode != 0 and "test.hyp: 1 hypotheses for a split of 7 pairs" in done.stderr


def test_compare_marks_identical_runs_in_every_table_and_in_json(split, tmp_path):
    """A run whose hypotheses equal the baseline's is "identical" with no p value (sacrebleu would give it its
    smallest p, 1 / (samples + 1)) in the main table, the subsets table and --json; a different run keeps its p.
    --normalize-refs is named beside every signature."""
    test = str(split / "shards" / "test")
    challenge = tmp_path / "c"
    assert run("challenge", test, "-o", str(challenge)).returncode == 0
    refs = open_split(test).table(["tgt_text"]).to_pydict()["tgt_text"]
    texts = {"base": [t if i % 3 else "nichts" for i, t in enumerate(refs)],
             "other": [t if i % 2 else "gar nichts" for i, t in enumerate(refs)]}
    texts["same"] = list(texts["base"])
    for name, lines in texts.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "test.hyp").write_text("".join(t + "\n" for t in lines), encoding="utf-8")
    out = tmp_path / "scores.json"
    done = run("compare", "--data", test, "--subsets", str(challenge), "--samples", "50", "--json", str(out),
               "--normalize-refs", "romanian", *(str(tmp_path / name) for name in ("base", "same", "other")),
               module="syntrain")
    assert done.returncode == 0, done.stderr
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]] for line in done.stdout.splitlines()
            if line.startswith("| ") and "---" not in line}
    assert rows["base"][5:8:2] == ["baseline", "baseline"] and rows["same"][5:8:2] == ["identical", "identical"]
    assert all(0 < float(p.removesuffix(" (flagged)")) <= 1 for p in rows["other"][5:8:2])
    assert rows["same"][4] == rows["base"][4] and rows["other"][4] != rows["base"][4]
    results = json.loads(out.read_text(encoding="utf-8"))
    base, same, other = results["systems"]
    assert (same["identical"], same["p_bleu"], same["p_chrf"]) == (True, None, None) and same["bleu"] == base["bleu"]
    assert other["identical"] is False and 0 < other["p_bleu"] <= 1 and 0 < other["p_chrf"] <= 1
    assert results["normalize_refs"] == ["romanian"] and results["pairs"] == len(refs)
    kinds = set()
    for row in results["subsets"]:
        for system in row["systems"][1:] if row["pairs"] else ():
            assert (system["p_bleu"] is None) == (system["p_chrf"] is None) == system["identical"]
            assert system["identical"] or system["system"] == "other"
            kinds.add(system["identical"])
    assert kinds == {True, False}  # identical and different cells were both checked
    signatures = [line for line in done.stdout.splitlines() if line.startswith(("BLEU: `", "chrF2: `"))]
    assert len(signatures) == 4, done.stdout
    assert all(line.endswith("references normalized: romanian (--normalize-refs)")
                                        for line in signatures)


def test_language_of_a_conllu_file_name():
    from synprep.challenge import conllu_language

    assert conllu_language("ud/en_ewt-ud-test.conllu") == "en" and conllu_language("x/train.de.conllu") == "de"
    assert conllu_language("sample_data/en.conllu") == "en"
    assert conllu_language("synth/test.src.conllu") is None and conllu_language("trees.conllu") is None
