"""Limit changes in the journal: one line per limit written, with DRFGOV_* fields, sent in
systemd's native protocol to a journal socket (here a datagram socket of the test's, read
back and decoded as journald does) — or plain lines when not under systemd."""

import logging
import os
import socket
import struct

import pytest

from governor.service.daemon import configure_logging
from governor.service.journal import JournalHandler, encode_entry, stderr_is_journal
from tests.unit.test_daemon import world  # noqa: F401 - the simulated host fixture


def decode(data: bytes) -> dict[str, str]:
    """A native-protocol entry back to fields (https://systemd.io/JOURNAL_NATIVE_PROTOCOL/)."""
    fields, i = {}, 0
    while i < len(data):
        end = data.index(b"\n", i)
        line = data[i:end]
        if b"=" in line:
            key, _, value = line.partition(b"=")
            i = end + 1
        else:  # KEY \n u64le length, value, \n
            key, size = line, struct.unpack("<Q", data[end + 1:end + 9])[0]
            value = data[end + 9:end + 9 + size]
            assert data[end + 9 + size:end + 10 + size] == b"\n"
            i = end + 10 + size
        fields[key.decode()] = value.decode()
    return fields


@pytest.fixture
def journal(tmp_path):
    server = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    path = str(tmp_path / "journal.socket")
    server.bind(path)
    server.settimeout(5)
    yield server, path
    server.close()


def test_a_record_reaches_the_journal_with_its_fields_and_multiline_values(journal):
    server, path = journal
    fallback = logging.StreamHandler()
    handler = JournalHandler(fallback, socket_path=path)
    record = logging.LogRecord("drfgov", logging.WARNING, __file__, 1, "two\nlines", None, None)
    record.journal = {"DRFGOV_UID": 1001, "DRFGOV_VALUE": "150000 100000"}
    handler.emit(record)
    assert decode(server.recv(65536)) == {"MESSAGE": "two\nlines", "PRIORITY": "4", "SYSLOG_IDENTIFIER": "drfgov",
                                          "DRFGOV_UID": "1001", "DRFGOV_VALUE": "150000 100000"}
    handler.close()


def test_no_journal_socket_falls_back_to_the_line(tmp_path):
    lines = []

    class Keep(logging.Handler):
        def emit(self, record):
            lines.append(record.getMessage())

    handler = JournalHandler(Keep(), socket_path=str(tmp_path / "absent.socket"))
    handler.emit(logging.LogRecord("drfgov", logging.INFO, __file__, 1, "kept", None, None))
    assert lines == ["kept"]


def test_encode_entry_uses_the_binary_form_only_for_newlines():
    assert encode_entry({"A": "x=y"}) == b"A=x=y\n"
    assert encode_entry({"B": "1\n2"}) == b"B\n" + struct.pack("<Q", 3) + b"1\n2\n"


def test_journal_stream_must_name_our_stderr(tmp_path):
    with open(tmp_path / "f", "w") as f:
        st = os.fstat(f.fileno())
        assert stderr_is_journal({"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"}, f.fileno())
        assert not stderr_is_journal({"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino + 1}"}, f.fileno())
        assert not stderr_is_journal({}, f.fileno()) and not stderr_is_journal({"JOURNAL_STREAM": "x"}, f.fileno())


def test_configure_logging_chooses_plain_lines_when_stderr_is_not_the_journal(monkeypatch):
    monkeypatch.setenv("JOURNAL_STREAM", "1:1")  # inherited by a child whose stderr is elsewhere
    configure_logging()
    (handler,) = logging.getLogger("drfgov").handlers
    assert not isinstance(handler, JournalHandler)
    assert handler.format(logging.LogRecord("drfgov", logging.INFO, __file__, 1, "m", None, None)) == "drfgov: INFO: m"


def test_each_limit_written_is_one_line_with_journal_fields(world, caplog):  # noqa: F811
    _, _, daemon, _, tmp = world
    d = daemon()
    caplog.set_level(logging.INFO, logger="drfgov")
    seen = set()
    for _ in range(3):
        caplog.clear()
        d.tick()
        doc = d.document()
        changes = [r for r in caplog.records if hasattr(r, "journal")]
        # exactly the knobs state.json says were written this tick, one line each
        assert sorted((int(r.journal["DRFGOV_UID"]), r.journal["DRFGOV_KNOB"]) for r in changes) == \
            sorted((u["uid"], knob) for u in doc["users"] for knob in u["written"])
        for r in changes:
            user = next(u for u in doc["users"] if u["uid"] == int(r.journal["DRFGOV_UID"]))
            knob = r.journal["DRFGOV_KNOB"]
            assert r.journal["DRFGOV_USER"] == user["name"]
            seen.add((user["name"], knob))
            assert r.journal["DRFGOV_VALUE"] == str(user["limits"][knob] if user["limits"][knob] is not None else "max")
            assert r.journal["DRFGOV_REASON"] == user["reasons"][knob]
            assert r.getMessage() == f"{user['name']} (uid {user['uid']}): set {knob} {r.journal['DRFGOV_VALUE']}: " \
                                     f"{user['reasons'][knob]}"
    assert {("alice", "cpu.max"), ("bob", "cpu.max")} <= seen  # two busy users on two cores: both capped


def test_a_record_that_does_not_format_goes_to_handle_error_not_to_the_caller(journal, monkeypatch):
    _, path = journal
    handler = JournalHandler(logging.StreamHandler(), socket_path=path)
    reported = []
    monkeypatch.setattr(handler, "handleError", reported.append)
    record = logging.LogRecord("drfgov", logging.INFO, __file__, 1, "%d users", ("many",), None)  # %d of a str
    handler.emit(record)  # raises nothing
    assert reported == [record]
    handler.close()
