"""Where the policy file is when none is given: no I/O beyond one ``lstat``, nothing imported
(the view commands load this; the policy's parser pulls in PyYAML)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["DEFAULT_POLICY_FILE", "policy_file"]

#: The policy file used when none is given (``drfgov run``, ``check-config``, the views' defaults).
DEFAULT_POLICY_FILE = Path("/etc/drfgov/drfgov.yaml")


def policy_file(file: str | Path | None, default: Path | None = DEFAULT_POLICY_FILE) -> Path | None:
    """The policy file to load: ``file``, else ``default`` if anything is there, else None (the
    built-in defaults). Anything: a dangling symlink or an unreadable file is loaded, and fails
    loudly, rather than skipped for the defaults (``Path.exists()`` follows the link and says
    no). Asked again at each load, so a daemon started without one reads it once made."""
    if file is not None:
        return Path(file)
    return default if default is not None and os.path.lexists(default) else None
