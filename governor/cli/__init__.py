"""The ``drfgov`` command (typer): thin wrappers over the layers below.

:mod:`governor.cli.app` holds the app and the offline commands; :mod:`governor.cli.service`
registers run, shares, explain, restore and doctor; :mod:`governor.cli.simulate` registers
simulate; :mod:`governor.cli.top` the live view; :mod:`governor.cli.views` and :mod:`governor.cli.render` turn documents into tables.
"""

from governor.cli import history, service, simulate, top  # noqa: F401 - registers their commands on the app
from governor.cli.app import app, main

__all__ = ["app", "main"]
