"""Prometheus metrics: the policy's ``metrics:`` section, the series built from a state
document (their names, labels and values), the counters a tick bumps, the textfile and the
listener. A real Prometheus scraping a running daemon: tests/cli/test_prometheus.py."""

import contextlib
import os
import socket
import threading
import time
import urllib.request

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from governor.config.metrics import MetricsExport
from governor.config.policy import DEFAULT_POLICY, InputError, policy_from_text
from governor.service.metrics import Metrics, MetricsError
from tests.cli.prometheus import free_port

GiB = 2**30


def document(**changes) -> dict:
    """A state.json document (governor/service/state.py) of two users on a 4-core, 8 GiB host."""
    alice = {"uid": 1001, "name": "alice", "weight": {"cpu": 2.0, "memory": 1.0, "io": 1.0, "net": 1.0},
             "dominant_resource": "cpu", "dominant_share": 0.5, "weighted_share": 0.25,
             "usage": {"cpu": 2.0, "memory": 1 * GiB}, "demand": {"cpu": 3.0, "memory": 1 * GiB},
             "allocation": {"cpu": 2.0, "memory": 1 * GiB}, "held": ["cpu"],
             "limits": {"cpu.max": "200000 100000", "cpu.weight": 200, "memory.low": None,
                        "memory.high": 2 * GiB, "memory.max": None, "io.max": {"8:0": "rbps=1048576 wbps=max riops=max wiops=max"}},
             "classes": {"net:eth0:tx": {"rate_bits_per_s": 8e6, "ceil_bits_per_s": 8e8}}, "error": None, "written": []}
    bob = {"uid": 1002, "name": "bob", "weight": {"cpu": 1.0, "memory": 1.0, "io": 1.0, "net": 1.0},
           "dominant_resource": "memory", "dominant_share": 0.75, "weighted_share": 0.75,
           "usage": {"cpu": 0.5, "memory": 6 * GiB}, "demand": {"cpu": 0.5, "memory": 6 * GiB},
           "allocation": {"cpu": 0.5, "memory": 6 * GiB}, "held": [],
           "limits": {"cpu.max": "max 100000", "cpu.weight": 100, "memory.low": None, "memory.high": None,
                      "memory.max": None, "io.max": {}}, "classes": {}, "error": None, "written": []}
    doc = {"version": 1, "time_unix_s": 1795000000.0, "tick": 7, "interval_s": 1.0, "mode": "dry-run",
           "backend": "dry-run", "policy_file": "-", "capacity": {"cpu": 4.0, "memory": 8 * GiB},
           "saturated": ["cpu"], "users": [alice, bob], "network_error": None}
    doc.update(changes)
    return doc


def observe(metrics: Metrics, doc: dict, duration_s: float, writes: int, errors: int) -> None:
    """``metrics.observe`` of a tick whose document is ``doc`` (built when first collected)."""
    metrics.observe(lambda: doc, doc["time_unix_s"], duration_s, writes, errors)


def samples(metrics: Metrics) -> dict[tuple, float]:
    """(name, sorted labels) → value, parsed back from the HTTP registry's exposition."""
    text = generate_latest(metrics.registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(found, name, **labels):
    return found[(name, tuple(sorted(labels.items())))]


def test_per_user_series_are_fractions_of_capacity_with_uid_and_user_labels():
    metrics = Metrics(MetricsExport())
    observe(metrics, document(), duration_s=0.02, writes=3, errors=1)
    found = samples(metrics)
    alice = {"uid": "1001", "user": "alice"}
    assert value(found, "drfgov_user_usage_ratio", **alice, resource="cpu") == 0.5
    assert value(found, "drfgov_user_demand_ratio", **alice, resource="cpu") == 0.75
    assert value(found, "drfgov_user_allocation_ratio", uid="1002", user="bob", resource="memory") == 0.75
    assert value(found, "drfgov_user_held_back", **alice, resource="cpu") == 1
    assert value(found, "drfgov_user_held_back", **alice, resource="memory") == 0
    assert value(found, "drfgov_user_dominant_share_ratio", **alice) == 0.5
    assert value(found, "drfgov_user_weighted_share_ratio", **alice) == 0.25
    assert value(found, "drfgov_user_weight", **alice, kind="cpu") == 2.0
    # limits in force, in base units; "max" is no series at all
    assert value(found, "drfgov_user_cpu_max_cores", **alice) == 2.0
    assert ("drfgov_user_cpu_max_cores", (("uid", "1002"), ("user", "bob"))) not in found
    assert value(found, "drfgov_user_cpu_weight", **alice) == 200
    assert value(found, "drfgov_user_memory_limit_bytes", **alice, knob="memory.high") == 2 * GiB
    assert not [k for k in found if k[0] == "drfgov_user_memory_limit_bytes" and ("knob", "memory.max") in k[1]]
    assert value(found, "drfgov_user_io_max_bytes_per_second", **alice, device="8:0", direction="read") == 2**20
    assert not [k for k in found if ("direction", "write") in k[1]]
    assert value(found, "drfgov_user_net_ceil_bytes_per_second", **alice, resource="net:eth0:tx") == 1e8
    # per tick
    assert value(found, "drfgov_resource_saturated", resource="cpu") == 1
    assert value(found, "drfgov_resource_saturated", resource="memory") == 0
    assert value(found, "drfgov_users") == 2
    assert value(found, "drfgov_capacity_cores") == 4.0 and value(found, "drfgov_capacity_bytes") == 8 * GiB
    assert value(found, "drfgov_ticks_total") == 1 and value(found, "drfgov_limit_writes_total") == 3
    assert value(found, "drfgov_tick_errors_total") == 1
    assert value(found, "drfgov_tick_duration_seconds_count") == 1
    assert value(found, "drfgov_tick_duration_seconds_bucket", le="0.025") == 1
    assert value(found, "drfgov_tick_duration_seconds_bucket", le="0.01") == 0
    assert "process_cpu_seconds_total" in {k[0] for k in found}


def test_a_user_who_left_has_no_series_and_counters_add_up():
    metrics = Metrics(MetricsExport())
    observe(metrics, document(), 0.01, writes=2, errors=0)
    second = document()
    second["users"] = second["users"][1:]
    observe(metrics, second, 0.01, writes=1, errors=0)
    found = samples(metrics)
    assert not [k for k in found if ("user", "alice") in k[1]]
    assert value(found, "drfgov_user_dominant_share_ratio", uid="1002", user="bob") == 0.75
    assert value(found, "drfgov_ticks_total") == 2 and value(found, "drfgov_limit_writes_total") == 3


def test_a_user_not_measured_this_tick_has_no_share_or_usage_series_only_her_limits():
    """Her first sight (no interval yet) or a failed read: usage empty, shares 0 that mean nothing."""
    doc = document()
    alice = doc["users"][0]
    alice.update(usage={}, demand={}, allocation={}, held=[], dominant_resource=None, dominant_share=0.0,
                 weighted_share=0.0)
    metrics = Metrics(MetricsExport())
    observe(metrics, doc, 0.01, writes=0, errors=0)
    found = samples(metrics)
    hers = {k[0] for k in found if ("user", "alice") in k[1]}
    assert hers == {"drfgov_user_weight", "drfgov_user_cpu_max_cores", "drfgov_user_cpu_weight",
                    "drfgov_user_memory_limit_bytes", "drfgov_user_io_max_bytes_per_second",
                    "drfgov_user_net_ceil_bytes_per_second"}, hers
    assert value(found, "drfgov_user_dominant_share_ratio", uid="1002", user="bob") == 0.75
    assert value(found, "drfgov_users") == 2


def test_no_tick_yet_means_no_user_series():
    found = samples(Metrics(MetricsExport()))
    assert not [k for k in found if k[0].startswith("drfgov_user")]
    assert value(found, "drfgov_ticks_total") == 0


def wait_for(predicate, timeout_s=10.0):
    end = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.02)


