"""Opening text inputs and outputs: plain, .gz, .xz, or '-' for stdin/stdout, always UTF-8.

Lines are decoded one by one so that a non-UTF-8 byte is reported with its line number. Every reader opens its
input with `open_binary`, which looks at the first bytes once: UTF-16 or UTF-32 text (a byte order mark, or NUL
bytes) is one error naming the file and its encoding (read line by line it would split inside characters), and a
UTF-8 byte order mark is skipped (it is not part of the first line).
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
import lzma
import os
import stat
import sys
import zlib
from collections.abc import Iterator
from typing import IO, Any, BinaryIO

from .errors import InputError, WriteError

UTF8_BOM = b"\xef\xbb\xbf"
_WIDE_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32-LE"), (b"\x00\x00\xfe\xff", "UTF-32-BE"),  # UTF-32 first: its LE
              (b"\xff\xfe", "UTF-16-LE"), (b"\xfe\xff", "UTF-16-BE"))                # mark starts like UTF-16's
SNIFF_BYTES = 4096  # how much of the start of a text input is looked at for NUL bytes


# where each wide encoding puts the zero bytes of ASCII characters: (unit size, offsets within a unit)
_ZERO_BYTES = {"UTF-32-LE": (4, (1, 2, 3)), "UTF-32-BE": (4, (0, 1, 2)), "UTF-16-LE": (2, (1,)), "UTF-16-BE": (2, (0,))}


def wide_encoding(head: bytes) -> str | None:
    """'UTF-16-LE text (byte order mark)', 'UTF-32-BE text', ... when the text starting with `head` is UTF-16 or
    UTF-32: from its byte order mark or, without one, from its NUL bytes (an encoding is named when the bytes decode
    in it, its NULs sit where it puts ASCII's zero bytes, and the text shows a line end or is mostly ASCII). None
    for anything else: a stray NUL byte in UTF-8 text is left to the line checks."""
    for mark, name in _WIDE_BOMS:
        if head.startswith(mark):
            return f"{name} text (byte order mark)"
    nuls = head.count(0)
    if not nuls:
        return None
    for name, (unit, offsets) in _ZERO_BYTES.items():
        size = len(head) // unit * unit
        placed = sum(head[offset:size:unit].count(0) for offset in offsets)
        if placed * 4 < nuls * 3:  # most NULs elsewhere: not this encoding
            continue
        try:
            text = head[:size].decode(name)
        except UnicodeDecodeError as err:
            if err.start < size - 4:  # only a character cut by the end of `head` may fail
                continue
            text = head[:err.start].decode(name)
        if "\x00" not in text and ("\n" in text or nuls * 4 >= len(head)):
            return f"{name} text"
    return None


def _check_text_start(stream: BinaryIO, path: str) -> None:
    """Refuse UTF-16/UTF-32 (or NUL bytes) at the start of a text input; skip a UTF-8 byte order mark."""
    peek = getattr(stream, "peek", None)
    if peek is None:
        return
    try:
        head = peek(SNIFF_BYTES)[:SNIFF_BYTES]
    except (OSError, EOFError, lzma.LZMAError, zlib.error):  # a damaged .gz/.xz: its reader says so, with the file
        return
    found = wide_encoding(head)
    if found:
        raise InputError(f"is {found}, not UTF-8: convert it first (iconv -f {found.split()[0]} -t UTF-8)", path)
    if head.startswith(UTF8_BOM):
        stream.read(len(UTF8_BOM))


def standard_stream(reading: bool) -> BinaryIO:
    """Standard input's (`reading`) or output's binary stream; a closed one (`<&-`, `>&-`: Python has none) is one
    line naming it."""
    stream = sys.stdin if reading else sys.stdout
    if stream is None:
        raise InputError(f"standard {'input' if reading else 'output'} is closed: give a file instead of '-'",
                         "<stdin>" if reading else "<stdout>")
    return stream.buffer


def is_standard(stream: object) -> bool:
    """Whether `stream` is standard input's or output's binary stream (never closed by its reader)."""
    return any(stream is getattr(std, "buffer", False) for std in (sys.stdin, sys.stdout))


def open_binary(path: str, mode: str = "rb") -> BinaryIO:
    """Open `path` (or stdin/stdout for '-') as a binary stream, transparently (de)compressing. For reading, the
    stream starts after a UTF-8 byte order mark, and UTF-16/UTF-32 text is an InputError naming the encoding."""
    if path == "-":
        stream = standard_stream("r" in mode)
        if "r" in mode:
            _check_text_start(stream, "<stdin>")
        return stream
    if "r" in mode:
        no_endless_device(path)
    try:
        if path.endswith(".gz"):
            stream = gzip.open(path, mode)
        elif path.endswith(".xz"):
            stream = lzma.open(path, mode)
        else:
            stream = open(path, mode)  # noqa: SIM115
    except FileNotFoundError:
        raise InputError("no such file", path) from None
    except IsADirectoryError:
        raise InputError("is a directory, expected a file", path) from None
    except PermissionError:
        raise InputError("permission denied", path) from None
    except ValueError:  # a NUL character in the name
        raise InputError("not a valid file name (it holds a NUL character)", repr(path)) from None
    if "r" in mode:
        try:
            _check_text_start(stream, path)  # type: ignore[arg-type]
        except InputError:
            stream.close()
            raise
    return stream  # type: ignore[return-value]


@contextlib.contextmanager
def rereadable(path: str | None) -> Iterator[str | None]:
    """`path` itself when it can be read twice (a file, or None); else (a named pipe, `<(command)`, '-' for
    stdin) a temporary copy of what it gives, read once, for commands that read an input more than once (a
    second read of a pipe would wait for ever or find it empty). Errors about the copy name `path`."""
    if path is None or (path != "-" and (not os.path.exists(path) or stat.S_ISREG(os.stat(path).st_mode))):
        yield path
        return
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix="synprep-input-")
    copy = os.path.join(folder, "input" + "".join(s for s in (".gz", ".xz") if path.endswith(s)))
    try:
        no_endless_device(path)
        with contextlib.ExitStack() as stack:
            source = standard_stream(True) if path == "-" else stack.enter_context(open(path, "rb"))
            with open(copy, "wb") as target:
                shutil.copyfileobj(source, target, 1 << 20)
        yield copy
    except InputError as err:
        if err.path == copy:
            err.path = path
        raise
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def check_text_file(path: str) -> None:
    """Fail now, before any work, if a text input is missing, unreadable or UTF-16/UTF-32. Only regular files are
    opened: stdin and named pipes (`<(command)`) can be read once, so they are checked when they are read."""
    if path == "-":
        return
    if not os.path.exists(path) or os.path.isfile(path) or os.path.isdir(path):
        open_binary(path).close()


def decode_line(raw: bytes, path: str, lineno: int) -> str:
    """Decode one raw line as UTF-8, or raise an InputError naming file and line."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(f"not valid UTF-8 (byte {err.start + 1} of the line)", path, lineno) from None


def read_lines(path: str) -> Iterator[str]:
    """Yield the lines of a text file without line ends (1 line = 1 item; only '\\n' ends a line).

    Decodes ~1 MB blocks at once (C speed); on a bad byte, finds the line to name it.
    """
    for block in read_line_blocks(path):
        yield from block


def read_line_blocks(path: str) -> Iterator[list[str]]:
    """The lines of `read_lines`, as lists of consecutive lines (~1 MB each)."""
    stream = open_binary(path)
    lineno = 0
    try:
        while True:
            block = stream.readlines(1 << 20)
            if not block:
                break
            try:
                text = b"".join(block).decode("utf-8")
            except UnicodeDecodeError:
                for offset, raw in enumerate(block, 1):
                    decode_line(raw, path, lineno + offset)
                raise  # unreachable: some line failed above
            lineno += len(block)
            if text.endswith("\n"):
                text = text[:-1]
            lines = text.split("\n")
            if "\r" in text:
                lines = [line.rstrip("\r") for line in lines]
            yield lines
    except (OSError, EOFError, lzma.LZMAError) as err:
        raise InputError(f"cannot read compressed input: {err}", path) from None
    finally:
        if not is_standard(stream):
            stream.close()


def open_text_output(path: str) -> io.TextIOBase:
    """A UTF-8 text writer for `path` ('-' = stdout), creating parent folders; '\\n' line ends."""
    if path != "-":
        parent = os.path.dirname(os.path.abspath(path))
        os.makedirs(parent, exist_ok=True)
    return io.TextIOWrapper(open_binary(path, "wb"), encoding="utf-8", newline="\n",
                            write_through=False)


@contextlib.contextmanager
def _naming(path: str) -> Iterator[None]:
    """A write error (a full device such as /dev/full, a closed pipe's reader gone aside) as one line naming
    `path` and the cause; a broken pipe stays itself (`... | head` is not an error)."""
    try:
        yield
    except OSError as err:
        if isinstance(err, BrokenPipeError) or err.filename not in (None, path):  # another file's error
            raise
        raise WriteError(f"cannot write: {err.strerror or err}", "<stdout>" if path == "-" else path) from None


@contextlib.contextmanager
def atomic_output(path: str, text: bool = True) -> Iterator[IO]:
    """A writer for `path` ('-' = stdout) that only ever leaves a complete file: it writes to a temporary name
    in the same folder (creating the folder), renames when the block ends without an error and removes the
    temporary file when it does not (no partial outputs after an error, a full disk or Ctrl-C)."""
    if path == "-" or not replaceable(path):  # stdout, /dev/null, a named pipe: written in place, never replaced
        with _naming(path):
            stream = open_text_output(path) if text else open_binary(path, "wb")
            try:
                yield stream
            finally:
                stream.flush()
                if path != "-":
                    stream.close()
        return
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    tmp = os.path.join(parent, f".{os.path.basename(path)}.tmp-{os.getpid()}")
    raw = open_binary(tmp + os.path.splitext(path)[1] if path.endswith((".gz", ".xz")) else tmp, "wb")
    stream = io.TextIOWrapper(raw, encoding="utf-8", newline="\n", write_through=False) if text else raw
    written = raw.name if isinstance(getattr(raw, "name", None), str) else tmp
    try:
        yield stream
        stream.flush()
        stream.close()
        os.replace(written, path)
    except BaseException as err:
        try:
            stream.close()
        except OSError:
            pass
        if os.path.exists(written):
            os.remove(written)
        if isinstance(err, OSError) and not isinstance(err, BrokenPipeError):  # disk full, permission denied
            raise WriteError(f"cannot write: {err.strerror or err}", path) from None
        raise


def file_sha256(path: str) -> str:
    """Hex sha256 of a file's bytes (model and codes hashes in dataset signatures)."""
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def path_sha256(path: str) -> str:
    """Hex sha256 of a file's bytes, or of a folder's files: each file's name relative to the folder and its
    sha256, in sorted order (stable across machines and copies; a parser model may be either)."""
    if os.path.isfile(path):
        return file_sha256(path)
    digest = hashlib.sha256()
    for folder, dirs, files in sorted(os.walk(path)):
        dirs.sort()
        for name in sorted(files):
            full = os.path.join(folder, name)
            digest.update(os.path.relpath(full, path).encode("utf-8", "surrogateescape") + b"\0")
            digest.update(file_sha256(full).encode() + b"\0")
    return digest.hexdigest()


def count_lines(path: str) -> int | None:
    """Line count of an uncompressed regular file (a fast newline count; a last line without '\\n' counts),
    None for stdin and compressed files (counting those would read them twice)."""
    if path == "-" or path.endswith((".gz", ".xz")) or not os.path.isfile(path):
        return None
    count, last = 0, b"\n"
    with open(path, "rb") as stream:
        while block := stream.read(1 << 22):
            count += block.count(b"\n")
            last = block[-1:]
    return count + (last != b"\n")


def tsv_field(value: str | bytes) -> str:
    """One field of a rejected.tsv: undecodable bytes as U+FFFD; backslash, tab, CR, LF escaped."""
    text = value.decode("utf-8", errors="replace") if isinstance(value, bytes) else value
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\r", "\\r").replace("\n", "\\n")


def _kind(mode: int) -> str:
    return ("a named pipe" if stat.S_ISFIFO(mode) else "a character device" if stat.S_ISCHR(mode)
            else "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a file")


def regular_file(path: str, what: str = "") -> None:
    """Refuse, in one line naming it, a `path` (after links) that is not a regular file: a named pipe, a device
    (a link to /dev/zero), a socket would hang or never end a reader that needs the whole file (shards,
    manifests, checkpoints, models, codes). A missing path is left to the reader's own message."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return
    except OSError as err:
        raise InputError(f"cannot read: {err.strerror or err}", path) from None
    if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        raise InputError(f"{what or 'the file'} is {_kind(mode)}, not a regular file (it would be read for ever "
                         "or never end): give a file", path)


def no_endless_device(path: str) -> None:
    """Refuse a text input that is a device other than a terminal or /dev/null (a link to /dev/zero or
    /dev/urandom never ends); named pipes (`<(command)`) stay allowed: they end when their writer does."""
    try:
        info = os.stat(path)
    except OSError:
        return
    if stat.S_ISBLK(info.st_mode) or stat.S_ISCHR(info.st_mode):
        null = os.stat(os.devnull)
        if (info.st_dev, info.st_ino) == (null.st_dev, null.st_ino):
            return
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
        except OSError:
            return  # left to the reader's own message
        try:
            if os.isatty(fd):
                return
        finally:
            os.close(fd)
        raise InputError(f"the input is {_kind(info.st_mode)}, not a text file (it would never end): give a file",
                         path)


def replaceable(path: str) -> bool:
    """Whether `path` may be written by rename: it does not exist yet or is a regular file (never a device such
    as /dev/null, a named pipe or a socket: renaming over those would replace them)."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except FileNotFoundError:
        return True


def atomic_copy(source: str, path: str, what: str = "cannot write") -> None:
    """Copy the file `source` to `path` under a temporary name, then rename: whole or not at all. A failed copy
    is one line naming `path` (`source` where it cannot be read) and the cause, after `what`."""
    import shutil

    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        shutil.copyfile(source, tmp)
        os.replace(tmp, path)
    except BaseException as err:  # a write error, or Ctrl-C / a signal while copying: no partial file left
        if os.path.exists(tmp):
            os.remove(tmp)
        if not isinstance(err, OSError):
            raise
        raise WriteError(f"{what}: {err.strerror or err}", source if err.filename == source else path) from None


def atomic_write(path: str, data: bytes) -> None:
    """Write `path` under a temporary name in the same folder, fsync, then rename: readers see the old file
    or the whole new one, never a part. A device or pipe is written in place."""
    if not replaceable(path):
        with _naming(path), open(path, "wb") as out:
            out.write(data)
        return
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with open(tmp, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        if os.path.exists(tmp):
            os.remove(tmp)
        if isinstance(err, OSError):  # disk full, permission denied: one line naming the file
            raise WriteError(f"cannot write: {err.strerror or err}", path) from None
        raise


def json_text(value: Any, **options: Any) -> str:  # noqa: ANN401 (any JSON value)
    """`json.dumps(value, **options)` with NaN and the infinities written as null: JSON has no such numbers
    (Python writes `NaN`, which jq, JavaScript and strict readers refuse), and a score or loss can be one."""
    import math

    def finite(item: Any) -> Any:  # noqa: ANN401
        if isinstance(item, float) and not math.isfinite(item):
            return None
        if isinstance(item, dict):
            return {key: finite(inner) for key, inner in item.items()}
        if isinstance(item, list | tuple):
            return [finite(inner) for inner in item]
        return item

    return json.dumps(finite(value), allow_nan=False, **options)


def read_json(path: str, what: str) -> Any:  # noqa: ANN401
    """A JSON file's value; unreadable or not JSON (bad bytes, cut short): InputError naming the file, `what` it
    should be ("not a tokenizer.json file: ...")."""
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise InputError(f"not {what}: {err}", path) from None


@contextlib.contextmanager
def atomic_folder(out: str) -> Iterator[str]:
    """A folder written whole or not at all: the block writes into the yielded new temporary folder beside `out`
    (on its file system), moved into place when the block ends without an error (`_move_in`) and removed in any
    case (an error, a full disk, Ctrl-C, a signal: no half-written folder)."""
    import shutil

    staging = _staging_folder(out)
    try:
        yield staging
        _move_in(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _staging_folder(out: str) -> str:
    """A new temporary folder beside `out` (on its file system: renamed into place when complete)."""
    import shutil

    out = os.path.abspath(out)
    staging = os.path.join(os.path.dirname(out), f".{os.path.basename(out)}.tmp-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)  # a leftover of an earlier process with this pid
    try:
        os.makedirs(staging)
    except OSError as err:
        raise WriteError(f"cannot write: {err.strerror or err}", os.path.dirname(out)) from None
    return staging


def _move_in(staging: str, out: str) -> None:
    """The finished folder into place: whole when `out` does not exist (or is empty), else file by file (renames:
    nothing is left to write), beside the files already there (another split's export), replacing those of an
    earlier write."""
    if not os.path.isdir(out) or not os.listdir(out):
        os.replace(staging, out)
        return
    for folder, _, names in os.walk(staging):
        target = os.path.join(out, os.path.relpath(folder, staging))
        os.makedirs(target, exist_ok=True)
        for name in names:
            os.replace(os.path.join(folder, name), os.path.join(target, name))
