"""history.db removed or replaced while the daemon runs (an admin reclaiming space, a cleanup;
the audit's reproduction): the daemon went on recording into the unlinked inode, nothing at
history.path, nothing logged, the space never freed. Now the next record makes a new history
there; a symlink planted there is refused with the start's error, logged once over the ticks,
its target untouched, until it is gone."""

import logging
import os

from governor.service.history import HistoryReader
from tests.faults.harness import make_world


def _messages(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "history" in r.getMessage()]


def test_a_history_removed_mid_run_is_made_again_and_a_symlink_there_refused_once(base, caplog):
    caplog.set_level(logging.INFO)
    world = make_world(base, 3)
    d = world.daemon()
    d._open_outputs()
    db = world.history_dir / "history.db"
    target = base / "elsewhere.db"
    target.write_text("an admin's file\n")
    try:
        for _ in range(3):
            d.tick()
        for p in world.history_dir.iterdir():
            p.unlink()
        caplog.clear()
        for _ in range(3):  # history.every_s 0: a record each tick
            d.tick()
        assert db.is_file(), _messages(caplog)
        assert len(HistoryReader(db).series(0, 2**40)) == 3  # this run's users, from the ticks since
        assert sum("removed or replaced" in m for m in _messages(caplog)) == 1, _messages(caplog)

        for p in world.history_dir.iterdir():
            p.unlink()
        os.symlink(target, db)
        caplog.clear()
        for _ in range(5):
            d.tick()
        refused = [m for m in _messages(caplog) if "history not written" in m]
        assert len(refused) == 1 and f"a symlink to {target}" in refused[0], _messages(caplog)
        assert target.read_text() == "an admin's file\n" and sorted(p.name for p in base.glob("elsewhere*")) == [
            "elsewhere.db"]
        db.unlink()
        caplog.clear()
        d.tick()
        assert db.is_file() and not db.is_symlink()
        assert "history written again" in _messages(caplog), _messages(caplog)
    finally:
        assert d._stop()