def test_textfile_has_the_series_but_not_the_process_collector_and_is_rewritten_at_most_every_15_s(tmp_path):
    path = tmp_path / "drfgov.prom"
    metrics = Metrics(MetricsExport(textfile=str(path)))
    try:
        observe(metrics, document(), 0.01, writes=0, errors=0)
        wait_for(path.exists)
        names = {s.name for f in text_string_to_metric_families(path.read_text()) for s in f.samples}
        assert "drfgov_user_weighted_share_ratio" in names and "drfgov_ticks_total" in names
        assert not any(n.startswith("process_") for n in names)  # node_exporter has its own process_*
        first = path.stat().st_mtime_ns
        for t in (1, 2, 14.9):  # ticks of the next 15 s: no write
            observe(metrics, document(time_unix_s=1795000000.0 + t), 0.01, writes=0, errors=0)
        time.sleep(0.2)
        assert path.stat().st_mtime_ns == first and "drfgov_ticks_total 1.0" in path.read_text()
        metrics.close()  # waits for a write under way, then removes the file
        assert not path.exists()
        metrics = Metrics(MetricsExport(textfile=str(path)))
        observe(metrics, document(), 0.01, writes=0, errors=0)
        observe(metrics, document(time_unix_s=1795000015.0), 0.01, writes=0, errors=0)
        wait_for(lambda: path.exists() and "drfgov_ticks_total 2.0" in path.read_text())
    finally:
        metrics.close()


def test_a_textfile_that_cannot_be_written_is_reported_at_the_next_tick(tmp_path):
    (tmp_path / "file").write_text("")
    metrics = Metrics(MetricsExport(textfile=str(tmp_path / "file" / "drfgov.prom")))  # its directory is a file
    try:
        observe(metrics, document(), 0.01, writes=0, errors=0)
        wait_for(lambda: metrics._textfile_error is not None)
        with pytest.raises(OSError):
            observe(metrics, document(time_unix_s=1795000001.0), 0.01, writes=0, errors=0)
        observe(metrics, document(time_unix_s=1795000002.0), 0.01, writes=0, errors=0)  # reported once
    finally:
        metrics.close()


NOBODY = 65534


def owned_by_nobody(path, mode=0o755):
    os.chmod(path, mode)
    os.lchown(path, NOBODY, NOBODY)
    return path


def nothing_under(directory) -> list[str]:
    return sorted(os.listdir(directory))


@pytest.mark.parametrize("case", ["her directory", "her symlink", "world-writable", "missing, in her directory"])
def test_a_textfile_directory_another_user_could_change_is_refused_at_start(tmp_path, case):
    """The observability audit: root wrote the textfile (and made its directory) wherever a
    user's symlink pointed. The textfile's directory is held to the one trust rule of
    state.json's and the history's: Metrics.start() refuses it, in one line that names it."""
    victim = tmp_path / "victim"  # root's, where she would have root write
    victim.mkdir(mode=0o755)
    exporter = tmp_path / "exporter"
    if case == "her directory":
        exporter.mkdir()
        owned_by_nobody(exporter)
    elif case == "her symlink":
        exporter.symlink_to(victim)
        os.lchown(exporter, NOBODY, NOBODY)
    elif case == "world-writable":
        exporter.mkdir()
        os.chmod(exporter, 0o777)
    else:
        owned_by_nobody(victim)
        exporter = victim / "node-exporter"
    textfile = exporter / "drfgov.prom"
    metrics = Metrics(MetricsExport(textfile=str(textfile)))
    with pytest.raises(MetricsError, match=r"^metrics\.textfile: .*(owned by|writable).*; fix: ch") as caught:
        metrics.start()
    assert "\n" not in str(caught.value)
    assert nothing_under(victim) == [] and not os.path.lexists(textfile)


