"""Prometheus metrics of the daemon (``prometheus_client``): served over HTTP and/or written as
a node_exporter textfile, as the policy's ``metrics:`` section says
(:mod:`governor.config.metrics`).

The tick only hands over a way to build its state document (:mod:`governor.service.state`)
and bumps a few counters; the document is built at the first scrape of that tick, and the
per-user series from it (a custom collector, as prometheus_client's docs advise for data kept
elsewhere), so the tick pays for neither and a user who left governance has no stale series.
Series (labels ``uid``, ``user``; ``resource`` is a state.json resource id: ``cpu``,
``memory``, ``disk:MAJ:MIN``, ``net:IF:tx``):

=============================================  ==============================================
``drfgov_user_usage_ratio{resource}``          her use, as a fraction of the resource's capacity
``drfgov_user_demand_ratio{resource}``         her estimated demand, same
``drfgov_user_allocation_ratio{resource}``     her DRF allocation, same
``drfgov_user_held_back{resource}``            1 when the kernel held her back this tick
``drfgov_user_dominant_share_ratio``           max over resources of allocation / capacity
``drfgov_user_weighted_share_ratio``           dominant share / weight (DRF §4.3)
``drfgov_user_weight{kind}``                   her weight per kind (cpu, memory, io, net)
``drfgov_user_cpu_max_cores``                  cpu.max in force, quota / period (absent: max); in a dry
                                               run the planned value, as for every limit below
``drfgov_user_cpu_weight``                     cpu.weight in force (1 … 10000)
``drfgov_user_memory_limit_bytes{knob}``       memory.low/high/max in force (absent: max)
``drfgov_user_io_max_bytes_per_second``        io.max rbps/wbps in force, ``{device,direction}``
``drfgov_user_net_ceil_bytes_per_second``      her HTB ceil on a link (state.json has bits/s)
``drfgov_capacity_cores`` / ``_bytes``         what the users share this tick (CPU, memory)
``drfgov_resource_saturated{resource}``        1 when DRF found the resource contended
``drfgov_users``                               governed users this tick
``drfgov_tick_duration_seconds``               histogram of the tick's wall time
``drfgov_ticks_total``, ``drfgov_limit_writes_total``
                                               (writes: in a dry run, those that would have been)
``drfgov_tick_errors_total``                   users whose tick failed, and failed shaping
``drfgov_tick_failures_total``                 ticks that failed as a whole (an exception)
``drfgov_document_failures_total``             ticks whose document could not be built (a bug)
``drfgov_last_tick_timestamp_seconds``         Unix time of the last tick
``process_*``                                  the process collector (HTTP only: node_exporter
                                               has its own ``process_*``, a textfile's would clash)
=============================================  ==============================================

A user not measured this tick — her first sight (no interval yet) or a failed read: her
state.json entry's ``usage`` is empty — has no ``usage``, ``demand``, ``allocation``,
``held_back``, ``dominant_share`` or ``weighted_share`` series that tick (zeros would say she
used and got nothing); her weight, limits and ceil series are there as the kernel holds them,
and she counts in ``drfgov_users``.

Cost: the tick pays for :meth:`Metrics.observe` only (a reference kept, counters bumped). A
scrape builds the tick's document and the exposition on the listener's thread (~0.1 s of CPU
at 1,000 users, benchmarks/bench_metrics.py) once per tick at most: later scrapes of the same
tick are served the same bytes, and at the usual one scrape every 15 s the ticks between
scrapes build no document at all (issue 16: built every tick, it cost ~20 µs a user a tick).
Once per tick was still too often for a user who asks every second (the security audit of
2026-11-28: at 1,000 users and 1 s ticks, 145 ms of CPU a second; at 10,000 users, 1.6 s —
more than the core, and the tick's share of the interpreter with it): after a build that took
``c`` seconds of CPU, the next waits :data:`EXPOSITION_REST_FACTOR` × ``c``, at most
:data:`EXPOSITION_REST_MAX_S` (the last bytes are served meanwhile), so the exposition costs at
most a tenth of a core however often it is asked for (above ~10,000 users, where a build takes
over a second, a little more: Prometheus's usual 15 s scrape must still see a new tick's). What
a scrape sees is then the latest tick's, or one at most that long older: ~1.5 s at 1,000 users,
~12 s at 10,000 (``drfgov_last_tick_timestamp_seconds`` says which tick).
The textfile is written on a thread of its own, at most every :data:`TEXTFILE_EVERY_S`.

The listener (:mod:`governor.service.metricslistener`) is one asyncio event loop on a thread of
its own: an idle or slow connection holds no scrape back; each has
:data:`~governor.service.metricslistener.CONNECTION_TIMEOUT_S` for its request and as much for its
response (cut off after :data:`~governor.service.metricslistener.STALL_TIMEOUT_S` in which its
client takes none of it), every response's body is this exposition's one bytes object, and at most
:data:`~governor.service.metricslistener.MAX_CONNECTIONS` are open (one more closes, of the peer
that holds the most, the one that has made no progress for the longest). A tick never waits on the listener: it
hands its document over without waiting for a scrape's build under way.

User names become label values with each byte that is not UTF-8 as the four characters
``\\xNN`` (in the exposition ``\\\\xNN``, its backslash escaped): ``pwd`` returns such a name
with surrogates U+DC80 … U+DCFF, which no exposition can encode (state.json's JSON spells the
same name ``\\udcNN``).

The textfile's directory is held to the project's one trust rule
(:func:`~governor.config.source.check_trusted_directory`, as state.json's and the history's
are): owned by root (or the daemon's user) and writable by no one else, nor the way to it, so
that root never writes where a user's symlink points. It is checked (and made, 0755, when its
nearest existing parent passes) at :meth:`Metrics.start`, and checked again before each write.
:meth:`Metrics.close` (a clean stop) removes the textfile, so that node_exporter does not go on
exporting the last tick's series for good; a daemon that dies leaves it, and its age shows in
node_exporter's ``node_textfile_mtime_seconds`` and in ``drfgov_last_tick_timestamp_seconds``.

Errors: :meth:`Metrics.start` raises :class:`MetricsError` (one line: setting and reason) when
the address cannot be bound or the textfile's directory cannot be made or is not trusted; a
textfile that cannot be written (or whose exposition fails, or whose directory is no longer
trusted) is reported by :meth:`Metrics.observe` on the next tick (OSError), which the daemon
logs like a state.json failure; the textfile thread goes on. One that cannot be removed at
close is logged (a warning). A tick's document that cannot be built (a
bug) is logged once with its traceback and counted (``drfgov_document_failures_total``); that
tick shows no per-user series.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, ProcessCollector, disable_created_metrics
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import Collector

from governor.config.metrics import MetricsExport
from governor.config.source import InputError, check_trusted_directory, directory_to_judge
from governor.service.atomic import write_atomic
from governor.service.metricslistener import Listener
from governor.service.ownfiles import check_ours

__all__ = ["Metrics", "MetricsError", "StateCollector"]

log = logging.getLogger("drfgov")

#: The textfile is rewritten at most this often (seconds of the ticks' wall clock), on a thread
#: of its own: at 1,000 users one exposition costs ~0.2 s of CPU, nearly a tick's (~0.25 s),
#: and node_exporter is scraped every 15 s or more.
TEXTFILE_EVERY_S = 15.0
#: Tick wall-time buckets (seconds): a tick over 1,000 users takes a few hundred milliseconds.
TICK_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
#: After an exposition that took ``c`` seconds of CPU, the next is built no sooner than this
#: many times ``c`` later (the last one is served meanwhile): at most a tenth of a core ...
EXPOSITION_REST_FACTOR = 9.0
#: ... and no later than this many seconds after it (a scrape every 15 s sees each a new tick's).
EXPOSITION_REST_MAX_S = 10.0
_MEMORY_KNOBS = ("memory.low", "memory.high", "memory.max")
_IO_DIRECTIONS = (("rbps", "read"), ("wbps", "write"))


class MetricsError(Exception):
    """The metrics cannot start: the listener's address cannot be bound, or the textfile's
    directory cannot be made or is not trusted; the message names the setting and the reason.
    ``in_use``: the address is another process's (EADDRINUSE) — perhaps a local user's, who
    took it first: the caller may go on without the listener and :meth:`Metrics.listen` again."""

    def __init__(self, message: str, in_use: bool = False):
        super().__init__(message)
        self.in_use = in_use


def _label(text: str) -> str:
    """``text`` as a label value that encodes: the bytes ``pwd`` could not decode (which it
    returns as surrogates U+DC80 … U+DCFF) as ``\\xNN``, the byte's own escape; any other
    surrogate (none comes from ``pwd``) as ``\\udNNN``."""
    try:
        raw = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a surrogate surrogateescape does not map back to a byte
        return text.encode("utf-8", "backslashreplace").decode()
    return raw.decode("utf-8", "backslashreplace")


class _Once:
    """One tick's document: ``build()`` called at most once, by the first thread to ask."""

    __slots__ = ("_build", "_document", "_lock")

    def __init__(self, build: Callable[[], dict]):
        self._build: Callable[[], dict] | None = build
        self._document: dict | None = None
        self._lock = threading.Lock()  # this tick's alone: a build under way never holds up the next offer

    def get(self, on_failure: Callable[[], None]) -> dict | None:
        """The document, built now if not yet; None when building it failed (``on_failure()``
        was then called, once)."""
        with self._lock:
            build, self._build = self._build, None
            if build is not None:
                try:
                    self._document = build()
                except Exception:  # noqa: BLE001 - a bug: this tick has no per-user series, the rest is served
                    on_failure()
            return self._document


