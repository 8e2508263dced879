"""The one error of the admin's input: :class:`InputError` (file, line, field, what was expected).

Its own module so that the commands that read no input file (``drfgov --help``, ``shares``,
``explain``) can catch it without importing the YAML/JSON loader (:mod:`governor.config.source`,
which re-exports it) and PyYAML.
"""

from __future__ import annotations

__all__ = ["InputError"]


class InputError(Exception):
    """A user mistake in an input file: which file, line and field, and what was expected.

    The text is always one line: control characters in the file name, field or message are
    escaped. ``file`` is ``""`` for a value given on the command line: the field (the option)
    alone is then blamed, ``--machines: …``.
    """

    def __init__(self, file: str, line: int | None, field: str, message: str):
        self.file, self.line, self.field, self.message = file, line, field, message
        where = _printable(f"{file}:{line}" if line else file)
        field, message = _printable(field, 200), _printable(message)
        super().__init__(": ".join(part for part in (where, field) if part) + f": {message}")


def _printable(text: str, limit: int | None = None) -> str:
    """``text`` on one line: control characters escaped; cut at ``limit`` characters."""
    if limit is not None and len(text) > limit:
        text = text[:limit] + "…"
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