def test_node_exporters_usual_directory_passes_and_a_missing_one_is_made_in_a_trusted_parent(tmp_path):
    usual = tmp_path / "prometheus" / "node-exporter"  # root's, 0755, as Debian makes it
    usual.mkdir(parents=True, mode=0o755)
    os.chmod(usual, 0o755)
    made = tmp_path / "lib" / "drfgov" / "textfile"
    for directory in (usual, made):
        metrics = Metrics(MetricsExport(textfile=str(directory / "drfgov.prom")))
        metrics.start()
        assert directory.is_dir() and directory.stat().st_mode & 0o777 == 0o755
        metrics.write_textfile()
        assert "drfgov_ticks_total 0.0" in (directory / "drfgov.prom").read_text()
        metrics.close()


def test_each_textfile_write_checks_its_directory_again(tmp_path):
    """A directory that passed at the start and was then swapped for a user's symlink (to a
    directory of root's): the write is refused and reported, nothing is written there."""
    exporter, victim = tmp_path / "exporter", tmp_path / "victim"
    exporter.mkdir(mode=0o755)
    victim.mkdir(mode=0o755)
    textfile = exporter / "drfgov.prom"
    metrics = Metrics(MetricsExport(textfile=str(textfile)))
    metrics.start()
    metrics.write_textfile()
    exporter.rename(tmp_path / "gone")
    exporter.symlink_to(victim)
    os.lchown(exporter, NOBODY, NOBODY)
    with pytest.raises(OSError, match=r"metrics\.textfile: .*the symlink .*exporter is owned by uid 65534 \(nobody\)"):
        metrics.write_textfile()
    try:
        observe(metrics, document(), 0.01, writes=0, errors=0)  # the textfile thread: reported at the next tick
        wait_for(lambda: metrics._textfile_error is not None)
        with pytest.raises(OSError, match=r"owned by uid 65534 \(nobody\)"):
            observe(metrics, document(time_unix_s=1795000001.0), 0.01, writes=0, errors=0)
    finally:
        metrics.close()  # nor is the file removed through her symlink
    assert nothing_under(victim) == []


def test_a_clean_close_removes_the_textfile_a_crash_leaves_it(tmp_path):
    """The observability audit: after ``systemctl stop drfgov`` node_exporter exported the last
    tick's series (saturation, held back) for good. A clean close removes the file; a daemon
    that dies leaves it (nothing runs), and the next start writes it again."""
    path = tmp_path / "drfgov.prom"
    metrics = Metrics(MetricsExport(textfile=str(path)))
    metrics.start()
    observe(metrics, document(), 0.01, writes=0, errors=0)
    wait_for(path.exists)
    metrics.close()
    assert not path.exists()
    path.write_text("drfgov_users 2\n")  # one a run that died left behind
    metrics = Metrics(MetricsExport(textfile=str(path)))
    metrics.start()
    metrics.close()  # no tick: no textfile thread, removed all the same
    assert not path.exists()
    metrics.close()  # twice: nothing to remove, no error


def test_the_daemon_refuses_an_untrusted_textfile_directory_at_start(tmp_path):
    from tests.unit.test_daemon import POLICY, host_with_two_busy_users, setup_for
    from governor.service.daemon import Daemon
    from governor.service.hostsetup import SetupError

    hers = tmp_path / "exporter"
    hers.mkdir()
    owned_by_nobody(hers)
    config = tmp_path / "drfgov.yaml"
    config.write_text(POLICY.format(tmp=tmp_path, alice=2) + f"metrics: {{textfile: {hers}/drfgov.prom}}\n")
    d = Daemon(config, host_setup=setup_for(host_with_two_busy_users(), []), runtime_dir=tmp_path / "run")
    try:
        refused = rf"^{config}: metrics\.textfile: {hers}: owned by uid 65534 \(nobody\), not root"
        with pytest.raises(SetupError, match=refused):
            d._open_outputs()
        assert d.metrics is None and nothing_under(hers) == []
    finally:
        d._stop()


@contextlib.contextmanager
def serving(host: str = "127.0.0.1"):
    """A started listener on a free port of ``host`` that has seen one tick's document; yields
    it and its URL, and closes it after."""
    port = free_port(host)
    metrics = Metrics(MetricsExport(host, port))
    metrics.start()
    try:
        observe(metrics, document(), 0.01, writes=0, errors=0)
        yield metrics, f"http://{f'[{host}]' if ':' in host else host}:{port}/metrics"
    finally:
        metrics.close()


def test_listener_serves_on_the_address_given_and_a_taken_port_is_one_clear_error():
    with serving() as (metrics, url):
        body = urllib.request.urlopen(url, timeout=10).read().decode()
        assert 'drfgov_user_weighted_share_ratio{uid="1001",user="alice"} 0.25' in body
        port = metrics.export.listen_port
        with pytest.raises(MetricsError, match=rf"metrics.listen: cannot listen on 127.0.0.1:{port}: .*in use"):
            Metrics(MetricsExport("127.0.0.1", port)).start()


