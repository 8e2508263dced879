"""The policy's ``metrics:`` section: where the daemon exposes its Prometheus metrics.

::

    metrics:
      listen: "127.0.0.1:9798"        # HOST:PORT, HOST an IP address ([::1]:9798 for IPv6)
      textfile: /var/lib/prometheus/node-exporter/drfgov.prom   # node_exporter's textfile collector

Both are off by default. ``listen`` takes an IP address, not a host name: a name would be
resolved at every start (DNS at boot is the classic way to bind somewhere unexpected), and the
address says exactly which interfaces see the metrics. The metrics name every user of the host
and what she runs into, so the example and the docs use the loopback address; ``0.0.0.0`` or
``::`` (every interface) is accepted only when written out, and ``check-config`` warns about it.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any

from governor.config.source import Located, check_keys, describe, mapping

__all__ = ["MetricsExport", "parse_metrics"]

PORT_MAX = 65535


@dataclass(frozen=True)
class MetricsExport:
    """Where metrics go: an HTTP listener (``listen_host``, an IP address text, and
    ``listen_port``), a node_exporter textfile path, both, or neither (None: off)."""

    listen_host: str | None = None
    listen_port: int | None = None
    textfile: str | None = None

    @property
    def enabled(self) -> bool:
        return self.listen_port is not None or self.textfile is not None

    @property
    def every_interface(self) -> bool:
        """Whether the listener accepts connections on every interface (0.0.0.0 or ::)."""
        return self.listen_host is not None and ipaddress.ip_address(self.listen_host).is_unspecified

    @property
    def listen(self) -> str | None:
        """``HOST:PORT`` as written in a URL (``[::1]:9798``), or None."""
        if self.listen_port is None:
            return None
        host = f"[{self.listen_host}]" if ":" in str(self.listen_host) else self.listen_host
        return f"{host}:{self.listen_port}"


def parse_metrics(src: Located, value: Any, text) -> tuple[MetricsExport, list[str]]:
    """The ``metrics`` section (None: off) and its warnings. ``text(src, path, value)`` is the
    policy's path check (non-empty, no NUL, at most PATH_MAX).

    Raises:
        InputError: an unknown key, a listen value that is not ``IP:PORT`` with a port
            1 … 65535, or a bad textfile path (not absolute, or not ending in ``.prom``).
    """
    path = ("metrics",)
    body = mapping(src, path, value)
    check_keys(src, path, body, ("listen", "textfile"))
    host = port = None
    warnings = []
    if body.get("listen") is not None:
        host, port = _listen(src, path + ("listen",), body["listen"])
        if ipaddress.ip_address(host).is_unspecified:
            warnings.append(f"{src.file}:{src.line(path + ('listen',))}: metrics.listen: {host} listens on every "
                            "interface: anyone who can reach this host sees every user's name and usage "
                            "(use 127.0.0.1 and let Prometheus scrape through a proxy or an SSH tunnel)")
    textfile = None
    if body.get("textfile") is not None:
        textfile = _textfile(src, path + ("textfile",), body["textfile"], text)
    return MetricsExport(host, port, textfile), warnings


def _textfile(src: Located, path: tuple, value: Any, text) -> str:
    """An absolute path ending in ``.prom`` (what node_exporter's textfile collector reads; a
    relative one would depend on the daemon's working directory)."""
    value = text(src, path, value)
    if not (value.startswith("/") and value.endswith(".prom") and len(value.rsplit("/", 1)[1]) > len(".prom")):
        raise src.error(path, f"expected an absolute path ending in .prom such as "
                              f"'/var/lib/prometheus/node-exporter/drfgov.prom', got {describe(value)}")
    return value


def _listen(src: Located, path: tuple, value: Any) -> tuple[str, int]:
    expected = "expected IP:PORT such as '127.0.0.1:9798' or '[::1]:9798'"
    if not isinstance(value, str):
        raise src.error(path, f"{expected}, got {describe(value)}")
    host, sep, port_text = value.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise src.error(path, f"{expected} (an IPv6 address goes in brackets), got {describe(value)}")
    if not sep or not (port_text.isascii() and port_text.isdigit()) or not 1 <= int(port_text) <= PORT_MAX:
        raise src.error(path, f"{expected}, with a port 1 … {PORT_MAX}, got {describe(value)}")
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise src.error(path, f"{expected}: the host must be an IP address, not a name, got {describe(value)}") from None
    return str(address), int(port_text)
