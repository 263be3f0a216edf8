"""Every `synprep ...` / `syntrain ...` command line of README.md and docs/*.md is checked against the click
command line itself (never a hand-kept list of commands or options), and the lines marked runnable are run.

What is a command line:
- in a fenced block (```, ```bash, ```sh, ```shell, ```console): every shell command (after `$ `, `VAR=value`,
  `.venv/bin/`, `|`, `&&`, `;`, `do`, `torchrun ... -m syntrain`; lines joined at a trailing backslash) whose
  program is synprep or syntrain. These are complete commands: required arguments and options must be there.
- in running text: an inline code span that starts with `synprep ` or `syntrain `. A span is a mention: its
  command must exist, every option it names must exist and take the values it is given, and it may not give more
  positional arguments than the command takes; missing required ones are checked only in fenced blocks.

Checks, with click's own parser (`Command.make_parser`, `Group.resolve_command`, the parameters' own types): the
command and subcommand exist, every option exists, an option's value is one it accepts (choices, integer ranges,
syntrain's declared fields), no positional arguments are left over, required options and arguments are present.
Placeholders are accepted as values and arguments, never as option names: a token with two capitals in a row
(`FILE`, `PIPELINE.toml`, `RUN/best.pt`, `HEAD_IP:6379`), a single capital (`N`), shell words (`$s`, `{a,b}`,
`*`, `<x>`), and `...` (any further arguments: the line is then not checked for required ones). `[--opt VALUE]`
is an optional part: checked like the rest.

Runnable: a fenced block right after the HTML comment `<!-- runnable -->` (invisible on the rendered page) is run
with bash, line by line as one script (`set -e`), in a fresh folder holding links to the repository's
`sample_data/` and `pipelines/`, with this interpreter's synprep and syntrain first on PATH; it must exit 0.
Keep such blocks cheap (seconds: `--help`, `synprep synth`, sample_data).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

from .conftest import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SHELL_BLOCKS = {"", "bash", "sh", "shell", "console"}
RUNNABLE = "<!-- runnable -->"
PROGRAMS = ("synprep", "syntrain")
OPERATORS = {"|", "||", "&&", ";", "&", "do", "then", "done", "fi"}  # not "(": prose in plain blocks
REDIRECTS = {">", ">>", "<", ">&", "&>", "2>", "2>>"}
PLACEHOLDER = re.compile(r"[A-Z]{2}|^[A-Z]\b|[$<{*]|\.\.\.")


@dataclass
class CommandLine:
    """One command line found in a page: where, the words after the program, and whether it is complete."""
    page: str
    line: int
    program: str
    words: list[str]
    complete: bool  # a fenced block's line (required arguments checked), not a mention in running text

    def where(self) -> str:
        return f"{self.page}:{self.line}: `{' '.join([self.program, *self.words])}`"


def _words(text: str) -> list[str] | None:
    """Shell words of `text` (comments dropped, operators separate words); None where the shell could not split it."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split, lexer.commenters = True, "#"
    try:
        return list(lexer)
    except ValueError:
        return None


def _commands(words: list[str]) -> list[tuple[str, list[str]]]:
    """(program, its words) for each simple command of one shell line that runs synprep or syntrain."""
    found, current, skip = [], [], False
    for word in [*words, ";"]:
        if skip:
            skip = False
            continue
        if word in REDIRECTS:
            skip = True
            if current and current[-1] in ("1", "2"):
                current.pop()
            continue
        if word not in OPERATORS:
            current.append(word)
            continue
        while current and (re.match(r"^\w+=", current[0]) or current[0] in ("$", "time", "exec", "env")):
            current.pop(0)
        if current and current[0] in ("torchrun", "python", "python3") and "-m" in current:
            current = current[current.index("-m") + 1:]
        program = current[0].rsplit("/", 1)[-1] if current else ""
        if program in PROGRAMS:
            found.append((program, current[1:]))
        current = []
    return found


def _block_lines(text: str) -> list[tuple[int, str]]:
    """(line number, shell line) of a fenced block, continuation lines joined, `$ ` prompts dropped."""
    joined, start, pending = [], 0, ""
    for number, line in enumerate(text.splitlines(), 1):
        if not pending:
            start = number
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        joined.append((start, re.sub(r"^\s*\$ ", "", pending + line)))
        pending = ""
    return joined


