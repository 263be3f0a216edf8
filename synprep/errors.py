"""The one exception type for bad input: the CLI prints it as one line and exits 2."""

from __future__ import annotations


class InputError(Exception):
    """Bad user input, located as precisely as we can (file, line, sentence)."""

    def __init__(self, message: str, path: str | None = None, line: int | None = None,
                 sentence: str | None = None) -> None:
        self.message, self.path, self.line, self.sentence = message, path, line, sentence
        super().__init__(str(self))

    def __reduce__(self) -> tuple:  # keep the fields across processes (pickle)
        return (InputError, (self.message, self.path, self.line, self.sentence))

    def __str__(self) -> str:
        where = self.path or "<input>"
        if self.line is not None:
            where += f":{self.line}"
        if self.sentence is not None:
            where += f" (sentence {self.sentence})"
        return f"{where}: {self.message}"