def test_policy_metrics_section_is_off_by_default_and_parsed():
    assert not DEFAULT_POLICY.metrics.enabled
    policy, warnings = policy_from_text('metrics: {listen: "127.0.0.1:9798", textfile: /x/drfgov.prom}\n')
    assert policy.metrics == MetricsExport("127.0.0.1", 9798, "/x/drfgov.prom") and warnings == []
    assert policy.metrics.listen == "127.0.0.1:9798"
    six, _ = policy_from_text('metrics: {listen: "[::1]:9798"}\n')
    assert (six.metrics.listen_host, six.metrics.listen) == ("::1", "[::1]:9798")


def test_every_interface_is_accepted_only_written_out_and_warned_about():
    policy, warnings = policy_from_text('metrics: {listen: "0.0.0.0:9798"}\n', "p.yaml")
    assert policy.metrics.every_interface
    assert len(warnings) == 1 and warnings[0].startswith("p.yaml:1: metrics.listen: 0.0.0.0 listens on every interface")


@pytest.mark.parametrize("text, expected", [
    ('metrics: {listen: "localhost:9798"}\n', "p.yaml:1: metrics.listen: expected IP:PORT such as '127.0.0.1:9798' "
                                             "or '[::1]:9798': the host must be an IP address, not a name"),
    ('metrics: {listen: "127.0.0.1"}\n', "p.yaml:1: metrics.listen: expected IP:PORT such as"),
    ('metrics: {listen: "127.0.0.1:0"}\n', "with a port 1 … 65535, got text '127.0.0.1:0'"),
    ('metrics: {listen: "127.0.0.1:65536"}\n', "with a port 1 … 65535"),
    ('metrics: {listen: "::1:9798"}\n', "(an IPv6 address goes in brackets)"),
    ('metrics: {listen: 9798}\n', "p.yaml:1: metrics.listen: expected IP:PORT such as '127.0.0.1:9798' or "
                                  "'[::1]:9798', got 9798"),
    ('metrics:\n  listen: "127.0.0.1:9798"\n  port: 1\n', "p.yaml:3: metrics.port: unknown key; expected one of: listen, textfile"),
    ('metrics: {textfile: ""}\n', "p.yaml:1: metrics.textfile: expected a path"),
    ('metrics: [1]\n', "p.yaml:1: metrics: expected a mapping"),
])
def test_metrics_mistakes_name_file_line_and_field(text, expected):
    with pytest.raises(InputError) as caught:
        policy_from_text(text, "p.yaml")
    assert expected in str(caught.value), str(caught.value)


def test_the_daemon_counts_its_writes_and_keeps_its_metrics_over_a_reload(tmp_path, caplog):
    from prometheus_client.parser import text_string_to_metric_families as parse

    from tests.unit.test_daemon import POLICY, host_with_two_busy_users, setup_for
    from governor.service.daemon import Daemon

    config = tmp_path / "drfgov.yaml"
    textfile = tmp_path / "drfgov.prom"
    config.write_text(POLICY.format(tmp=tmp_path, alice=2) + f"metrics: {{textfile: {textfile}}}\n")
    d = Daemon(config, host_setup=setup_for(host_with_two_busy_users(), []), runtime_dir=tmp_path / "run")
    d._open_outputs()
    try:
        docs = []
        for _ in range(4):
            d.tick()
            docs.append(d.document())
        found = samples(d.metrics)
        assert value(found, "drfgov_ticks_total") == 4
        assert value(found, "drfgov_limit_writes_total") == sum(len(u["written"]) for doc in docs for u in doc["users"]) > 0
        assert value(found, "drfgov_user_weight", uid="1000", user="alice", kind="cpu") == 2.0
        assert value(found, "drfgov_users") == 2
        wait_for(textfile.exists)
        assert "drfgov_user_weighted_share_ratio" in {f.name for f in parse(textfile.read_text())}

        config.write_text(POLICY.format(tmp=tmp_path, alice=3) + 'metrics: {listen: "127.0.0.1:9"}\n')
        d.reload()
        assert d.policy.metrics.textfile == str(textfile) and d.policy.metrics.listen is None  # kept until a restart
        assert any("metrics: a change of the metrics section takes effect at the next start" in r.message
                   for r in caplog.records)
        d.tick()
        assert value(samples(d.metrics), "drfgov_user_weight", uid="1000", user="alice", kind="cpu") == 3.0
    finally:
        d._stop()
    assert not textfile.exists()  # a clean stop removes it


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def connect(port: int, count: int) -> list[socket.socket]:
    """``count`` connections to the listener that send nothing (the test closes them)."""
    return [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(count)]


def closed_by_the_listener(s: socket.socket) -> bool:
    s.setblocking(False)
    try:
        return s.recv(1) == b""
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True


def timed_scrape(url: str) -> tuple[float, str]:
    start = time.monotonic()
    body = urllib.request.urlopen(url, timeout=4).read().decode()
    return time.monotonic() - start, body


def test_idle_connections_hold_no_thread_and_no_scrape_back():
    """The observability audit: the listener served one connection at a time, each for up to
    CONNECTION_TIMEOUT_S (5 s), so two idle connections of any local user made a scrape wait
    10 s, Prometheus's default scrape_timeout. Now each waits in the event loop on its own: with
    8 idle (and one half-sent) held open, at the daemon's real timeout, a scrape is answered at
    once, no thread is spent on them, and the tick's observe() does not wait."""
    with serving() as (metrics, url):
        threads = threading.active_count()
        idle = connect(metrics.export.listen_port, 8)
        try:
            idle[0].sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # and never the blank line
            time.sleep(0.2)
            took_s, body = timed_scrape(url)
            assert took_s < 1.0 and 'drfgov_user_weighted_share_ratio{uid="1001",user="alice"} 0.25' in body
            assert threading.active_count() <= threads
            start = time.monotonic()
            observe(metrics, document(time_unix_s=1795000001.0), 0.01, writes=0, errors=0)
            assert time.monotonic() - start < 0.1
            assert not any(closed_by_the_listener(s) for s in idle)  # within their 5 s, left alone
        finally:
            for s in idle:
                s.close()


