"""A real Prometheus (Debian's package) scrapes ``drfgov run --dry-run`` on this host, where
uid 50002 runs a busy loop, with docs/fleet.md's scrape config and recording rules: PromQL
over its HTTP API returns her per-user series; ``promtool check metrics`` passes on the
exposition and ``promtool check rules`` on the rules; the recording rules record her totals;
dashboards/drfgov.json has Grafana's import shape and every query in it returns data. The
daemon refuses a metrics address it cannot bind with one line and exit status 1."""

import json
import re
import subprocess
import urllib.request

import pytest

from tests.cli.conftest import REPO, _installed_drfgov, cli_env
from tests.cli.prometheus import BUSY_UID, free_port, start, tool, wait_for


@pytest.fixture(scope="module")
def scraped(tmp_path_factory):
    yield from start(tmp_path_factory.mktemp("prometheus"))


def test_prometheus_answers_promql_with_the_busy_users_series(scraped):
    who = f'uid="{BUSY_UID}",user="uid{BUSY_UID}"'
    usage = wait_for(lambda: scraped.query(f'drfgov_user_usage_ratio{{{who},resource="cpu"}} > 0.1'),
                     what="a scraped CPU use of the busy user")
    assert usage[0]["metric"]["job"] == "drfgov" and usage[0]["metric"]["host"] == "127.0.0.1"  # the page's relabeling
    # a fraction of the CPUs users share: the CPUs less what the rest of the host uses right now,
    # measured each tick, so a user who takes all of it reads 1.00002 by the two clocks' jitter
    assert 0.1 < float(usage[0]["value"][1]) <= 1.05
    for name in ("drfgov_user_demand_ratio", "drfgov_user_allocation_ratio", "drfgov_user_held_back"):
        assert scraped.query(f'{name}{{{who},resource="memory"}}'), name
    assert float(scraped.query(f"drfgov_user_dominant_share_ratio{{{who}}}")[0]["value"][1]) > 0
    assert float(scraped.query(f'drfgov_user_weight{{{who},kind="cpu"}}')[0]["value"][1]) == 1.0
    assert float(scraped.query(f"drfgov_user_cpu_weight{{{who}}}")[0]["value"][1]) == 100
    assert float(scraped.query("drfgov_users")[0]["value"][1]) >= 1
    wait_for(lambda: scraped.query('increase(drfgov_ticks_total{job="drfgov"}[10s]) > 0'), what="ticks counted")
    assert scraped.query('process_resident_memory_bytes{job="drfgov"}')
    assert [r["value"][1] for r in scraped.query('up{job="drfgov",host="127.0.0.1"}')] == ["1"]


def test_a_daemon_not_answering_is_up_0_and_an_ipv6_target_gets_its_host_label(scraped):
    """docs/fleet.md: over HTTP a stopped daemon's series go stale (the age query returns
    nothing): up == 0 is the alert; the relabel regex also matches [::1]:PORT."""
    down = wait_for(lambda: scraped.query('up{job="drfgov"} == 0'), what="the unserved target scraped")
    assert [r["metric"]["host"] for r in down] == ["::1"], down
    assert not scraped.query('drfgov_last_tick_timestamp_seconds{host="::1"}')


def test_promtool_accepts_the_exposition(scraped, tmp_path):
    wait_for(lambda: b"drfgov_user_usage_ratio" in urllib.request.urlopen(scraped.metrics_url, timeout=10).read(),
             what="per-user series served")
    exposition = urllib.request.urlopen(scraped.metrics_url, timeout=10).read()
    checked = subprocess.run([tool("promtool"), "check", "metrics"], input=exposition, capture_output=True, timeout=60)
    assert checked.returncode == 0, checked.stdout.decode() + checked.stderr.decode()


