"""CoNLL-U reading, multiword-token collapse, validation errors and writing."""

import pytest

from synprep.conllu import parse_conllu_text, read_conllu, read_trees, to_tree, write_conllu
from synprep.errors import InputError
from synprep.trees import Tree


def row(i, form, head, label, upos="_"):
    return f"{i}\t{form}\t_\t{upos}\t_\t_\t{head}\t{label}\t_\t_"


GERMAN = "\n".join([
    "# sent_id = de-1",
    "# text = Er geht zum Haus.",
    row(1, "Er", 2, "nsubj"),
    row(2, "geht", 0, "root"),
    "3-4\tzum\t_\t_\t_\t_\t_\t_\t_\t_",
    row(3, "zu", 5, "case"),
    row(4, "dem", 5, "det"),
    row(5, "Haus", 2, "obl"),
    "5.1\tgeht\tgehen\tVERB\t_\t_\t_\t_\t2:conj\t_",
    row(6, ".", 2, "punct"),
    "",
])


def test_multiword_token_takes_head_and_label_of_its_highest_word():
    (sentence,) = parse_conllu_text(GERMAN)
    tree = to_tree(sentence)
    assert tree.tokens == ["Er", "geht", "zum", "Haus", "."]
    # zu and dem both hang from Haus (depth 2): the first wins, its arc points to token 4 (Haus)
    assert tree.heads == [2, 0, 4, 2, 2]
    assert tree.labels == ["nsubj", "root", "case", "obl", "punct"]
    assert tree.sent_id == "de-1" and tree.text == "Er geht zum Haus."


def test_multiword_token_with_internal_arc_and_incoming_arcs():
    # "vámonos" = vamos (root) + nos (obj of vamos); word 3 depends on nos -> points to the token
    text = "\n".join([
        "1-2\tvámonos\t_\t_\t_\t_\t_\t_\t_\t_",
        row(1, "vamos", 0, "root"),
        row(2, "nos", 1, "obj"),
        row(3, "ya", 2, "advmod"),
        "",
    ])
    tree = to_tree(parse_conllu_text(text)[0])
    assert tree.tokens == ["vámonos", "ya"]
    assert tree.heads == [0, 1] and tree.labels == ["root", "advmod"]


def test_highest_word_is_not_first_word_of_span():
    # "des" = de (case of les? no: mark) + les (det), with the second word higher in the tree
    text = "\n".join([
        row(1, "Il", 2, "nsubj"),
        row(2, "parle", 0, "root"),
        "3-4\tdes\t_\t_\t_\t_\t_\t_\t_\t_",
        row(3, "de", 4, "case"),
        row(4, "les", 2, "obl"),
        "",
    ])
    tree = to_tree(parse_conllu_text(text)[0])
    assert tree.tokens == ["Il", "parle", "des"] and tree.heads == [2, 0, 2] and tree.labels[2] == "obl"


@pytest.mark.parametrize("bad_row, message, line", [
    ("2\tx\t_\t_\t_\t_\t1\tdep\t_", "expected 10 tab-separated columns, found 9", 3),
    (row(2, "x", "one", "dep"), "head 'one' is not a non-negative integer", 3),
    (row(2, "x", 7, "dep"), "head 7 out of range", 3),
    (row(2, "x", 0, "dep"), "more than one root", 3),
    (row(3, "x", 1, "dep"), "word ID 3 out of sequence", 3),
    (row(2, "x", "\u00b2", "dep"), "head '\u00b2' is not a non-negative integer", 3),  # isdigit() but not int()
    (row(2, "x", 1, "dep").replace("2", "\u00b2", 1), "bad word ID", 3),
    ("1.x\tx\t_\t_\t_\t_\t_\t_\t_\t_", "bad empty node ID '1.x' (expected N.M", 3),
    ("1.\tx\t_\t_\t_\t_\t_\t_\t_\t_", "bad empty node ID", 3),
    (row(2, "x", 1, "nmod poss"), "DEPREL 'nmod poss' holds whitespace", 3),
    (row(2, "x", 1, "nmod\u00a0poss"), "holds whitespace", 3),
    (row(2, "x", 1, ""), "empty DEPREL", 3),
])
def test_malformed_sentences_name_file_line_and_sentence(tmp_path, bad_row, message, line):
    path = tmp_path / "bad.conllu"
    path.write_text("# sent_id = s1\n" + row(1, "a", 0, "root") + "\n" + bad_row + "\n\n", encoding="utf-8")
    with pytest.raises(InputError) as err:
        list(read_trees(str(path)))
    assert message in str(err.value)
    assert str(err.value).startswith(f"{path}:{line} (sentence s1)")


