"""`synprep synth`: a synthetic parallel treebank with known structure (tests, demos, trainer smoke runs).

A small generative grammar builds one abstract dependency tree per pair; each language linearizes it with
its own word-order rules and translates word by word from a fixed lexicon, so source and target trees are
the same tree (same arcs, same UD labels) over the same words in a different order:

- source ("en-like"): SVO everywhere; `subj verb obj obl advmod ccomp`; relative clauses `which verb obj`.
- target ("de-like"): verb-second main clauses with the middle field `subj verb advmod obl obj`, verb-final
  subordinate (`dass ...`) and relative clauses: `mark subj advmod obl obj verb`.
- noun phrases (both): `det|poss amod* noun nmod(PP) acl:relcl`; PPs `case det amod* noun`.
- non-projective pairs (a share of exactly `--non-projective-rate` in expectation): the subject's relative
  clause is extraposed behind the main clause (`the dog barks today which sees the cat .`), which crosses
  the root arc on both sides.

Deterministic given the seed. Layout of the output folder: see `write_corpus`.
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .callables import make_callable
from .conllu import ConlluSentence, format_sentence
from .errors import InputError
from .outputs import check_outputs
from .trees import is_projective

if TYPE_CHECKING:
    from .results import SynthResult

SPLIT_SHARES = (("train", 0.90), ("valid", 0.05), ("test", 0.05))

# (source, target) word pairs per class; the translation is this lexicon, word by word
NOUNS = [("dog", "Hund"), ("cat", "Katze"), ("man", "Mann"), ("woman", "Frau"), ("child", "Kind"),
         ("house", "Haus"), ("garden", "Garten"), ("car", "Auto"), ("book", "Buch"), ("teacher", "Lehrer"),
         ("doctor", "Arzt"), ("bird", "Vogel"), ("tree", "Baum"), ("city", "Stadt"), ("river", "Fluss"),
         ("table", "Tisch"), ("letter", "Brief"), ("friend", "Freund"), ("king", "König"), ("horse", "Pferd"),
         ("apple", "Apfel"), ("window", "Fenster"), ("student", "Studentin"), ("farmer", "Bauer")]
NAMES = [("John", "Johann"), ("Mary", "Maria"), ("Paul", "Paulus"), ("Lucy", "Luzia")]
DETS = [("the", "der"), ("a", "ein"), ("this", "dieser"), ("every", "jeder")]
POSS = [("my", "mein"), ("your", "dein"), ("our", "unser")]
ADJS = [("big", "groß"), ("small", "klein"), ("old", "alt"), ("young", "jung"), ("red", "rot"),
        ("green", "grün"), ("happy", "froh"), ("quiet", "still"), ("fast", "schnell"), ("dark", "dunkel"),
        ("new", "neu"), ("clever", "klug"), ("brave", "tapfer")]
TRANSITIVE = [("sees", "sieht"), ("finds", "findet"), ("likes", "mag"), ("follows", "verfolgt"),
              ("paints", "malt"), ("buys", "kauft"), ("reads", "liest"), ("builds", "baut"),
              ("visits", "besucht"), ("calls", "ruft"), ("writes", "schreibt"), ("carries", "trägt"),
              ("watches", "beobachtet")]
INTRANSITIVE = [("sleeps", "schläft"), ("runs", "läuft"), ("sings", "singt"), ("laughs", "lacht"),
                ("waits", "wartet"), ("works", "arbeitet"), ("swims", "schwimmt")]
CLAUSAL = [("says", "sagt"), ("thinks", "denkt"), ("knows", "weiß"), ("believes", "glaubt"), ("hopes", "hofft")]
PREPS = [("in", "in"), ("on", "auf"), ("near", "neben"), ("with", "mit"), ("under", "unter"),
         ("behind", "hinter"), ("from", "von"), ("without", "ohne")]
ADVS = [("today", "heute"), ("often", "oft"), ("quickly", "rasch"), ("here", "hier"), ("again", "wieder"),
        ("slowly", "langsam")]
MARK = ("that", "dass")
CONJUNCTION = ("and", "und")
RELATIVE = ("which", "welcher")
PERIOD = (".", ".")


@dataclass
class Node:
    """One word of the abstract tree: both forms, UPOS, its relation to its head, dependents by relation."""

    src: str
    tgt: str
    upos: str
    deprel: str
    deps: list[Node] = field(default_factory=list)
    extraposed: Node | None = None  # clause head: the subject's relative clause placed behind the clause
    parent: Node | None = None
    is_extraposed: bool = False  # this relative clause is placed by its clause, not by its noun

    def add(self, child: Node) -> Node:
        child.parent = self
        self.deps.append(child)
        return child

    def dep(self, deprel: str) -> Node | None:
        return next((d for d in self.deps if d.deprel == deprel), None)


# sentence lengths: "short" = one clause (Multi30k-like, ~12 tokens); "wmt" = a target length per pair drawn
# from a log-normal (mean ~25 tokens, median ~22, a tail to WMT_MAX_TOKENS), reached with coordinated clauses
LENGTHS = ("short", "wmt")
WMT_LOG_MEAN, WMT_LOG_SIGMA, WMT_MAX_TOKENS = 2.7, 0.6, 100

# vocabularies: "lexicon" = the fixed word lists above (~100 words per side); "zipf" = open classes (nouns,
# names, adjectives, verbs without clausal ones, adverbs) draw a frequency rank from a power law, so word
# frequencies are Zipfian and the distinct words grow with the corpus as in Heaps' law (types ~ pairs^(1/a));
# ranks past a class's list become generated words (see `ZipfVocabulary`)
VOCABULARIES = ("lexicon", "zipf")


@dataclass(frozen=True)
class SynthConfig:
    """Grammar settings (probabilities per opportunity)."""

    max_depth: int = 2  # embedded clauses / PPs inside noun phrases, nested at most this deep
    non_projective_rate: float = 0.05
    p_adj: float = 0.35  # each of up to two adjectives
    p_nmod: float = 0.2
    p_relcl: float = 0.15
    p_obl: float = 0.35
    p_adv: float = 0.25
    p_clausal: float = 0.15
    p_name: float = 0.1
    p_poss: float = 0.15
    lengths: str = "short"  # LENGTHS: "wmt" joins clauses with `and` up to a WMT-like sentence length
    vocabulary: str = "lexicon"  # VOCABULARIES

    def __post_init__(self) -> None:
        if self.lengths not in LENGTHS:
            raise InputError(f"--lengths must be one of {', '.join(LENGTHS)}, got {self.lengths!r}")
        if self.vocabulary not in VOCABULARIES:
            raise InputError(f"--vocabulary must be one of {', '.join(VOCABULARIES)}, got {self.vocabulary!r}")
        if not 0.0 <= self.non_projective_rate <= 1.0:
            raise InputError(f"--non-projective-rate must be in [0, 1], got {self.non_projective_rate}")
        if self.max_depth < 0:
            raise InputError(f"--max-depth must be >= 0, got {self.max_depth}")


_OPEN_CLASSES = {id(NOUNS): "NOUN", id(NAMES): "PROPN", id(ADJS): "ADJ", id(TRANSITIVE): "TRANSITIVE",
                 id(INTRANSITIVE): "INTRANSITIVE", id(ADVS): "ADV"}  # word list -> ZipfVocabulary.CLASSES


class ZipfVocabulary:
    """Open word classes whose words are drawn by frequency rank from a power law.

    A rank is floor(SCALE * (x - 1)) with x Pareto-distributed (P(x > t) = t^-(EXPONENT - 1)), so the rank
    frequencies fall off as a power law (Zipf-Mandelbrot, SCALE the offset) and the distinct ranks drawn grow
    as draws^(1 / EXPONENT) (Heaps' law). EXPONENT and SCALE were fitted (with `--lengths wmt`) so that the
    source side's distinct words per pair count follow pooled real English (WMT newstest sets, Europarl, a
    WMT training sample and KFTT; docs/scale.md): Heaps' exponent ~0.5. The first ranks of a class are its
    lexicon words; rank r past them is a generated word, the same for every seed (syllables drawn by a
    generator seeded by the class and r): an English-like source form and a German-like target form
    (capitalized nouns), so BPE meets real-looking sub-words."""

    EXPONENT, SCALE = 2.0, 265.0
    CLASSES = {"NOUN": 0, "PROPN": 1, "ADJ": 2, "TRANSITIVE": 3, "INTRANSITIVE": 4, "ADV": 5}
    _SRC = (("b", "c", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "br", "cl", "st",
             "tr", "pl", "gr", "sh", "ch", "th", "j"),
            ("a", "e", "i", "o", "u", "ea", "ou", "ai", "y", "ee"),
            ("", "", "n", "r", "s", "t", "l", "nd", "st", "ck", "m", "ng"))
    _TGT = (("b", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "w", "z", "sch", "st", "pf", "kr",
             "gr", "br", "fl", "sp", "tr"),
            ("a", "e", "i", "o", "u", "ei", "au", "ä", "ö", "ü", "ie", "eu"),
            ("", "", "n", "r", "s", "t", "ch", "ng", "cht", "tz", "ll", "rn"))
    _ENDINGS = {2: (("", "ful", "ous", "al", "ive"), ("", "ig", "lich", "isch", "bar")),
                3: (("s",), ("t",)), 4: (("s",), ("t",)), 5: (("ly",), ("weise", "lich", ""))}

    def __init__(self) -> None:
        self.forms: dict[tuple[int, int], tuple[str, str]] = {}  # (class, rank) -> (source, target) of the ranks used

    def draw(self, pairs: list[tuple[str, str]], rng: random.Random) -> tuple[str, str] | None:
        """A word of the open class of `pairs` (one of the word lists) by rank; None for a closed class."""
        cls = _OPEN_CLASSES.get(id(pairs))
        return None if cls is None else self.word(pairs, cls, self.rank(rng))

    def rank(self, rng: random.Random) -> int:
        x = (1.0 - rng.random()) ** (-1.0 / (self.EXPONENT - 1.0))
        return int(self.SCALE * (x - 1.0))

    def word(self, pairs: list[tuple[str, str]], cls: str, rank: int) -> tuple[str, str]:
        if rank < len(pairs):
            return pairs[rank]
        key = (self.CLASSES[cls], rank)
        form = self.forms.get(key)
        if form is None:
            form = self.forms[key] = self._generate(*key)
        return form

    def _generate(self, cls: int, rank: int) -> tuple[str, str]:
        gen = random.Random(rank * 8 + cls)  # the word of this rank, whatever the corpus seed
        syllables = 2 + (gen.random() < 0.3) + (rank > 20000 and gen.random() < 0.3)  # rarer words: longer
        forms = []
        for side, parts in enumerate((self._SRC, self._TGT)):
            word = "".join(gen.choice(parts[0]) + gen.choice(parts[1]) + gen.choice(parts[2])
                           for _ in range(syllables))
            endings = self._ENDINGS.get(cls)
            word += gen.choice(endings[side]) if endings else ""
            capital = cls == 1 or (cls == 0 and side == 1)  # names; German nouns
            forms.append(word.capitalize() if capital else word)
        return forms[0], forms[1]


class Grammar:
    """Generates abstract trees; `rng` is the only source of randomness."""

    def __init__(self, config: SynthConfig, rng: random.Random) -> None:
        self.config, self.rng, self.vocabulary = config, rng, ZipfVocabulary() if config.vocabulary == "zipf" else None

    def _word(self, pairs: list[tuple[str, str]], upos: str, deprel: str) -> Node:
        drawn = self.vocabulary.draw(pairs, self.rng) if self.vocabulary is not None else None
        return Node(*(drawn or self.rng.choice(pairs)), upos, deprel)

    def _chance(self, p: float) -> bool:
        return self.rng.random() < p

    def noun_phrase(self, deprel: str, depth: int, relcl: bool | None = None) -> Node:
        cfg = self.config
        if relcl is None and self._chance(cfg.p_name):
            return self._word(NAMES, "PROPN", deprel)
        noun = self._word(NOUNS, "NOUN", deprel)
        possessive = self._chance(cfg.p_poss)
        noun.add(self._word(POSS, "PRON", "nmod:poss") if possessive else self._word(DETS, "DET", "det"))
        for _ in range(2):
            if self._chance(cfg.p_adj):
                noun.add(self._word(ADJS, "ADJ", "amod"))
        if depth > 0 and self._chance(cfg.p_nmod):
            noun.add(self.prep_phrase("nmod", depth - 1))
        if relcl or (relcl is None and depth > 0 and self._chance(cfg.p_relcl)):
            noun.add(self.clause("acl:relcl", max(depth - 1, 0)))
        return noun

    def prep_phrase(self, deprel: str, depth: int) -> Node:
        noun = self.noun_phrase(deprel, depth)
        noun.deps.insert(0, Node(*self.rng.choice(PREPS), "ADP", "case", parent=noun))
        return noun

    def clause(self, deprel: str, depth: int, extrapose: bool = False) -> Node:
        """A clause headed by its verb: `root`, `ccomp` (with `that`) or `acl:relcl` (subject `which`)."""
        cfg = self.config
        clausal = depth > 0 and deprel != "acl:relcl" and not extrapose and self._chance(cfg.p_clausal)
        verbs = CLAUSAL if clausal else TRANSITIVE if self._chance(0.6) else INTRANSITIVE
        verb = self._word(verbs, "VERB", deprel)
        if deprel == "ccomp":
            verb.add(Node(*MARK, "SCONJ", "mark"))
        if deprel == "acl:relcl":
            verb.add(Node(*RELATIVE, "PRON", "nsubj"))
        else:
            subject = verb.add(self.noun_phrase("nsubj", depth, relcl=True if extrapose else None))
            if extrapose:
                verb.extraposed = subject.dep("acl:relcl")
                verb.extraposed.is_extraposed = True
        if verbs is TRANSITIVE:
            verb.add(self.noun_phrase("obj", depth))
        if self._chance(cfg.p_obl):
            verb.add(self.prep_phrase("obl", depth))
        if self._chance(cfg.p_adv):
            verb.add(self._word(ADVS, "ADV", "advmod"))
        if clausal:
            verb.add(self.clause("ccomp", depth - 1))
        if deprel == "root":
            verb.add(Node(*PERIOD, "PUNCT", "punct"))
        return verb

    def sentence(self) -> Node:
        extrapose = self._chance(self.config.non_projective_rate)
        root = self.clause("root", self.config.max_depth, extrapose)
        if self.config.lengths == "wmt":
            self._coordinate(root)
        return root

    def _coordinate(self, root: Node) -> None:
        """Add `and`-coordinated main clauses to the root until a drawn WMT-like length is reached."""
        target = min(WMT_MAX_TOKENS, round(self.rng.lognormvariate(WMT_LOG_MEAN, WMT_LOG_SIGMA)))
        size = _size(root)
        while size < target:
            clause = self.clause("conj", self.config.max_depth)
            grown = size + _size(clause) + 1
            if grown > WMT_MAX_TOKENS:
                break
            clause.deps.insert(0, Node(*CONJUNCTION, "CCONJ", "cc", parent=clause))
            root.add(clause)
            size = grown


def _size(node: Node) -> int:
    """Words in the subtree of `node` (an extraposed clause included)."""
    return 1 + sum(_size(dep) for dep in node.deps)


# word order: the relations of a head's dependents in linear order, "HEAD" = the head itself
_NOUN_ORDER = ("case", "det", "nmod:poss", "amod", "HEAD", "nmod", "acl:relcl")
_ORDERS = {
    ("src", "clause"): ("cc", "mark", "nsubj", "HEAD", "obj", "obl", "advmod", "ccomp", "EXTRAPOSED", "conj",
                        "punct"),
    ("tgt", "root"): ("cc", "nsubj", "HEAD", "advmod", "obl", "obj", "ccomp", "EXTRAPOSED", "conj", "punct"),
    ("tgt", "clause"): ("mark", "nsubj", "advmod", "obl", "obj", "HEAD", "ccomp"),
}


def linearize(root: Node, side: str) -> list[Node]:
    """The words of the tree in `side`'s order (each subtree contiguous except an extraposed clause)."""
    out: list[Node] = []

    def visit(node: Node) -> None:
        if node.upos != "VERB":
            order = _NOUN_ORDER
        elif side == "tgt" and node.deprel in ("root", "conj"):  # main clauses: verb second
            order = _ORDERS[("tgt", "root")]
        else:
            order = _ORDERS[(side, "clause")]
        for slot in order:
            if slot == "HEAD":
                out.append(node)
            elif slot == "EXTRAPOSED":
                if node.extraposed is not None:
                    visit(node.extraposed)
            else:
                for dep in node.deps:
                    if dep.deprel == slot and not dep.is_extraposed:
                        visit(dep)

    visit(root)
    return out