def test_a_flood_of_connections_stays_within_the_cap_and_the_oldest_are_closed_beyond_it():
    """Idle connections cost a descriptor each now, so they are capped (MAX_CONNECTIONS, well
    within the 256 the daemon keeps for what is not a counter file): one more closes the oldest
    of the peer that holds the most, and a scrape that comes after the flood is still answered
    at once (a cap that refused new connections instead would let the flood shut Prometheus out)."""
    import governor.service.metricslistener as module

    flood = module.MAX_CONNECTIONS + 40
    with serving() as (metrics, url):
        time.sleep(0.1)
        descriptors = open_descriptors()
        held = connect(metrics.export.listen_port, flood)
        try:
            wait_for(lambda: sum(closed_by_the_listener(s) for s in held) >= flood - module.MAX_CONNECTIONS)
            assert open_descriptors() - len(held) <= descriptors + module.MAX_CONNECTIONS  # the test's own aside
            assert closed_by_the_listener(held[0]) and not closed_by_the_listener(held[-1])  # the oldest went
            took_s, body = timed_scrape(url)
            assert took_s < 1.0 and "drfgov_users 2.0" in body
            assert len(metrics._listener._connections) <= module.MAX_CONNECTIONS
        finally:
            for s in held:
                s.close()


def test_a_client_that_does_not_read_its_response_holds_no_scrape_back(monkeypatch):
    """A request sent and its (large) response never read: the response waits in the event loop
    for her socket, not on the listener's thread, and goes with her connection at the timeout."""
    import governor.service.metricslistener as module

    monkeypatch.setattr(module, "CONNECTION_TIMEOUT_S", 1.0)  # 5 s in the daemon
    exposition = {"body": b"# " + b"x" * (32 << 20) + b"\n"}
    monkeypatch.setattr(Metrics, "exposition", lambda self: exposition["body"])
    with serving() as (metrics, url):
        stuck = socket.create_connection(("127.0.0.1", metrics.export.listen_port), timeout=10)
        try:
            stuck.sendall(b"GET /metrics HTTP/1.1\r\n\r\n")
            time.sleep(0.2)  # her response under way, stuck in her socket
            exposition["body"] = b"drfgov_users 2.0\n"
            took_s, body = timed_scrape(url)
            assert took_s < 0.5 and body == "drfgov_users 2.0\n"
            wait_for(lambda: not metrics._listener._connections, timeout_s=5)  # hers went at the timeout
        finally:
            stuck.close()


