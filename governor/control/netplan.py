"""Network in the control loop (pure: no I/O): per-user rates from class counters, the
held-back signal, and the HTB classes to write.

* **Usage** of ``net:IF:tx``/``net:IF:rx`` is the bits/s through her class between two
  :class:`~governor.shaping.shaper.NetSample` s (a counter that went backwards — the class was
  recreated — gives no rate).
* **Held back** (so demand is probed upward, :mod:`governor.control.demand`): HTB counted her class
  over its limit (``overlimits`` rose: :func:`net_over`), or she ran **at her ceil**: at ≥ 90%
  of a ceil below the link (:func:`net_at_ceil`). Both at once — she used what she was given
  and HTB held more of hers back — her demand is probed from her demand before, not only from
  what she sent (:func:`governor.control.demand.net_evidence`).
* **Classes** (:func:`governor.shaping.classes.plan_classes`): rate = her weighted share of the
  link; ceil = her DRF allocation when the link is contended (DRF's allocations fill it:
  :meth:`governor.control.loop.Governor._allocate`) and ``net`` is enforced, else the link.
  A class already in force is rewritten only when its rate or ceil moves by more than the
  hysteresis fraction.
"""

from __future__ import annotations

from collections.abc import Mapping

from governor.control.demand import AT_CAP_FRACTION
from governor.control.hysteresis import moved
from governor.control.resources import Resource
from governor.shaping.classes import plan_classes
from governor.shaping.model import ClassRate, Link, NetSample

__all__ = ["net_at_ceil", "net_over", "net_rates", "plan_net", "settle"]


def net_rates(prev: NetSample | None, now: NetSample, uid: int) -> dict[Resource, float]:
    """resource → bits/s through her class since ``prev`` (0 when there is no interval yet)."""
    out = {}
    elapsed = now.time_s - prev.time_s if prev is not None else 0.0
    for resource, counters in now.bytes.items():
        before = prev.bytes.get(resource, {}).get(uid) if prev is not None else None
        after = counters.get(uid)
        if before is None or after is None or after < before or elapsed <= 0:
            out[resource] = 0.0
        else:
            out[resource] = 8.0 * (after - before) / elapsed
    return out


def net_at_ceil(rates: Mapping[Resource, float], in_force: Mapping[Resource, ClassRate | None],
                links: Mapping[Resource, Link]) -> frozenset[Resource]:
    """The links on which she ran at her ceil this interval: at ≥ :data:`AT_CAP_FRACTION` of
    a ceil below the link (``rates``: bits/s, :func:`net_rates`; ``in_force``: her class per
    link, None where she has none). Her ceil, not her work, set her pace there."""
    out = []
    for resource, ceil in in_force.items():
        if (ceil is not None and ceil.ceil_bits_per_s < links[resource].capacity_bits_per_s
                and rates.get(resource, 0.0) >= AT_CAP_FRACTION * ceil.ceil_bits_per_s):
            out.append(resource)
    return frozenset(out)


def net_over(prev: NetSample | None, now: NetSample, uid: int) -> frozenset[Resource]:
    """The links on which HTB counted her class over its limit since ``prev`` (``overlimits``
    rose: it had a packet of hers to send and no tokens for it)."""
    out = []
    for resource, counters in now.overlimits.items():
        before = prev.overlimits.get(resource, {}).get(uid) if prev is not None else None
        after = counters.get(uid)
        if before is not None and after is not None and after > before:
            out.append(resource)
    return frozenset(out)


def plan_net(links: Mapping[Resource, Link], weights: Mapping[int, float],
             allocation: Mapping[int, Mapping[Resource, float]], contended: set[Resource]
             ) -> dict[Resource, dict[int, ClassRate]]:
    """resource → uid → the class she should have (``weights``: her ``net`` weight;
    ``allocation``: her DRF allocation, bits/s per resource; ``contended``: the resources whose
    ceilings follow the allocation)."""
    out = {}
    for resource, link in links.items():
        alloc = {uid: a.get(resource, 0.0) for uid, a in allocation.items()} if resource in contended else None
        out[resource] = plan_classes(link.capacity_bits_per_s, weights, alloc)
    return out


def settle(in_force: Mapping[int, ClassRate], planned: Mapping[int, ClassRate], hysteresis: float,
           link_bits_per_s: float | None = None) -> dict[int, ClassRate]:
    """The classes to have after this tick: ``planned``, except that a class in force stays as it
    is while neither its rate nor its ceil moved by more than ``hysteresis`` (a fraction) — but
    a ceil planned at the whole link (``link_bits_per_s``: nobody contends it) is written over
    one below it however close: within the band, a ceil left at 96% of an idle link held her
    there for good (work conservation; the cgroup side treats ``max`` alike)."""
    out = {}
    for uid, plan in planned.items():
        now = in_force.get(uid)
        keep = now is not None and not (moved(now.rate_bits_per_s, plan.rate_bits_per_s, hysteresis)
                                        or moved(now.ceil_bits_per_s, plan.ceil_bits_per_s, hysteresis)
                                        or (link_bits_per_s is not None
                                            and plan.ceil_bits_per_s == int(link_bits_per_s) != now.ceil_bits_per_s))
        out[uid] = now if keep else plan
    return out