class StateCollector(Collector):
    """The per-user and per-resource series of the latest tick's state document, built at the
    first collection after :meth:`offer` (by whichever thread collects first: the listener's,
    the textfile's) and kept until the next offer.

    ``on_failure()`` is called when a document cannot be built (a bug): that tick shows no
    per-user series; the failure is logged with its traceback once, until a document is built
    again."""

    def __init__(self, on_failure: Callable[[], None] = lambda: None) -> None:
        self._latest: _Once | None = None
        self._on_failure = on_failure
        self._failing = False

    def offer(self, build: Callable[[], dict]) -> None:
        """The latest tick's document is ``build()``: called once, when first collected (or
        read through :meth:`document`). ``build`` must only read what the tick left behind:
        it runs on another thread, perhaps while the next tick runs. Never waits for a build
        under way (that one finishes for the scrape that asked)."""
        self._latest = _Once(build)  # one reference swapped: atomic

    def document(self) -> dict | None:
        """The latest tick's document, built now if not yet; None before the first offer or
        when it could not be built."""
        latest = self._latest
        if latest is None:
            return None
        document = latest.get(self._failed)
        if document is not None:
            self._failing = False
        return document

    def _failed(self) -> None:
        if not self._failing:  # once, until a document is built again
            log.exception("metrics: the tick's state document could not be built")
        self._failing = True
        self._on_failure()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        doc = self.document()  # one reference: an offer replaces it, never changes it
        if doc is None:
            return
        user_labels = ["uid", "user"]
        res_labels = user_labels + ["resource"]
        usage = GaugeMetricFamily("drfgov_user_usage_ratio", "Her use as a fraction of the resource's capacity",
                                  labels=res_labels)
        demand = GaugeMetricFamily("drfgov_user_demand_ratio", "Her estimated demand as a fraction of capacity",
                                   labels=res_labels)
        allocation = GaugeMetricFamily("drfgov_user_allocation_ratio", "Her DRF allocation as a fraction of capacity",
                                       labels=res_labels)
        held = GaugeMetricFamily("drfgov_user_held_back", "1 when the kernel held her back on the resource this tick",
                                 labels=res_labels)
        dominant = GaugeMetricFamily("drfgov_user_dominant_share_ratio", "Her dominant share (DRF)", labels=user_labels)
        weighted = GaugeMetricFamily("drfgov_user_weighted_share_ratio", "Her dominant share divided by her weight",
                                     labels=user_labels)
        weight = GaugeMetricFamily("drfgov_user_weight", "Her weight per kind", labels=user_labels + ["kind"])
        cpu_max = GaugeMetricFamily("drfgov_user_cpu_max_cores",
                                    "cpu.max in force (dry run: planned), quota/period; absent when max",
                                    labels=user_labels)
        cpu_weight = GaugeMetricFamily("drfgov_user_cpu_weight", "cpu.weight in force (dry run: planned)",
                                       labels=user_labels)
        memory = GaugeMetricFamily("drfgov_user_memory_limit_bytes",
                                   "memory.low/high/max in force (dry run: planned); absent when max",
                                   labels=user_labels + ["knob"])
        io = GaugeMetricFamily("drfgov_user_io_max_bytes_per_second",
                               "io.max rbps/wbps in force (dry run: planned); absent when max",
                               labels=user_labels + ["device", "direction"])
        ceil = GaugeMetricFamily("drfgov_user_net_ceil_bytes_per_second", "Her HTB class ceil on the link",
                                 labels=res_labels)
        capacity = doc["capacity"]
        for u in doc["users"]:
            who = [str(u["uid"]), _label(u["name"])]
            if u["usage"]:  # measured this tick (not at her first sight, nor when her read failed)
                held_now = set(u["held"])
                for resource, total in capacity.items():
                    if total <= 0:
                        continue
                    labels = who + [resource]
                    usage.add_metric(labels, u["usage"].get(resource, 0.0) / total)
                    demand.add_metric(labels, u["demand"].get(resource, 0.0) / total)
                    allocation.add_metric(labels, u["allocation"].get(resource, 0.0) / total)
                    held.add_metric(labels, 1.0 if resource in held_now else 0.0)
                dominant.add_metric(who, u["dominant_share"])
                weighted.add_metric(who, u["weighted_share"])
            for kind, w in u["weight"].items():
                weight.add_metric(who + [kind], w)
            limits = u["limits"]
            if limits:
                quota, period = limits["cpu.max"].split()
                if quota != "max":
                    cpu_max.add_metric(who, int(quota) / int(period))
                cpu_weight.add_metric(who, limits["cpu.weight"])
                for knob in _MEMORY_KNOBS:
                    if limits[knob] is not None:
                        memory.add_metric(who + [knob], limits[knob])
                for device, line in limits["io.max"].items():
                    fields = dict(part.split("=", 1) for part in line.split())
                    for key, direction in _IO_DIRECTIONS:
                        if fields.get(key, "max") != "max":
                            io.add_metric(who + [device, direction], int(fields[key]))
            for resource, rate in u["classes"].items():
                ceil.add_metric(who + [resource], rate["ceil_bits_per_s"] / 8)
        saturated_now = set(doc["saturated"])
        saturated = GaugeMetricFamily("drfgov_resource_saturated", "1 when DRF found the resource contended this tick",
                                      labels=["resource"])
        for resource in capacity:
            saturated.add_metric([resource], 1.0 if resource in saturated_now else 0.0)
        yield from (usage, demand, allocation, held, dominant, weighted, weight, cpu_max, cpu_weight, memory, io, ceil,
                    saturated)
        yield GaugeMetricFamily("drfgov_users", "Governed users this tick", value=len(doc["users"]))
        if "cpu" in capacity:
            yield GaugeMetricFamily("drfgov_capacity_cores", "CPU the users share this tick", value=capacity["cpu"])
        if "memory" in capacity:
            yield GaugeMetricFamily("drfgov_capacity_bytes", "Memory the users share this tick",
                                    value=capacity["memory"])
        yield GaugeMetricFamily("drfgov_last_tick_timestamp_seconds", "Unix time of the last tick",
                                value=doc["time_unix_s"])


