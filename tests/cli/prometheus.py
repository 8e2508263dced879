"""A real Prometheus server (Debian's ``prometheus`` package) scraping a real ``drfgov run
--dry-run`` on this host, where a user exists as a uid running a busy loop, with the scrape
config and the recording rules of docs/fleet.md (read from the page: the page is what is
tested) — the fixture of tests/cli/test_prometheus.py."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

import yaml

from tests.cli.conftest import REPO, _installed_drfgov, cli_env

FLEET = REPO / "docs" / "fleet.md"

BUSY_UID = 50002  # no passwd entry: the daemon names her uid50002
BUSY = "import time\nend = time.time() + 300\nwhile time.time() < end: pass\n"


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on at ``host`` (IPv4 or IPv6) just now."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def wait_for(condition, timeout_s: float = 60.0, what: str = "condition"):
    """``condition()``'s first true value, polled every 0.2 s (OSError/ValueError count as not yet)."""
    end = time.monotonic() + timeout_s
    while True:
        try:
            found = condition()
            if found:
                return found
        except (OSError, ValueError):
            pass
        assert time.monotonic() < end, f"{what}: not met in {timeout_s:g} s"
        time.sleep(0.2)


def fleet_block(first_line: str) -> str:
    """The fenced YAML block of docs/fleet.md whose first line is ``first_line``."""
    for block in re.findall(r"```yaml\n(.*?)```", FLEET.read_text(), re.S):
        if block.splitlines()[0].strip() == first_line:
            return block
    raise AssertionError(f"docs/fleet.md has no yaml block starting {first_line!r}")


def tool(name: str) -> str:
    """The path of a Prometheus tool, or the test fails: scripts/run-tests installs them."""
    found = shutil.which(name)
    if not found:
        pytest.fail(f"{name} is not installed (apt-get install prometheus; scripts/run-tests does it)", pytrace=False)
    return found


@dataclass
class Scraped:
    """The running pair: ``metrics_url`` (the daemon's), ``prometheus_url`` (the server's)."""

    metrics_url: str
    prometheus_url: str
    rules: Path
    daemon: subprocess.Popen
    server: subprocess.Popen

    def query(self, promql: str) -> list[dict]:
        """The result vector of an instant PromQL query (HTTP API ``/api/v1/query``).

        Raises:
            AssertionError: the server answered with an error (a bad expression).
        """
        url = f"{self.prometheus_url}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                answer = json.load(response)
        except urllib.error.HTTPError as exc:
            raise AssertionError(f"{promql}: {exc.code} {exc.read().decode(errors='replace')}") from None
        assert answer["status"] == "success", answer
        return answer["data"]["result"]


def _ready(prometheus_url: str) -> bool:
    """Whether the server answers ``/-/ready`` with 200 (a 503 before is an OSError: not yet)."""
    with urllib.request.urlopen(f"{prometheus_url}/-/ready", timeout=5) as response:
        return response.status == 200


def start(tmp: Path):
    """Start the busy user, the daemon and Prometheus under ``tmp``; yields :class:`Scraped`."""
    prometheus = tool("prometheus")
    python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
    busy = subprocess.Popen(["setpriv", f"--reuid={BUSY_UID}", f"--regid={BUSY_UID}", "--clear-groups", python, "-c", BUSY])
    metrics_port, web_port = free_port(), free_port()
    config = tmp / "drfgov.yaml"
    config.write_text(f"mode: dry-run\ninterval_s: 0.5\nstate_path: {tmp}/run/state.json\n"
                      f"history: {{path: {tmp}/lib/history.db}}\n"
                      f'metrics: {{listen: "127.0.0.1:{metrics_port}"}}\n')
    daemon = subprocess.Popen([_installed_drfgov(), "run", "--config", str(config)], cwd=REPO,
                              stderr=open(tmp / "drfgov.log", "w"), env=cli_env(tmp / "run"))
    rules = tmp / "drfgov-rules.yml"
    rules.write_text(fleet_block("# drfgov-rules.yml (rule_files)"))
    config_doc = yaml.safe_load(fleet_block("# prometheus.yml (scrape_configs)"))
    (job,) = config_doc["scrape_configs"]
    job["scrape_interval"] = "1s"  # the page's 15 s, shortened for the test
    # and a target nobody serves, on IPv6: the page's relabeling gives it host="::1", and its up is 0
    job["static_configs"] = [{"targets": [f"127.0.0.1:{metrics_port}", f"[::1]:{free_port()}"]}]
    config_doc.update({"global": {"scrape_interval": "1s", "evaluation_interval": "1s"}, "rule_files": [str(rules)]})
    scrape = tmp / "prometheus.yml"
    scrape.write_text(yaml.safe_dump(config_doc))
    server = subprocess.Popen([prometheus, f"--config.file={scrape}", f"--storage.tsdb.path={tmp}/tsdb",
                               f"--web.listen-address=127.0.0.1:{web_port}"],
                              stdout=subprocess.DEVNULL, stderr=open(tmp / "prometheus.log", "w"))
    scraped = Scraped(f"http://127.0.0.1:{metrics_port}/metrics", f"http://127.0.0.1:{web_port}", rules, daemon, server)
    try:
        # queries before the server is ready get 503 (its storage still opening; on 2026-11-26
        # under load a query did, and the test failed instead of waiting)
        wait_for(lambda: _ready(scraped.prometheus_url), timeout_s=120, what="Prometheus ready (/-/ready)")
        yield scraped
    finally:
        for proc in (server, daemon, busy):
            proc.terminate()
        for proc in (server, daemon, busy):
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