def to_sentence(root: Node, side: str, sent_id: str) -> ConlluSentence:
    """One side of a pair as a CoNLL-U sentence (text = the tokens joined by spaces)."""
    words = linearize(root, side)
    position = {id(node): i for i, node in enumerate(words, 1)}
    rows = []
    for i, node in enumerate(words, 1):
        form = node.src if side == "src" else node.tgt
        head = position[id(node.parent)] if node.parent is not None else 0
        lemma = form if node.upos == "PROPN" else form.lower()
        rows.append([str(i), form, lemma, node.upos, "_", "_", str(head), node.deprel, "_", "_"])
    text = " ".join(row[1] for row in rows)
    return ConlluSentence(rows, [], [f"sent_id = {sent_id}", f"text = {text}"])


@dataclass
class SynthSummary:
    pairs: dict[str, int]
    non_projective: int
    total: int
    files: list[str]

    def format(self) -> str:
        counts = ", ".join(f"{name} {n}" for name, n in self.pairs.items())
        return (f"synthesized {self.total} pairs ({counts}); {self.non_projective} non-projective "
                f"({self.non_projective / max(self.total, 1):.1%}); wrote {len(self.files)} files")


def split_sizes(pairs: int) -> dict[str, int]:
    """90/5/5; valid and test get at least one pair each when there are three or more."""
    valid = test = max(1, round(pairs * 0.05)) if pairs >= 3 else 0
    return {"train": pairs - valid - test, "valid": valid, "test": test}