def stalled_reader(port: int) -> socket.socket:
    """A connection that sends a whole request and never reads its response (the security audit
    of 2026-11-28: ``GET / HTTP/1.0`` and a receive buffer of 1 KiB)."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    s.connect(("127.0.0.1", port))
    s.sendall(b"GET / HTTP/1.0\r\n\r\n")
    return s


def test_connections_that_never_read_hold_no_copy_of_the_body_and_leave_no_garbage(monkeypatch):
    """The security audit of 2026-11-28: each connection's response was a new copy of the whole
    body (and asyncio copied what the socket did not take once more), and each connection that
    was reset or timed out left a reference cycle holding it until the daemon's next collection,
    a minute later: 8 processes holding such connections took a 1,000-user daemon from 87 to
    280 MiB. Now 96 of them (32 closed for newer ones, 16 reset by their client, the rest cut
    off when stalled), with a 4 MiB body and collection off as in the daemon, hold the
    listener's memory to a piece of the body each while they last, and leave nothing once they
    are gone, not even a reference cycle."""
    import gc
    import tracemalloc

    import governor.service.metricslistener as module

    accepted, real_accepted = [], module.Listener._accepted
    monkeypatch.setattr(module.Listener, "_accepted",
                        lambda self, reader, writer: accepted.append(1) or real_accepted(self, reader, writer))
    body = b"# " + b"x" * (4 << 20) + b"\n"  # one object: the cache's, served to every connection
    monkeypatch.setattr(Metrics, "exposition", lambda self: body)
    with serving() as (metrics, url):
        assert timed_scrape(url)[1].encode() == body  # the loop and its first connection settled
        connections = metrics._listener._connections
        wait_for(lambda: not connections)
        enabled = gc.isenabled()
        gc.collect()
        gc.disable()  # as runtime.GarbageCollection does in the daemon
        tracemalloc.start()
        held = []
        try:
            base_bytes = tracemalloc.get_traced_memory()[0]
            held = [stalled_reader(metrics.export.listen_port) for _ in range(96)]
            wait_for(lambda: len(accepted) == 1 + 96  # all accepted; those left in their response, stalled
                     and all(writer.transport.get_write_buffer_size() for writer in list(connections)))
            for s in held[-16:]:  # reset by their client while their response waits (unread bytes: a reset)
                s.close()
            wait_for(lambda: not connections, timeout_s=9)  # the rest cut off, stalled
            left_bytes, peak_bytes = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            garbage = gc.collect()  # what the daemon's next collection would find: kept until then
        finally:
            tracemalloc.stop()
            for s in held:
                s.close()
            if enabled:
                gc.enable()
    assert peak_bytes - base_bytes < 12 << 20, f"peak {(peak_bytes - base_bytes) >> 20} MiB over 96 connections"
    assert left_bytes - base_bytes < 1 << 20, f"{(left_bytes - base_bytes) >> 10} KiB left after they went"
    assert garbage < 96, f"{garbage} objects in reference cycles after 96 connections"


def test_a_scrape_among_connections_that_never_read_is_served_not_closed(monkeypatch):
    """The security audit of 2026-11-28: the connection closed for a new one was the oldest still
    sending its request — once a flood's connections all sat in their response, never read, the
    one still reading its request was Prometheus's (2 of 36 scrapes reset). Now it is the one
    that has made no progress for the longest: a scrape whose request comes in two parts, and
    whose 4 MiB response it reads at a steady pace, is served whole while the cap is full of
    connections that never read and a hundred more arrive."""
    import governor.service.metricslistener as module

    body = b"# " + b"x" * (4 << 20) + b"\n"
    monkeypatch.setattr(Metrics, "exposition", lambda self: body)
    with serving() as (metrics, url):
        port, held = metrics.export.listen_port, []
        try:
            held += [stalled_reader(port) for _ in range(module.MAX_CONNECTIONS)]
            connections = metrics._listener._connections
            wait_for(lambda: len(connections) == module.MAX_CONNECTIONS  # all of them in their response, stalled
                     and all(writer.transport.get_write_buffer_size() for writer in list(connections)))
            scrape = socket.create_connection(("127.0.0.1", port), timeout=10)
            scrape.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
            scrape.sendall(b"GET /metrics HTTP/1.1\r\n")
            for _ in range(10):  # arrive while she is still sending her request
                held.append(stalled_reader(port))
            time.sleep(0.1)
            scrape.sendall(b"Host: x\r\n\r\n")
            answer = b""
            while chunk := scrape.recv(65536):
                answer += chunk
                if len(held) < module.MAX_CONNECTIONS + 100:  # and while she reads her response
                    held.append(stalled_reader(port))
                time.sleep(0.002)
            scrape.close()
        finally:
            for s in held:
                s.close()
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n") and answer.endswith(b"\r\n\r\n" + body), len(answer)


def test_a_request_sent_a_byte_at_a_time_is_cut_off_at_the_timeout(monkeypatch):
    """The deadline is for the whole request, not each read (the hostile-input audit of
    2026-11-26: a byte every few seconds held the listener for days): a client trickling
    bytes is closed at CONNECTION_TIMEOUT_S after her connect, however she paces them."""
    import governor.service.metricslistener as module

    monkeypatch.setattr(module, "CONNECTION_TIMEOUT_S", 0.5)  # 5 s in the daemon
    with serving() as (metrics, _):
        s = socket.create_connection(("127.0.0.1", metrics.export.listen_port), timeout=10)
        start, cut_s = time.monotonic(), None
        try:
            for ch in b"GET /" + b"a" * 100:
                try:
                    s.send(bytes([ch]))
                except OSError:
                    cut_s = time.monotonic() - start
                    break
                if closed_by_the_listener(s):
                    cut_s = time.monotonic() - start
                    break
                s.setblocking(True)
                time.sleep(0.05)
        finally:
            s.close()
        assert cut_s is not None and 0.4 <= cut_s < 1.5, cut_s


def test_bad_requests_get_a_status_and_head_gets_the_headers():
    with serving() as (metrics, _):
        def ask(request: bytes) -> bytes:
            with socket.create_connection(("127.0.0.1", metrics.export.listen_port), timeout=10) as s:
                s.sendall(request)
                return b"".join(iter(lambda: s.recv(65536), b""))

        assert ask(b"POST /metrics HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 405 ")
        assert ask(b"GARBAGE\r\n\r\n").startswith(b"HTTP/1.1 400 ")
        assert ask(b"GET /" + b"a" * 20000).startswith(b"HTTP/1.1 431 ")  # no end of head in sight
        head = ask(b"HEAD /metrics HTTP/1.0\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 OK\r\n") and head.endswith(b"\r\n\r\n")
        assert b"Content-Length: " + str(len(metrics.exposition())).encode() in head
        assert b"drfgov_users 2.0" in ask(b"GET /metrics HTTP/1.1\nHost: x\n\n")


def test_a_client_still_sending_a_huge_request_reads_its_status_not_a_reset():
    """The audit's leftovers: a 1 MB header got a TCP reset, not a status — the listener answered
    after 16 KiB and closed with her bytes unread, and the kernel resets such a close. A small
    send buffer keeps her sending while the answer is written, as over a real network."""
    with serving() as (metrics, _):
        def ask(request: bytes) -> bytes:
            with socket.socket() as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16384)
                s.settimeout(10)
                s.connect(("127.0.0.1", metrics.export.listen_port))
                s.sendall(request)  # a reset fails this (ConnectionResetError) or the reads below
                return b"".join(iter(lambda: s.recv(65536), b""))

        for header in (b"X-Big: " + b"a" * 2**20 + b"\r\n", b"".join(b"X-%d: a\r\n" % i for i in range(100_000))):
            answer = ask(b"GET /metrics HTTP/1.1\r\n" + header + b"\r\n")
            assert answer.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n"), answer[:80]
            assert answer.endswith(b"\r\n\r\nrequest head longer than 16384 bytes\n")
        answer = ask(b"POST /metrics HTTP/1.1\r\nContent-Length: 1048576\r\n\r\n" + b"a" * 2**20)
        assert answer.startswith(b"HTTP/1.1 405 ") and answer.endswith(b"GET or HEAD\n")
        wait_for(lambda: not metrics._listener._connections, timeout_s=5)  # each closed once she closed hers


def test_the_listener_serves_ipv6_loopback():
    with serving("::1") as (_, url):
        body = urllib.request.urlopen(url, timeout=10).read().decode()
        assert "drfgov_users 2.0" in body


def test_scrapes_of_the_same_tick_are_served_the_same_bytes_without_building_them_again(monkeypatch):
    import governor.service.metrics as module

    built = []
    real = module.generate_latest
    monkeypatch.setattr(module, "generate_latest", lambda registry: built.append(registry) or real(registry))
    monkeypatch.setattr(module, "EXPOSITION_REST_FACTOR", 0.0)  # the next tick's at once: the floor's test is below
    with serving() as (metrics, url):
        first = urllib.request.urlopen(url, timeout=10).read()
        assert urllib.request.urlopen(url, timeout=10).read() == first and len(built) == 1
        observe(metrics, document(time_unix_s=1795000001.0), 0.01, writes=0, errors=0)
        assert b"drfgov_ticks_total 2.0" in urllib.request.urlopen(url, timeout=10).read() and len(built) == 2


def test_a_new_ticks_exposition_waits_nine_times_the_last_builds_cpu_time(monkeypatch):
    """The security audit of 2026-11-28: built once per tick, the exposition still cost any local
    user who asks every second a build a tick (145 ms of CPU at 1,000 users, 1.6 s at 10,000:
    more than the 1 s tick). After a build of 0.1 s of CPU, the next tick's waits 0.9 s, the
    last bytes (the same object) served meanwhile; a tick's are never built twice; and however
    long a build, the next waits 10 s at most."""
    import types

    import governor.service.metrics as module

    clock, build_cpu_s = {"monotonic_s": 100.0, "cpu_s": 0.0}, [0.1]
    built, real = [], module.generate_latest

    def build(registry):
        built.append(clock["monotonic_s"])
        clock["cpu_s"] += build_cpu_s[0]
        return real(registry)

    monkeypatch.setattr(module, "generate_latest", build)
    monkeypatch.setattr(module, "time", types.SimpleNamespace(monotonic=lambda: clock["monotonic_s"],
                                                              thread_time=lambda: clock["cpu_s"]), raising=False)
    metrics = Metrics(MetricsExport())
    observe(metrics, document(), 0.01, writes=0, errors=0)
    first = metrics.exposition()
    assert b"drfgov_ticks_total 1.0" in first and built == [100.0]
    observe(metrics, document(time_unix_s=1795000001.0), 0.01, writes=0, errors=0)
    clock["monotonic_s"] = 100.85
    assert metrics.exposition() is first and built == [100.0]
    clock["monotonic_s"] = 100.95
    second = metrics.exposition()
    assert b"drfgov_ticks_total 2.0" in second and built == [100.0, 100.95]
    clock["monotonic_s"] = 200.0
    assert metrics.exposition() is second and built == [100.0, 100.95]  # no new tick: nothing to build
    build_cpu_s[0] = 2.0  # ~12,000 users: 9 × 2 s would leave a scrape every 15 s a stale one in two
    observe(metrics, document(time_unix_s=1795000002.0), 0.01, writes=0, errors=0)
    third = metrics.exposition()
    observe(metrics, document(time_unix_s=1795000003.0), 0.01, writes=0, errors=0)
    clock["monotonic_s"] = 209.9
    assert metrics.exposition() is third
    clock["monotonic_s"] = 210.0
    assert b"drfgov_ticks_total 4.0" in metrics.exposition() and built == [100.0, 100.95, 200.0, 210.0]


def test_a_name_that_is_not_utf8_is_a_label_with_its_bytes_escaped_as_the_docs_say():
    """The docs said ``\\xNN``; the label was ``\\udcNN``, the surrogate pwd decoded the
    byte to (the observability audit). A name that is UTF-8 stays as it is."""
    metrics = Metrics(MetricsExport())
    doc = document()
    doc["users"][0]["name"] = "caf\udce9"  # pwd's name for the bytes b"caf\xe9"
    doc["users"][1]["name"] = "zo\u00e9\udcff"  # b"zo\xc3\xa9\xff": UTF-8, then a byte that is not
    observe(metrics, doc, 0.01, writes=0, errors=0)
    found = samples(metrics)
    assert value(found, "drfgov_user_weighted_share_ratio", uid="1001", user="caf\\xe9") == 0.25
    assert value(found, "drfgov_user_weighted_share_ratio", uid="1002", user="zo\u00e9\\xff") == 0.75
    assert 'user="caf\\\\xe9"' in metrics.exposition().decode()  # the backslash escaped, as the format wants


def test_the_textfile_thread_survives_an_error_that_is_not_an_oserror_and_reports_it(tmp_path, monkeypatch):
    path = tmp_path / "drfgov.prom"
    metrics = Metrics(MetricsExport(textfile=str(path)))
    real = metrics.write_textfile
    failures = [UnicodeEncodeError("utf-8", "caf\udce9", 3, 4, "surrogates not allowed")]
    monkeypatch.setattr(metrics, "write_textfile", lambda: real() if not failures else (_ for _ in ()).throw(failures.pop()))
    try:
        observe(metrics, document(), 0.01, writes=0, errors=0)
        wait_for(lambda: metrics._textfile_error is not None)
        with pytest.raises(OSError, match="UnicodeEncodeError"):  # what the daemon logs and goes on from
            observe(metrics, document(time_unix_s=1795000001.0), 0.01, writes=0, errors=0)
        observe(metrics, document(time_unix_s=1795000015.0), 0.01, writes=0, errors=0)
        wait_for(path.exists)  # the thread is still there
    finally:
        metrics.close()


def test_the_textfile_is_written_through_an_unguessable_exclusive_temporary(tmp_path):
    """prometheus_client's write_to_textfile opens PATH.PID.TID, following a symlink planted
    there by whoever can write the directory; ours is mkstemp's (O_EXCL, random)."""
    path = tmp_path / "drfgov.prom"
    victim = tmp_path / "victim"
    victim.write_text("untouched\n")
    for tid in {threading.get_ident(), *(t.ident for t in threading.enumerate())}:
        (tmp_path / f"drfgov.prom.{os.getpid()}.{tid}").symlink_to(victim)
    metrics = Metrics(MetricsExport(textfile=str(path)))
    metrics.write_textfile()
    assert victim.read_text() == "untouched\n"
    assert "drfgov_ticks_total 0.0" in path.read_text() and path.stat().st_mode & 0o777 == 0o644