def test_sentence_without_words_is_an_error_naming_its_line(tmp_path):
    """In a file, a sentence of comments only is an error at its first line; a parser's output keeps it (an empty
    input line gives an empty sentence there)."""
    path = tmp_path / "comments.conllu"
    path.write_text(row(1, "a", 0, "root") + "\n\n# sent_id = s2\n# text = nothing\n\n" + row(1, "b", 0, "root")
                    + "\n\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"comments.conllu:3 \(sentence s2\): sentence without words"):
        list(read_trees(str(path)))
    assert [len(s.words) for s in parse_conllu_text(path.read_text())] == [1, 0, 1]
    placeholders = tmp_path / "parsed.conllu"  # synprep parse: an empty line, a line too long to parse
    placeholders.write_text("# sent_id = 1\n# text =\n\n# sent_id = 2\n# text = a b\n# skipped = longer than 3 "
                            "characters\n\n" + row(1, "c", 0, "root") + "\n\n", encoding="utf-8")
    assert [tree.tokens for tree in read_trees(str(placeholders))] == [[], [], ["c"]]


def test_empty_node_ids_are_ignored(tmp_path):
    path = tmp_path / "enhanced.conllu"
    path.write_text(row(1, "a", 0, "root") + "\n1.1\tx\t_\t_\t_\t_\t_\t_\t_\t_\n1.12\ty\t_\t_\t_\t_\t_\t_\t_\t_\n"
                    + row(2, "b", 1, "dep") + "\n\n", encoding="utf-8")
    assert next(read_trees(str(path))).tokens == ["a", "b"]


def test_cycle_is_reported(tmp_path):
    path = tmp_path / "cycle.conllu"
    lines = [row(1, "a", 0, "root"), row(2, "b", 3, "dep"), row(3, "c", 2, "dep")]
    path.write_text("\n".join(lines) + "\n\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"cycle through words 2 -> 3"):
        list(read_trees(str(path)))


def test_not_utf8_and_empty_file(tmp_path):
    bad = tmp_path / "latin1.conllu"
    bad.write_bytes(row(1, "a", 0, "root").encode() + b"\n" + "2\tÄ".encode("latin-1") + b"\n\n")
    with pytest.raises(InputError, match=r"latin1.conllu:2: not valid UTF-8"):
        list(read_conllu(str(bad)))
    empty = tmp_path / "empty.conllu"
    empty.write_text("")
    with pytest.raises(InputError, match="empty CoNLL-U file"):
        list(read_conllu(str(empty)))


def test_write_and_read_back_round_trip(tmp_path):
    sentences = parse_conllu_text(GERMAN + "\n" + GERMAN)
    path = tmp_path / "out.conllu"
    assert write_conllu(sentences, str(path)) == 2
    again = list(read_conllu(str(path)))
    assert [to_tree(s) for s in again] == [to_tree(s) for s in sentences]
    assert again[0].multiword[0][2][1] == "zum"  # the multiword line is written back
    trees_path = tmp_path / "trees.conllu"
    tree = Tree(["10 000", "Euro"], [2, 0], ["nummod", "root"], "x", "10 000 Euro")
    write_conllu([tree], str(trees_path))
    assert next(read_trees(str(trees_path))) == tree


def test_gz_input(tmp_path):
    import gzip

    path = tmp_path / "in.conllu.gz"
    with gzip.open(path, "wt", encoding="utf-8") as out:
        out.write(GERMAN)
    assert next(read_trees(str(path))).tokens[2] == "zum"