PIPELINE_TEMPLATE = """\
# Written by `synprep synth`: converts this folder's gold CoNLL-U (pre-parsed input) into Arrow shards.
#   synprep convert pipeline.toml                  # in this folder: -> shards/<split>/ (paths are relative)
[pipeline]
name = "synth-seed{seed}"
src_lang = "en"                  # en-like and de-like synthetic languages
tgt_lang = "de"
output = "shards"                # relative to this file; `--output` overrides
shard_size = 10000
source = "synprep synth --pairs {pairs} --seed {seed} --max-depth {max_depth} --non-projective-rate {rate}{lengths}"
{splits}
[filter]
langid = "none"                  # synthetic text: no language identification
min_len = 1
max_len = 250
max_ratio = 3.0

[bpe]
{bpe_line}

[features]
src = ["parents", "distances", "labels"]
tgt = ["parents", "transitions", "labels"]
root = "drop"
non_projective = "lift"
"""


def _write_lexicon(path: str, vocabulary: ZipfVocabulary | None) -> None:
    """The word lists, then (zipf vocabulary) the generated words that were used, by class and rank."""
    upos_of = {0: "NOUN", 1: "PROPN", 2: "ADJ", 3: "VERB", 4: "VERB", 5: "ADV"}
    with open(path, "w", encoding="utf-8") as out:
        for upos, words in (("NOUN", NOUNS), ("PROPN", NAMES), ("DET", DETS), ("PRON", POSS), ("ADJ", ADJS),
                            ("VERB", TRANSITIVE + INTRANSITIVE + CLAUSAL), ("ADP", PREPS), ("ADV", ADVS),
                            ("SCONJ", [MARK]), ("CCONJ", [CONJUNCTION]), ("PRON", [RELATIVE]), ("PUNCT", [PERIOD])):
            for src, tgt in words:
                out.write(f"{src}\t{tgt}\t{upos}\n")
        for (cls, _), (src, tgt) in sorted((vocabulary.forms if vocabulary else {}).items()):
            out.write(f"{src}\t{tgt}\t{upos_of[cls]}\n")