@pytest.mark.parametrize("textfile", ["drfgov.prom", "/var/lib/node-exporter/drfgov.txt", "/var/lib/node-exporter/"])
def test_a_textfile_must_be_an_absolute_path_ending_in_prom(textfile):
    with pytest.raises(InputError) as caught:
        policy_from_text(f'metrics:\n  textfile: "{textfile}"\n', "p.yaml")
    assert str(caught.value) == (f"p.yaml:2: metrics.textfile: expected an absolute path ending in .prom such as "
                                 f"'/var/lib/prometheus/node-exporter/drfgov.prom', got text '{textfile}'")


def test_the_document_is_built_at_the_first_collection_of_a_tick_and_once():
    """The tick hands over how to build its document (issue 16: built every tick, ~20 µs a
    user): nothing is built until a scrape or a textfile write, both of one tick share one
    build, and a new tick's is built afresh."""
    built = []

    def build(doc):
        def make():
            built.append(doc["tick"])
            return doc
        return make

    metrics = Metrics(MetricsExport())
    metrics.observe(build(document(tick=7)), 1795000000.0, 0.01, 0, 0)
    metrics.observe(build(document(tick=8)), 1795000001.0, 0.01, 0, 0)
    assert built == []
    found = samples(metrics)
    assert value(found, "drfgov_user_weighted_share_ratio", uid="1001", user="alice") == 0.25
    generate_latest(metrics.textfile_registry)
    samples(metrics)
    assert built == [8]  # the tick before it was never scraped: never built
    metrics.observe(build(document(tick=9, users=document()["users"][1:])), 1795000002.0, 0.01, 0, 0)
    found = samples(metrics)
    assert built == [8, 9] and value(found, "drfgov_users") == 1.0
    assert ("drfgov_user_weight", (("kind", "cpu"), ("uid", "1001"), ("user", "alice"))) not in found