def find_command_lines(page: str, text: str) -> list[CommandLine]:
    """Every synprep/syntrain command line of a page (fenced blocks and inline code spans), with its line."""
    found, inside = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if re.match(r"^\s*```", line):
            inside = not inside
            continue
        for span in [] if inside else re.findall(r"(?<!`)`((?:synprep|syntrain) [^`]+)`(?!`)", line):
            words = _words(span.replace("[", " ").replace("]", " "))
            found.extend(CommandLine(page, number, program, rest, False) for program, rest in _commands(words or []))
    for first, body in fenced_blocks(text, SHELL_BLOCKS):
        for offset, shell_line in _block_lines(body):
            words = _words(shell_line.replace("[", " ").replace("]", " "))
            found.extend(CommandLine(page, first + offset, program, rest, "..." not in rest)
                         for program, rest in _commands(words or []))
    return sorted(found, key=lambda command: command.line)


def fenced_blocks(text: str, languages: set[str], after: str | None = None) -> list[tuple[int, str]]:
    """(line number of the block's first line - 1, body) of each fenced block in one of `languages`; with `after`,
    only blocks whose previous non-empty line is `after`."""
    blocks, lines, number = [], text.splitlines(), 0
    while number < len(lines):
        fence = re.match(r"^\s*```(\w*)\s*$", lines[number])
        if not fence:
            number += 1
            continue
        end = next((i for i in range(number + 1, len(lines)) if lines[i].strip() == "```"), len(lines))
        before = next((lines[i].strip() for i in range(number - 1, -1, -1) if lines[i].strip()), "")
        if fence.group(1) in languages and (after is None or before == after):
            blocks.append((number + 1, "\n".join(lines[number + 1:end])))
        number = end + 1
    return blocks


def _root(program: str) -> click.Group:
    if program == "synprep":
        from synprep.cli import cli
    else:
        from syntrain.cli import cli
    return cli


def _placeholder(word: str) -> bool:
    return bool(PLACEHOLDER.search(word))


def _check_values(ctx: click.Context, param: click.Parameter, value: object) -> list[str]:
    """What is wrong with the values given to `param` (placeholders and paths are not checked)."""
    values = value if isinstance(value, (list, tuple)) else [value]
    if isinstance(param.type, (click.Path, click.File)) or param.type is click.STRING:
        return []
    if isinstance(param, click.Option) and param.is_flag:
        return []
    problems = []
    for one in values:
        if not isinstance(one, str) or _placeholder(one):
            continue
        try:
            param.type.convert(one, param, ctx)
        except click.BadParameter as error:
            problems.append(f"{param.opts[0] if param.opts else param.name}: {error.format_message()}")
    return problems


def _without_placeholder_options(words: list[str]) -> list[str]:
    """`words` less the options whose name is a placeholder (`--NAME PATH`: any option a plug-in declares) and
    their placeholder values."""
    kept = []
    for word in words:
        if word.startswith("--") and _placeholder(word):
            kept.append(None)
        elif kept and kept[-1] is None and _placeholder(word):
            continue
        else:
            kept.append(word)
    return [word for word in kept if word is not None]


def _parse(cmd: click.Command, ctx: click.Context, words: list[str], complete: bool) -> tuple[dict, list[str]]:
    """click's parse of `words` (options and arguments by name, what is left). A mention may end with an option
    named without its value (`syntrain eval -o`)."""
    try:
        opts, rest, _ = cmd.make_parser(ctx).parse_args(list(words))
    except click.BadOptionUsage as error:
        if complete or not words or not words[-1].startswith("-") or "requires an argument" not in error.message:
            raise
        opts, rest, _ = cmd.make_parser(ctx).parse_args([*words, "VALUE"])
    return opts, rest


