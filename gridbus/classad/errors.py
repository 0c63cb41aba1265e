"""The exceptions of the ClassAd package."""

from __future__ import annotations


class ClassAdException(ValueError):
    """Base of the package's exceptions (classad2 has an exception of this name too)."""


class ClassAdParseError(ClassAdException):
    """A syntax error: carries the offset, line and column, and a caret excerpt of the text."""

    def __init__(self, message: str, text: str = "", pos: int = 0):
        self.reason = message
        self.text = text
        self.pos = max(0, min(pos, len(text)))
        self.line = text.count("\n", 0, self.pos) + 1
        line_start = text.rfind("\n", 0, self.pos) + 1
        self.column = self.pos - line_start + 1
        line_end = text.find("\n", self.pos)
        if line_end < 0:
            line_end = len(text)
        # Keep the excerpt readable on huge single-line inputs: a window around the error.
        lo = max(line_start, self.pos - 60)
        hi = min(line_end, self.pos + 60)
        self.excerpt = text[lo:hi] + "\n" + " " * (self.pos - lo) + "^"
        super().__init__(
            f"{message} at line {self.line}, column {self.column} (offset {self.pos}):\n{self.excerpt}"
        )


# The sentence of the last syntax error met reading a stream of ads (parseAds, parseNext,
# parseOne), kept until the next one: classad2's lastError(), which its stream parsers set and
# nothing clears (its ExprTree and ClassAd constructors raise without setting it).
_last_stream_error = [""]


def note_stream_error(exc: ClassAdParseError) -> None:
    _last_stream_error[0] = f"while parsing classad: {exc.reason} at line {exc.line}, column {exc.column}"


def last_stream_error() -> str:
    return _last_stream_error[0]