def test_a_document_that_cannot_be_built_leaves_the_counters_served_and_is_logged_once_and_counted(caplog):
    def broken():
        raise KeyError("a bug")

    metrics = Metrics(MetricsExport())
    for t in range(3):
        metrics.observe(broken, 1795000000.0 + t, 0.01, 0, 0)
        found = samples(metrics)
        assert value(found, "drfgov_ticks_total") == t + 1
        assert value(found, "drfgov_document_failures_total") == t + 1  # counted in the same exposition
        assert not any(name.startswith("drfgov_user_") for name, _ in found)
        samples(metrics)  # a second scrape of the tick: the same bytes, no second attempt
    assert sum("could not be built" in r.message for r in caplog.records) == 1
    observe(metrics, document(), 0.01, 0, 0)
    found = samples(metrics)
    assert value(found, "drfgov_users") == 2.0 and value(found, "drfgov_document_failures_total") == 3


def test_a_tick_hands_its_document_over_without_waiting_for_a_build_under_way():
    """A scrape building the last tick's document (slowly, here) holds up neither the next
    tick's observe() nor a second scrape's wait for the same build, which it shares."""
    started, release, built = threading.Event(), threading.Event(), []

    def slow():
        started.set()
        release.wait(10)
        built.append(7)
        return document(tick=7)

    metrics = Metrics(MetricsExport())
    metrics.observe(slow, 1795000000.0, 0.01, 0, 0)
    first = metrics.collector._latest
    scrapes = [threading.Thread(target=lambda: first.get(lambda: None)) for _ in range(2)]
    for scrape in scrapes:
        scrape.start()
    assert started.wait(10)
    t0 = time.monotonic()
    observe(metrics, document(tick=8), 0.01, 0, 0)
    assert time.monotonic() - t0 < 1.0 and scrapes[0].is_alive()
    release.set()
    for scrape in scrapes:
        scrape.join(10)
    assert built == [7] and first.get(lambda: None)["tick"] == 7
    assert metrics.collector.document()["tick"] == 8


def test_a_request_sent_a_byte_at_a_time_holds_the_listener_no_longer_than_the_timeout(monkeypatch):
    """The timeout held for each read: a client sending a byte just inside it held the listener,
    which served one connection at a time, for as long as the request line allows (days; the
    hostile-input audit of 2026-11-26). Now the whole request must come within it, and no
    connection waits for another anyway."""
    import governor.service.metricslistener as module

    monkeypatch.setattr(module, "CONNECTION_TIMEOUT_S", 0.5)  # 5 s in the daemon
    stop, sending = threading.Event(), threading.Event()
    with serving() as (metrics, url):
        def trickle():
            s = socket.create_connection(("127.0.0.1", metrics.export.listen_port))
            try:
                for ch in b"GET /" + b"a" * 1000:
                    s.send(bytes([ch]))
                    sending.set()
                    if stop.wait(0.2):
                        break
            except OSError:
                pass  # dropped by the listener
            finally:
                s.close()

        thread = threading.Thread(target=trickle, daemon=True)
        thread.start()
        assert sending.wait(10)  # the listener holds her connection before the scrape comes
        time.sleep(0.3)
        start = time.monotonic()
        try:
            body = urllib.request.urlopen(url, timeout=30).read().decode()
        finally:
            stop.set()
            thread.join()
        assert "drfgov_users 2.0" in body
        assert time.monotonic() - start < 10, "the scrape waited for the trickling client"