class Metrics:
    """The daemon's metrics: :meth:`start` the listener (if any), :meth:`observe` each tick,
    :meth:`close` at stop."""

    def __init__(self, export: MetricsExport):
        self.export = export
        disable_created_metrics()  # no *_created series: the process start time says as much
        self.document_failures = Counter("drfgov_document_failures", "Ticks whose state document could not be "
                                         "built for the metrics (a bug, logged): no per-user series", registry=None)
        self.collector = StateCollector(self.document_failures.inc)
        self.registry = CollectorRegistry(auto_describe=False)  # the HTTP one: with the process collector
        self.textfile_registry = CollectorRegistry(auto_describe=False)
        self.ticks = Counter("drfgov_ticks", "Ticks run", registry=None)
        self.errors = Counter("drfgov_tick_errors", "Users whose tick failed (measurement or limit write)",
                              registry=None)
        self.writes = Counter("drfgov_limit_writes", "Limit values written (cgroup files or unit properties); "
                              "in a dry run, those that would have been", registry=None)
        self.failures = Counter("drfgov_tick_failures", "Ticks that failed as a whole (a bug; the loop goes on)",
                                registry=None)
        self.duration = Histogram("drfgov_tick_duration_seconds", "Wall time of a tick", buckets=TICK_BUCKETS_S,
                                  registry=None)
        for registry in (self.registry, self.textfile_registry):
            # the state collector first: a document that fails to build is counted in the same exposition
            for collector in (self.collector, self.ticks, self.errors, self.writes, self.failures, self.duration,
                              self.document_failures):
                registry.register(collector)
        ProcessCollector(registry=self.registry)
        self._listener: Listener | None = None
        self._generation = 0  # bumped after each change the exposition shows (a tick, a failure)
        self._exposition: tuple[int, bytes] = (-1, b"")  # (generation, bytes) last served
        self._exposition_due_s = float("-inf")  # monotonic time from which the next may be built
        self._textfile_due_s = float("-inf")  # the ticks' Unix time of the next textfile write
        self._textfile_wanted = threading.Event()
        self._textfile_error: OSError | None = None
        self._textfile_thread: threading.Thread | None = None
        self._closing = False

    def start(self) -> None:
        """Check (and make) the textfile's directory, if there is a textfile, and listen on
        ``export``'s address, if it has one (a daemon thread serves scrapes).

        Raises:
            MetricsError: the textfile's directory cannot be made or is not trusted
                (:func:`_trusted_textfile_directory`); the address cannot be bound (in use, not
                this host's, no permission).
        """
        if self.export.textfile is not None:
            try:
                _trusted_textfile_directory(self.export.textfile, create=True)
            except (InputError, OSError) as exc:
                raise MetricsError(f"metrics.textfile: {_reason(exc)}") from None
        self.listen()

    def listen(self) -> None:
        """Listen on ``export``'s address, if it has one and is not listened on yet.

        Raises:
            MetricsError: the address cannot be bound (``in_use`` when another process has it).
        """
        if self.export.listen_port is None or self._listener is not None:
            return
        try:
            self._listener = Listener(self.export.listen_host, self.export.listen_port, self.exposition,
                                      CONTENT_TYPE_LATEST)
        except OSError as exc:
            raise MetricsError(f"metrics.listen: cannot listen on {self.export.listen}: {exc.strerror or exc}",
                               in_use=exc.errno == errno.EADDRINUSE) from None

    @property
    def listening(self) -> bool:
        """Whether the listener is up (a metrics section without ``listen``: never)."""
        return self._listener is not None

    def exposition(self) -> bytes:
        """The HTTP registry's exposition, built once per tick at most, and no sooner than
        :data:`EXPOSITION_REST_FACTOR` times the last build's CPU time after it (at most
        :data:`EXPOSITION_REST_MAX_S`): the same bytes object until then (the listener writes it
        to every connection without a copy)."""
        generation = self._generation
        cached_generation, body = self._exposition
        if cached_generation != generation and time.monotonic() >= self._exposition_due_s:
            cpu_s = time.thread_time()
            body = generate_latest(self.registry)
            cpu_s = time.thread_time() - cpu_s
            self._exposition = (generation, body)
            self._exposition_due_s = time.monotonic() + min(EXPOSITION_REST_FACTOR * cpu_s, EXPOSITION_REST_MAX_S)
        return body

    def observe(self, build: Callable[[], dict], time_unix_s: float, duration_s: float, writes: int,
                errors: int) -> None:
        """One tick's outcome: how to build its state document (called at most once, at the
        first scrape or textfile write of this tick: :meth:`StateCollector.offer`), the tick's
        Unix time, wall time, limit writes and failed users. Asks for a textfile write when
        one is due (:data:`TEXTFILE_EVERY_S` after the last).

        Raises:
            OSError: the last textfile write failed (the next one is still tried).
        """
        self.collector.offer(build)
        self.ticks.inc()
        self.duration.observe(duration_s)
        if writes:
            self.writes.inc(writes)
        if errors:
            self.errors.inc(errors)
        self._generation += 1
        if self.export.textfile is None:
            return
        now_s = time_unix_s
        if now_s >= self._textfile_due_s or now_s < self._textfile_due_s - TEXTFILE_EVERY_S:  # due, or clock went back
            self._textfile_due_s = now_s + TEXTFILE_EVERY_S
            if self._textfile_thread is None:
                self._textfile_thread = threading.Thread(target=self._write_textfiles, name="drfgov-textfile",
                                                         daemon=True)
                self._textfile_thread.start()
            self._textfile_wanted.set()
        error, self._textfile_error = self._textfile_error, None
        if error is not None:
            raise error

    def write_textfile(self) -> None:
        """Write the textfile now, atomically (an exclusive temporary of an unguessable name,
        renamed: never prometheus_client's predictable ``PATH.PID.TID``, which follows symlinks),
        into a directory checked again first (:func:`_trusted_textfile_directory`).

        Only drfgov's own textfile (or an empty file) is replaced
        (:func:`governor.service.ownfiles.check_ours`): another at that path is left as it is.

        Raises:
            OSError: it cannot be written, or its directory is no longer trusted, or the file
                there is not drfgov's (:class:`~governor.service.ownfiles.ForeignFile`).
        """
        body = generate_latest(self.textfile_registry)
        _trusted_textfile_directory_now(self.export.textfile)
        check_ours("textfile", self.export.textfile)
        write_atomic(self.export.textfile, body, mode=0o644)

    def remove_textfile(self) -> None:
        """Remove the textfile (none there is fine), from a directory checked again first: once
        the daemon has stopped, node_exporter must not go on exporting its last tick's series.

        Raises:
            OSError: it cannot be removed, or its directory is no longer trusted, or the file
                there is not drfgov's textfile (left as it is: :class:`~governor.service.ownfiles.ForeignFile`).
        """
        if not os.path.lexists(os.path.dirname(self.export.textfile)):
            return  # never made: nothing to remove
        _trusted_textfile_directory_now(self.export.textfile)
        check_ours("textfile", self.export.textfile)
        try:
            os.unlink(self.export.textfile)
        except FileNotFoundError:
            pass

    def _remove_textfile_at_close(self) -> None:
        try:
            self.remove_textfile()
        except OSError as exc:
            log.warning("metrics: the textfile was not removed at stop: %s", exc)

    def _write_textfiles(self) -> None:
        while True:
            self._textfile_wanted.wait()
            self._textfile_wanted.clear()
            if self._closing:  # after the last write, whenever that one ends
                self._remove_textfile_at_close()
                return
            try:
                self.write_textfile()
            except OSError as exc:
                self._textfile_error = exc
            except Exception as exc:  # noqa: BLE001 - a bug or an odd document: reported, the thread goes on
                self._textfile_error = OSError(f"{self.export.textfile}: {type(exc).__name__}: {exc}")

    def failed_tick(self) -> None:
        """A tick that raised (the daemon logs it and goes on)."""
        self.failures.inc()
        self._generation += 1

    def close(self) -> None:
        """Stop the listener and the textfile thread (a write under way finishes first), and
        remove the textfile (a clean stop: a daemon that dies leaves its last one)."""
        self._closing = True
        if self._textfile_thread is not None:
            self._textfile_wanted.set()  # the thread removes the textfile after its last write
            self._textfile_thread.join(timeout=10)
            self._textfile_thread = None
        elif self.export.textfile is not None:
            self._remove_textfile_at_close()  # one of an earlier run, say
        if self._listener is not None:
            self._listener.close()
            self._listener = None


