"""Share history in SQLite (stdlib ``sqlite3``): compact rows, hourly aggregates, bounded size.

What is kept (defaults: ``every_s`` 60, ``retention_days`` 14):

* **The last day at full resolution**: one ``samples`` row per user every ``every_s`` seconds
  (1,440 a day per user), about 110 bytes each with six resources.
* **Beyond a day, one ``hourly`` row per user and hour**: mean dominant and weighted share,
  maximum dominant share, per resource mean usage and allocation, maximum demand, and the
  share of the hour's samples in which the kernel held her back.
* **Weights and limits only when they change** (beyond a day: the last change of each hour).
* Everything older than ``retention_days`` is deleted.

Measured (benchmarks/bench_history.py, six resources, a fifth of the users contended): about
250–270 MiB per 1,000 users per 14 days, steady, whatever the age of the file (README,
``drfgov history``, "Storage"; figures in README, "Benchmarks").

* :mod:`governor.service.history.schema` — the tables, the format version, the shared timing;
* :mod:`governor.service.history.codec` — float32 vectors, bitmaps, the limits' JSON;
* :mod:`governor.service.history.writer` — :class:`History`: record each tick, off-tick requests,
  the files root's alone (0600 in a 0700 directory);
* :mod:`governor.service.history.maintenance` — pruning, hourly aggregation, checkpoints,
  incremental vacuum, on a background thread;
* :mod:`governor.service.history.aggregate` — one ``hourly`` row from an hour's samples (numpy);
* :mod:`governor.service.history.reader` — :class:`HistoryReader` and :class:`UserSeries`
  (``drfgov history``).
"""

from __future__ import annotations

# the names the single module had, re-exported: ``from governor.service.history import HOUR_S`` etc.
from governor.service.history.codec import LIMIT_KEYS
from governor.service.history.reader import HistoryError, HistoryReader, UserSeries
from governor.service.history.schema import BUSY_TIMEOUT_MS, FULL_RESOLUTION_S, HOUR_S, SCHEMA, SCHEMA_VERSION
from governor.service.history.writer import History, check_history_directory

__all__ = ["History", "HistoryError", "HistoryReader", "UserSeries", "check_history_directory"]