def test_a_metrics_port_taken_at_start_is_said_and_tried_again_while_it_governs(tmp_path):
    """A port another process holds at start was fatal: a local user who bound it first (at boot,
    or while an admin restarted for a metrics change) kept the governor from ever starting
    (the lifecycle audit of 2026-11-26). Now the daemon says so in one line, governs, and
    listens once the port is free (tried every LISTEN_RETRY_S)."""
    import signal
    import socket
    import time

    from governor.service.daemon import LISTEN_RETRY_S

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    config = tmp_path / "drfgov.yaml"
    config.write_text(f"mode: dry-run\nstate_path: {tmp_path}/run/state.json\n"
                      f"history: {{path: {tmp_path}/lib/history.db}}\n"
                      f'metrics: {{listen: "127.0.0.1:{port}"}}\n')
    daemon = subprocess.Popen([_installed_drfgov(), "run", "--config", str(config)], stderr=subprocess.PIPE, text=True,
                              cwd=REPO, env=cli_env(tmp_path / "run"))
    try:
        state = tmp_path / "run" / "state.json"
        wait_for(lambda: state.exists() and json.loads(state.read_text())["tick"] >= 2, what="ticks without the listener")
        taken.close()
        url = f"http://127.0.0.1:{port}/metrics"

        def scraped_now():
            try:
                return b"drfgov_last_tick_timestamp_seconds" in urllib.request.urlopen(url, timeout=2).read()
            except OSError:
                return False
        started = time.monotonic()
        wait_for(scraped_now, timeout_s=3 * LISTEN_RETRY_S, what="the listener once the port is free")
        assert time.monotonic() - started <= 2 * LISTEN_RETRY_S
    finally:
        taken.close()
        daemon.send_signal(signal.SIGTERM)
        _, stderr = daemon.communicate(timeout=60)
    assert daemon.returncode == 0, stderr
    errors = [line for line in stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and f"metrics.listen: cannot listen on 127.0.0.1:{port}: Address already in use: " \
        f"governing without the listener; tried again every {LISTEN_RETRY_S:g} s" in errors[0], stderr
    assert "Traceback" not in stderr


def test_a_metrics_address_not_of_this_host_is_one_line_and_exit_1(tmp_path):
    config = tmp_path / "drfgov.yaml"
    config.write_text(f"mode: dry-run\nstate_path: {tmp_path}/run/state.json\n"
                      f"history: {{path: {tmp_path}/lib/history.db}}\n"
                      'metrics: {listen: "192.0.2.1:9798"}\n')  # TEST-NET-1: on no interface here
    out = subprocess.run([_installed_drfgov(), "run", "--config", str(config)], capture_output=True, text=True,
                         timeout=60, cwd=REPO, env=cli_env(tmp_path / "run"))
    assert out.returncode == 1
    errors = [line for line in out.stderr.splitlines() if "error" in line.lower()]
    assert errors == [f"drfgov: error: {config}: metrics.listen: cannot listen on 192.0.2.1:9798: "
                      "Cannot assign requested address"], out.stderr
    assert "Traceback" not in out.stderr


def test_promtool_accepts_the_recording_rules_of_the_fleet_page(scraped):
    checked = subprocess.run([tool("promtool"), "check", "rules", str(scraped.rules)], capture_output=True, text=True,
                             timeout=60)
    assert checked.returncode == 0 and "SUCCESS: 6 rules found" in checked.stdout, checked.stdout + checked.stderr


def test_the_recording_rules_record_her_totals_over_the_hosts(scraped):
    user = f'user="uid{BUSY_UID}"'
    cores = wait_for(lambda: scraped.query(f"user:drfgov_cpu_usage_cores:sum{{{user}}} > 0.2"), what="her CPU total")
    assert float(cores[0]["value"][1]) <= 2.0  # this host has 2 cores
    for rule, low, high in (("user:drfgov_memory_usage_bytes:sum", 1.0, 2**40),
                            ("user:drfgov_dominant_share_ratio:max", 0.01, 1.0),
                            ("user:drfgov_hosts:count", 1, 1),
                            ("user:drfgov_hosts_held_back:count", 0, 1),
                            ("user:drfgov_cpu_allocation_cores:sum", 0.01, 2.0)):
        found = wait_for(lambda rule=rule: scraped.query(f"{rule}{{{user}}}"), what=rule)
        assert low <= float(found[0]["value"][1]) <= high, (rule, found)


DASHBOARD = REPO / "dashboards" / "drfgov.json"
#: What Grafana puts in place of the dashboard's variables: every host, every user, and a
#: rate window of a few scrapes.
VARIABLES = {"$instance": ".*", "$user": ".*", "$__rate_interval": "10s"}


def dashboard_queries() -> list[tuple[str, str]]:
    """(panel title, PromQL) of every target, the variables filled in as Grafana would."""
    doc = json.loads(DASHBOARD.read_text())
    out = []
    for panel in doc["panels"]:
        for target in panel["targets"]:
            expr = target["expr"]
            for name, value in VARIABLES.items():
                expr = expr.replace(name, value)
            out.append((panel["title"], expr))
    return out


def test_the_dashboard_has_the_shape_grafana_imports():
    doc = json.loads(DASHBOARD.read_text())
    assert doc["title"] and doc["uid"] and isinstance(doc["schemaVersion"], int) and doc["panels"]
    variables = {v["name"]: v for v in doc["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    ids = [p["id"] for p in doc["panels"]]
    assert len(ids) == len(set(ids))
    for panel in doc["panels"]:
        assert panel["type"] in ("timeseries", "state-timeline", "stat", "table") and panel["title"]
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert set(panel["gridPos"]) == {"h", "w", "x", "y"} and panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24
        refs = [t["refId"] for t in panel["targets"]]
        assert refs and len(refs) == len(set(refs))
        assert all(t["expr"] and t["datasource"] == panel["datasource"] for t in panel["targets"])
    used = {m for _, e in [(None, t["expr"]) for p in doc["panels"] for t in p["targets"]] for m in re.findall(r"\$\w+", e)}
    assert used <= set(VARIABLES), used  # no variable the test (and the dashboard) does not define


@pytest.mark.parametrize("title, expr", dashboard_queries())
def test_every_dashboard_query_returns_data(scraped, title, expr):
    result = wait_for(lambda: scraped.query(expr), timeout_s=60, what=f"{title}: {expr}")
    assert all(r["value"][1] not in ("NaN",) for r in result) or "histogram_quantile" in expr, (title, result)


def test_the_dashboard_variables_find_this_host_and_the_busy_user(scraped):
    doc = json.loads(DASHBOARD.read_text())
    for variable in doc["templating"]["list"]:
        if variable["type"] != "query":
            continue
        metric, label = re.fullmatch(r"label_values\((.*), (\w+)\)", variable["query"]["query"]).groups()
        for name, value in VARIABLES.items():
            metric = metric.replace(name, value)
        values = {r["metric"][label] for r in wait_for(lambda metric=metric: scraped.query(metric), what=metric)}
        assert values, variable["name"]
        if label == "user":
            assert f"uid{BUSY_UID}" in values
