"""Amounts in each resource's unit, for tables and messages."""

from __future__ import annotations

__all__ = ["amount", "vector_text"]


def amount(resource: str, value: float | None) -> str:
    """``value`` of ``resource``: cores (cpu), MiB (memory), fraction of the disk's time (disk:…),
    Mbit/s (net:…, given in bits/s)."""
    if value is None:
        return "-"
    if resource.startswith("net:"):
        return f"{value / 1e6:.2f} Mbit/s"
    if resource == "cpu":
        return f"{value:.3f} cores"
    if resource == "memory":
        return f"{value / 2**20:.0f} MiB"
    return f"{value:.3f} disk"


def vector_text(vector: dict[str, float]) -> str:
    return ", ".join(f"{r} {amount(r, v)}" for r, v in vector.items())
