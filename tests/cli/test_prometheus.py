"""A real Prometheus (Debian's package) scrapes ``drfgov run --dry-run`` on this host, where
uid 50002 runs a busy loop: PromQL over its HTTP API returns her per-user series, and
``promtool check metrics`` passes on the daemon's exposition. The daemon refuses a metrics
address it cannot bind with one line and exit status 1 (a host problem, not the file's)."""

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
    assert usage[0]["metric"]["job"] == "drfgov" and usage[0]["metric"]["host"] == "test"
    assert 0.1 < float(usage[0]["value"][1]) <= 1.0  # a fraction of the CPUs users share
    for name in ("drfgov_user_demand_ratio", "drfgov_user_allocation_ratio", "drfgov_user_held_back"):
        assert scraped.query(f'{name}{{{who},resource="memory"}}'), name
    assert float(scraped.query(f"drfgov_user_dominant_share_ratio{{{who}}}")[0]["value"][1]) > 0
    assert float(scraped.query(f'drfgov_user_weight{{{who},kind="cpu"}}')[0]["value"][1]) == 1.0
    assert float(scraped.query(f"drfgov_user_cpu_weight{{{who}}}")[0]["value"][1]) == 100
    assert float(scraped.query("drfgov_users")[0]["value"][1]) >= 1
    wait_for(lambda: scraped.query('increase(drfgov_ticks_total{job="drfgov"}[10s]) > 0'), what="ticks counted")
    assert scraped.query('process_resident_memory_bytes{job="drfgov"}')
    assert [r["value"][1] for r in scraped.query('up{job="drfgov"}')] == ["1"]


def test_promtool_accepts_the_exposition(scraped, tmp_path):
    wait_for(lambda: b"drfgov_user_usage_ratio" in urllib.request.urlopen(scraped.metrics_url, timeout=10).read(),
             what="per-user series served")
    exposition = urllib.request.urlopen(scraped.metrics_url, timeout=10).read()
    checked = subprocess.run([tool("promtool"), "check", "metrics"], input=exposition, capture_output=True, timeout=60)
    assert checked.returncode == 0, checked.stdout.decode() + checked.stderr.decode()


def test_a_metrics_address_in_use_is_one_line_and_exit_1(tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = tmp_path / "drfgov.yaml"
        config.write_text(f"mode: dry-run\nstate_path: {tmp_path}/run/state.json\n"
                          f"history: {{path: {tmp_path}/lib/history.db}}\n"
                          f'metrics: {{listen: "127.0.0.1:{port}"}}\n')
        out = subprocess.run([_installed_drfgov(), "run", "--config", str(config)], capture_output=True, text=True,
                             timeout=60, cwd=REPO, env=cli_env(tmp_path / "run"))
    assert out.returncode == 1
    errors = [line for line in out.stderr.splitlines() if "error" in line.lower()]
    assert errors == [f"drfgov: error: {config}: metrics.listen: cannot listen on 127.0.0.1:{port}: "
                      "Address already in use"], out.stderr
    assert "Traceback" not in out.stderr
