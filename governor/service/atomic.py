"""Replace a file atomically: readers see the old content or the new, never a torn write."""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path

__all__ = ["file_identity", "write_atomic"]


def write_atomic(path: str | os.PathLike[str], text: str | bytes | Iterable[bytes], mode: int = 0o644
                 ) -> tuple[int, int]:
    """Write ``text`` (UTF-8 when a str; bytes written as an iterable yields them) to a
    temporary file beside ``path``, fsync it, set ``mode`` and rename it over ``path``
    (rename(2) is atomic within a filesystem). Missing parent directories are created with
    mode 0755. Whatever the iterable raises leaves ``path`` as it was. Returns the written
    file's identity, ``(st_dev, st_ino)``: the file at ``path`` is still it while lstat(2)
    says so.

    Raises:
        OSError: the directory is not writable, the disk is full, …
    """
    target = Path(path)
    target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            if isinstance(text, (str, bytes)):
                out.write(text.encode() if isinstance(text, str) else text)
            else:
                for chunk in text:
                    out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
            os.fchmod(out.fileno(), mode)
            st = os.fstat(out.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return st.st_dev, st.st_ino


def file_identity(path: str | os.PathLike[str]) -> tuple[int, int] | None:
    """``(st_dev, st_ino)`` of the regular file at ``path`` (lstat(2): a link not followed), or
    None: no such file, or not a regular one. What :func:`write_atomic` returns, to compare."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISREG(st.st_mode) else None