def write_corpus(output: str, pairs: int, seed: int, config: SynthConfig = SynthConfig(),
                 bpe_symbols: int = 300) -> SynthSummary:
    """Write the corpus into `output`:

    <split>.src / <split>.tgt            tokenized text, one sentence per line (split = train, valid, test)
    <split>.src.conllu / .tgt.conllu     gold trees (sent_id = the pair's 0-based line number in the split)
    lexicon.tsv                          the word-by-word translation (source, target, UPOS)
    pipeline.toml                        for `synprep convert` (pre-parsed input, joint BPE, features)
    synth.json                           the settings and counts
    """
    if pairs < 1:
        raise InputError(f"--pairs must be >= 1, got {pairs}")
    check_outputs({"-o": output}, {})
    os.makedirs(output, exist_ok=True)
    rng = random.Random(seed)
    grammar = Grammar(config, rng)
    sizes = split_sizes(pairs)
    files: list[str] = []
    non_projective = 0
    counts: dict[str, int] = {}
    for split, size in sizes.items():
        if size == 0:
            continue
        streams = {name: open(os.path.join(output, split + suffix), "w", encoding="utf-8")
                   for name, suffix in (("src", ".src"), ("tgt", ".tgt"), ("src.conllu", ".src.conllu"),
                                        ("tgt.conllu", ".tgt.conllu"))}
        try:
            for index in range(size):
                tree = grammar.sentence()
                for side in ("src", "tgt"):
                    sentence = to_sentence(tree, side, str(index))
                    streams[side].write(sentence.text + "\n")
                    streams[side + ".conllu"].write(format_sentence(sentence))
                    if side == "src":
                        non_projective += not is_projective([int(w[6]) for w in sentence.words])
        finally:
            for stream in streams.values():
                stream.close()
        files += [os.path.join(output, split + s) for s in (".src", ".tgt", ".src.conllu", ".tgt.conllu")]
        counts[split] = size
    _write_lexicon(os.path.join(output, "lexicon.tsv"), grammar.vocabulary)
    split_tables = "".join(f'\n[splits.{split}]\nsrc = "{split}.src.conllu"\ntgt = "{split}.tgt.conllu"\n'
                           for split in counts)
    with open(os.path.join(output, "pipeline.toml"), "w", encoding="utf-8") as out:
        out.write(PIPELINE_TEMPLATE.format(seed=seed, pairs=pairs,
                                           max_depth=config.max_depth, rate=config.non_projective_rate,
                                           lengths=("" if config.lengths == "short" else f" --lengths {config.lengths}")
                                           + ("" if config.vocabulary == "lexicon"
                                              else f" --vocabulary {config.vocabulary}"),
                                           splits=split_tables,
                                           bpe_line=f"symbols = {bpe_symbols}                  # joint BPE learned on "
                                           "the train split" if bpe_symbols else "enabled = false  # no BPE"))
    total = sum(counts.values())
    with open(os.path.join(output, "synth.json"), "w", encoding="utf-8") as out:
        json.dump({"pairs": total, "seed": seed, "splits": counts, "config": config.__dict__,
                   "non_projective_pairs": non_projective}, out, indent=2)
    files += [os.path.join(output, n) for n in ("lexicon.tsv", "pipeline.toml", "synth.json")]
    return SynthSummary(counts, non_projective, total, files)


