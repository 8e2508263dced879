"""The disk column of ``drfgov top`` and ``drfgov shares``: the io.max limit in a cell's room,
as bandwidth, not the kernel's 40-character line; the JSON keeps the kernel's form."""

from __future__ import annotations

import json

from rich.console import Console

from governor.cli.views import shares_table, top_table
from tests.unit.test_metrics import document


def _disk_document() -> dict:
    doc = document()
    doc["capacity"]["disk:8:0"] = 1.0
    alice = doc["users"][0]
    alice["demand"]["disk:8:0"], alice["allocation"]["disk:8:0"] = 0.6, 0.5
    alice["limits"]["io.max"] = {"8:0": "rbps=1048576 wbps=max riops=max wiops=max"}
    return doc


def _rendered(table) -> str:
    console = Console(width=300, force_terminal=False, record=True)
    console.print(table)
    return console.export_text()


def test_the_disk_limit_cell_is_bandwidth_and_the_document_is_untouched():
    doc = _disk_document()
    before = json.dumps(doc, sort_keys=True)
    for table in (top_table(doc), shares_table(doc)):
        text = _rendered(table)
        assert "60.0% / 50.0% / r 1.0 w max MiB/s" in text
        assert "rbps=" not in text and "riops" not in text
    assert json.dumps(doc, sort_keys=True) == before  # --json prints the document: the kernel's line stays


def test_io_limit_forms():
    from governor.cli.views import io_limit

    assert io_limit("rbps=max wbps=max riops=max wiops=max") == "max"
    assert io_limit("rbps=524288000 wbps=419430400 riops=max wiops=max") == "r 500.0 w 400.0 MiB/s"
    assert io_limit("rbps=1024 wbps=max riops=max wiops=max") == "r 1 w max KiB/s"  # the starter's floor
    assert io_limit("rbps=max wbps=max riops=500 wiops=max") == "r 500 w max IO/s"  # an admin's own, kept
    assert io_limit("rbps=300 wbps=max riops=max wiops=max") == "r 300 w max B/s"  # never shown as 0
    assert io_limit("max") == "max"  # a disk with no line
    assert io_limit("rbps=1 wbps=odd") == "rbps=1 wbps=odd"  # not the daemon's: shown as it is