def check_command_line(command: CommandLine) -> list[str]:
    """What is wrong with one command line, as click sees it (empty: nothing)."""
    cmd, words = _root(command.program), _without_placeholder_options([w for w in command.words if w != "..."])
    ctx = click.Context(cmd, info_name=command.program)
    ctx.meta["syntrain.model_flags"] = True  # `syntrain run`'s model flags count as its options
    path = command.program
    while True:
        try:
            opts, rest = _parse(cmd, ctx, words, command.complete)
        except click.UsageError as error:
            return [f"{path}: {error.format_message()}"]
        problems = [problem for param in cmd.get_params(ctx) if param.name in opts
                    for problem in _check_values(ctx, param, opts[param.name])]
        if command.complete and "..." not in command.words:
            problems += [f"{path}: missing {param.opts[0] if isinstance(param, click.Option) else param.name.upper()}"
                         for param in cmd.get_params(ctx) if param.required and opts.get(param.name) in (None, ())]
        if not isinstance(cmd, click.Group):
            if rest:
                problems.append(f"{path}: unexpected extra arguments {' '.join(rest)}")
            return problems
        if problems or not rest:
            return problems
        if _placeholder(rest[0]):
            return []
        sub = cmd.get_command(ctx, rest[0])
        if sub is None:
            return [f"{path}: no command {rest[0]!r} (it has {', '.join(sorted(cmd.list_commands(ctx)))})"]
        path, cmd, words = f"{path} {rest[0]}", sub, rest[1:]
        ctx = click.Context(cmd, info_name=rest[0], parent=ctx)
        ctx.meta["syntrain.model_flags"] = True


def all_command_lines() -> list[CommandLine]:
    return [command for page in PAGES if page.exists()
            for command in find_command_lines(page.relative_to(REPO).as_posix(), page.read_text(encoding="utf-8"))]


def test_finds_command_lines_in_blocks_and_spans():
    """The extraction itself: fenced lines (continuations, pipes, prompts, env, torchrun) and inline spans."""
    text = ("Run `synprep convert PIPELINE.toml --workers 2` or `make x`.\n\n```bash\n"
            "$ echo hi | RAY=1 .venv/bin/syntrain translate \\\n  --checkpoint RUN/best.pt > out.txt  # why\n"
            "torchrun --nproc-per-node 2 -m syntrain run ...\n```\n\n```python\nsynprep = 1\n```\n")
    found = [(c.line, c.program, c.words, c.complete) for c in find_command_lines("x.md", text)]
    assert found == [(1, "synprep", ["convert", "PIPELINE.toml", "--workers", "2"], False),
                     (4, "syntrain", ["translate", "--checkpoint", "RUN/best.pt"], True),
                     (6, "syntrain", ["run", "..."], False)]


@pytest.mark.parametrize(("words", "complete", "wrong"), [
    (["parser", "train", "TREEBANK.conllu", "-o", "x.udpipe"], False, "unexpected extra arguments"),
    (["parser", "train", "-o", "x.udpipe"], True, "missing --conllu"),
    (["parser", "tran", "--conllu", "X"], False, "no command 'tran'"),
    (["convert", "P.toml", "--no-such-option"], False, "No such option"),
    (["parse", "--backend", "nosuch"], False, "--backend"),
])
def test_check_catches_wrong_command_lines(words, complete, wrong):
    problems = check_command_line(CommandLine("x.md", 1, "synprep", words, complete))
    assert any(wrong in problem for problem in problems), problems
    words_ok = ["parser", "train", "--conllu", "TREEBANK.conllu", "-o", "x.udpipe"]
    assert check_command_line(CommandLine("x.md", 1, "synprep", words_ok, True)) == []


def test_every_documented_command_line_matches_the_cli():
    """Every synprep/syntrain line of README.md and docs/*.md, checked by click: one line per problem with page,
    line and what is wrong."""
    commands = all_command_lines()
    assert len(commands) > 50, "the extraction lost the documentation's command lines"
    problems = [f"{command.where()}: {problem}" for command in commands for problem in check_command_line(command)]
    assert not problems, "documented command lines the CLI refuses:\n" + "\n".join(problems)


RUNNABLE_BLOCKS = [(page.relative_to(REPO).as_posix(), first, body) for page in PAGES if page.exists()
                   for first, body in fenced_blocks(page.read_text(encoding="utf-8"), SHELL_BLOCKS, RUNNABLE)]


def test_documentation_has_runnable_blocks():
    assert RUNNABLE_BLOCKS, f"no block is marked {RUNNABLE}"


@pytest.mark.parametrize(("page", "first", "body"), RUNNABLE_BLOCKS,
                         ids=[f"{page}:{first}" for page, first, _ in RUNNABLE_BLOCKS])
def test_runnable_block_runs(page, first, body, tmp_path):
    for name in ("sample_data", "pipelines"):
        (tmp_path / name).symlink_to(REPO / name)
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    done = subprocess.run(["bash", "-e", "-c", body], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, f"{page}:{first}: the block failed ({done.returncode}):\n{done.stderr[-2000:]}"