def synth(output: str, *, pairs: int = 5000, seed: int = 1, max_depth: int = 2, non_projective_rate: float = 0.05,
          bpe_symbols: int = 300, lengths: str = "short", vocabulary: str = "lexicon") -> SynthResult:
    """`synprep synth -o OUTPUT`: a synthetic en-like/de-like parallel corpus with gold trees (90/5/5
    train/valid/test) and the pipeline.toml that converts it. Returns a `SynthResult` (`pipeline`, `summary`)."""
    from .arguments import check_arguments
    from .results import SynthResult

    checked = check_arguments("synprep synth", output=output, pairs=pairs, seed=seed, max_depth=max_depth,
                              non_projective_rate=non_projective_rate, bpe_symbols=bpe_symbols, lengths=lengths,
                              vocabulary=vocabulary)
    output = checked["output"]
    config = SynthConfig(checked["max_depth"], checked["non_projective_rate"], lengths=checked["lengths"],
                         vocabulary=checked["vocabulary"])
    summary = write_corpus(output, checked["pairs"], checked["seed"], config, checked["bpe_symbols"])
    pipeline = os.path.join(output, "pipeline.toml")
    return SynthResult(output, pipeline, summary, summary.format() + f" to {output}; next: synprep convert {pipeline}")


make_callable(__name__, synth)  # synprep.synth(...) is synprep.synth.synth(...) (docs/python-api.md)