def _trusted_textfile_directory(textfile: str, create: bool) -> None:
    """Refuse a textfile directory that someone other than root (or the daemon's user) could
    change, by the project's one rule (:func:`~governor.config.source.check_trusted_directory`):
    root writing there would follow her symlinks (the observability audit: the textfile and its
    temporary were made where a user's symlink pointed). With ``create``, a missing directory
    is made (0755) once the directory that stands for it passes
    (:func:`~governor.config.source.directory_to_judge`), and checked itself once made. node_exporter's usual ``/var/lib/prometheus/node-exporter``, root's
    and 0755, passes.

    Raises:
        InputError: naming the directory at fault and the fix. OSError: it cannot be made.
    """
    trusted = {0, os.geteuid()}
    directory = os.path.dirname(textfile)
    if create and not os.path.lexists(directory):
        check_trusted_directory(directory_to_judge(directory, trusted), trusted)
        try:
            os.makedirs(directory, mode=0o755, exist_ok=True)
        except OSError as exc:
            raise OSError(exc.errno, f"cannot make the directory {directory}: {exc.strerror or exc}") from None
    check_trusted_directory(directory, trusted)


def _trusted_textfile_directory_now(textfile: str) -> None:
    """:func:`_trusted_textfile_directory` again before each write and the removal at close
    (a directory can change after the start: a cheap re-check, a few stat calls every
    :data:`TEXTFILE_EVERY_S`; once it passes, only root can change the way to the file).

    Raises:
        OSError: the directory is missing or no longer trusted (the message says why).
    """
    try:
        _trusted_textfile_directory(textfile, create=False)
    except InputError as exc:
        raise OSError(f"metrics.textfile: {exc}") from None


def _reason(exc: Exception) -> str:
    return str(exc) if isinstance(exc, InputError) else (exc.strerror or str(exc))
