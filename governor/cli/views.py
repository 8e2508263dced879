"""Human views of a state document (:mod:`governor.service.state`): the shares table and ``explain``.

Pure: documents in, rich tables or lines of text out. Amounts are shown in each resource's
unit: cores for ``cpu``, MiB/GiB for ``memory``, percent of the disk's time for ``disk:MAJ:MIN``,
Mbit/s for ``net:IF:tx``/``net:IF:rx``.
"""

from __future__ import annotations

import re
import time

from rich.markup import escape
from rich.table import Table

from governor.control.resources import Resource
from governor.enforce.model import Knob

__all__ = ["amount", "explain_lines", "find_user", "io_limit", "limit_of", "markup_safe", "printable", "shares_table",
           "summary_line", "top_table"]

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` with its control characters (C0, DEL, C1) shown as ``\\xNN``: a user or group
    name comes from the account databases, and an escape sequence in one would reach every
    terminal that shows the shares (the hostile-input audit of 2026-11-26)."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def markup_safe(text: str) -> str:
    """``text`` as rich shows it literally in a table cell or title: :func:`printable`, and its
    ``[`` escaped (a name ``[/]x`` is a MarkupError, ``[bold red]boss[/]`` would be styled)."""
    return escape(printable(text))


def amount(resource: str, value: float | None) -> str:
    """``value`` of ``resource`` (a resource id as the document names it) with its unit
    (None: ``max``)."""
    if value is None:
        return "max"
    kind = Resource.parse(resource).kind
    if kind == "cpu":
        return f"{value:.2f} cores"
    if kind == "memory":
        return f"{value / 2**30:.2f} GiB" if value >= 2**30 else f"{value / 2**20:.0f} MiB"
    if kind == "net":
        return f"{value / 1e6:.1f} Mbit/s"
    return f"{100 * value:.1f}% of disk time"


def limit_of(user: dict, resource: str) -> str:
    """The limit written for ``resource``: cpu.max in cores, memory.high, io.max as read and
    write bandwidth (:func:`io_limit`), or the ceil of her HTB class."""
    r = Resource.parse(resource)
    if r.kind == "net":
        cls = user.get("classes", {}).get(resource)
        return amount(resource, cls["ceil_bits_per_s"]) if cls else "-"
    limits = user.get("limits")
    if not limits:
        return "-"
    if r.kind == "cpu":
        quota, period = limits["cpu.max"].split()
        return "max" if quota == "max" else amount("cpu", int(quota) / int(period))
    if r.kind == "memory":
        return amount("memory", limits["memory.high"])
    return io_limit(limits["io.max"].get(r.device, "max"))


def io_limit(line: str) -> str:
    """An io.max line (``rbps=1048576 wbps=max riops=max wiops=max``) in a table cell's room:
    ``max``, or read and write bandwidth (``r 1.0 w max MiB/s``; KiB/s when one is below a
    MiB/s, B/s below a KiB/s: a limit is never shown as 0), then IO/s limits when there are
    any. A line that does not parse is shown as it is."""
    try:
        keys = dict(part.split("=", 1) for part in line.split())
        values = {k: None if keys[k] == "max" else int(keys[k]) for k in ("rbps", "wbps", "riops", "wiops")}
    except (ValueError, KeyError):
        return line
    out = []
    bps = [v for v in (values["rbps"], values["wbps"]) if v is not None]
    if bps:
        low = min(bps)
        scale, unit, digits = (2**20, "MiB/s", 1) if low >= 2**20 else (2**10, "KiB/s", 0) if low >= 2**10 else \
            (1, "B/s", 0)
        r, w = ("max" if v is None else f"{v / scale:.{digits}f}" for v in (values["rbps"], values["wbps"]))
        out.append(f"r {r} w {w} {unit}")
    if values["riops"] is not None or values["wiops"] is not None:
        r, w = ("max" if v is None else str(v) for v in (values["riops"], values["wiops"]))
        out.append(f"r {r} w {w} IO/s")
    return ", ".join(out) or "max"


def _weight(user: dict) -> str:
    weights = {k: v for k, v in user["weight"].items() if k in ("cpu", "memory", "io", "net")}
    values = set(weights.values())
    return f"{values.pop():g}" if len(values) == 1 else " ".join(f"{k} {v:g}" for k, v in weights.items())


def summary_line(doc: dict, now_unix_s: float | None = None) -> str:
    """When, how and against what capacity the document was made; flags a stale one
    (:func:`governor.service.state.staleness`: too old, or its tick ahead of this clock).
    :func:`printable` as a whole: ``mode``, ``backend``, ``saturated`` and a link's name in
    ``capacity`` are only type-checked when a ``--state`` file is read (the audit of
    2026-11-28: an escape sequence there reached root's terminal)."""
    from governor.service.state import staleness

    age, stale = staleness(doc, now_unix_s)
    if not stale:
        stale = ""
    elif age > 0:
        stale = f" — STALE: {age:.0f} s old, is drfgov running?"
    else:
        stale = (f" — STALE: its tick is {-age:.0f} s ahead of this clock (the clock went back, "
                 "or another host's file)")
    capacity = ", ".join(f"{r} {amount(r, v)}" for r, v in doc["capacity"].items())
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(doc["time_unix_s"]))
    return printable(f"tick {doc['tick']} at {when} ({doc['mode']}, backend {doc['backend']}); capacity: {capacity}; "
                     f"contended: {', '.join(doc['saturated']) or 'nothing'}{stale}")


def shares_table(doc: dict) -> Table:
    """One row per user: weight, dominant resource and share, and per resource
    ``demand / allocation / limit``. Every cell and header is :func:`printable` (see
    :func:`top_table`)."""
    table = Table(title=None, show_lines=False)
    for header in ("user", "uid", "weight", "dominant", "dom. share", "wtd share"):
        table.add_column(header, justify="left" if header in ("user", "dominant") else "right")
    resources = list(doc["capacity"])
    for r in resources:
        table.add_column(escape(f"{printable(r)}\ndemand / alloc / limit"), justify="right")
    for u in doc["users"]:
        cells = [markup_safe(u["name"]), str(u["uid"]), _weight(u), escape(u["dominant_resource"] or "-"),
                 f"{u['dominant_share']:.3f}", f"{u['weighted_share']:.3f}"]
        for r in resources:
            cells.append(escape(f"{_short(r, u['demand'].get(r))} / {_short(r, u['allocation'].get(r))} / "
                                f"{_short_limit(u, r)}"))
        if u.get("error"):
            cells[0] += f" [red](error: {markup_safe(str(u['error']))})[/red]"
        table.add_row(*map(printable, cells))
    return table


def top_table(doc: dict) -> Table:
    """``drfgov top``'s table: users by weighted share, highest first (ties by uid); per
    resource ``demand / allocation / limit``; a saturated resource's column in red, a cell
    where the kernel held her back in yellow, and the resources she was held back on.

    Every cell is :func:`printable` as a whole, markup and all (its ``\\xNN`` never stands
    before a ``[``, so the markup reads the same): ``held``, a link's name (``net:IF:tx``
    allows any IF without a blank, colon or slash) and an io.max line shown as written are
    only type-checked when a ``--state`` file is read (the audit of 2026-11-28)."""
    saturated = set(doc["saturated"])
    table = Table(title=None, show_lines=False, expand=False)
    for header in ("user", "uid", "weight", "wtd share", "dom. share", "dominant", "held back"):
        table.add_column(header, justify="left" if header in ("user", "dominant", "held back") else "right")
    resources = list(doc["capacity"])
    for r in resources:
        hot = r in saturated
        table.add_column(escape(f"{printable(r)}{' SATURATED' if hot else ''}\ndemand / alloc / limit"),
                         justify="right", header_style="bold white on red" if hot else "bold",
                         style="red" if hot else None)
    for u in sorted(doc["users"], key=lambda u: (-u["weighted_share"], u["uid"])):
        held = set(u.get("held", []))
        cells = [markup_safe(u["name"]), str(u["uid"]), _weight(u), f"{u['weighted_share']:.3f}",
                 f"{u['dominant_share']:.3f}", escape(u["dominant_resource"] or "-"),
                 escape(", ".join(sorted(held)) or "-")]
        for r in resources:
            cell = escape(f"{_short(r, u['demand'].get(r))} / {_short(r, u['allocation'].get(r))} / "
                          f"{_short_limit(u, r)}")
            cells.append(f"[bold yellow]{cell}[/bold yellow]" if r in held else cell)
        if u.get("error"):
            cells[0] += f" [red](error: {markup_safe(str(u['error']))})[/red]"
        table.add_row(*map(printable, cells))
    return table


def _short(resource: str, value: float | None) -> str:
    if value is None:
        return "-"
    return amount(resource, value).replace(" cores", "").replace(" of disk time", "").replace(" Mbit/s", "")


def _short_limit(user: dict, resource: str) -> str:
    text = limit_of(user, resource)
    return text if Resource.parse(resource).kind == "memory" else text.replace(" cores", "").replace(" Mbit/s", "")


def find_user(doc: dict, who: str) -> dict:
    """The entry for login name or uid ``who``. Raises KeyError naming who is governed."""
    for u in doc["users"]:
        if who in (u["name"], str(u["uid"])):
            return u
    names = ", ".join(printable(u["name"]) for u in doc["users"])
    raise KeyError(f"{who!r} is not governed right now ({f'governed: {names}' if names else 'no user is governed'})")


def explain_lines(doc: dict, user: dict) -> list[str]:
    """Why ``user`` gets what she gets, in words and numbers (weighted DRF, paper §4 and §6):
    one line each, :func:`printable` as a whole. A ``--state`` file's strings are only
    type-checked (her ``reasons`` and their knobs, ``held``, ``written``, ``saturated``, a
    link's name, her limits as written, ``error``): an escape sequence in any of them reached
    root's terminal (the audit of 2026-11-28)."""
    return [printable(line) for line in _explanation(doc, user)]


def _explanation(doc: dict, user: dict) -> list[str]:
    out = [f"{user['name']} (uid {user['uid']}), weight {_weight(user)}."]
    if not user["demand"]:
        out.append("She was first seen this tick: her demand is measured from the next one.")
        return out
    dom = user["dominant_resource"]
    demand = user["demand"]
    held = user.get("held", [])
    if held:
        out.append(f"The kernel held her back on: {', '.join(held)} (throttled, at a limit, or stalled).")
    out.append("Demand (what the kernel's evidence says she would use alone; see README, How the governor decides): "
               + ", ".join(f"{r} {amount(r, demand.get(r, 0.0))} ({_pct(demand.get(r, 0.0), c)} of capacity)"
                           for r, c in doc["capacity"].items()) + ".")
    if dom is None:
        out.append("She demands nothing, so DRF gives her nothing to share and nothing limits her.")
    else:
        w = user["weight"].get(Resource.parse(dom).weight_kind, 1.0)
        out.append(f"Dominant resource: {dom} — the largest share of any capacity in her allocation. "
                   f"Dominant share {user['dominant_share']:.3f} ÷ weight {w:g} = weighted share "
                   f"{user['weighted_share']:.3f}.")
        out.append(_filling_sentence(doc, user))
    out.append("Allocation: " + ", ".join(f"{r} {amount(r, user['allocation'].get(r, 0.0))}"
                                          for r in doc["capacity"]) + ".")
    for knob, reason in user.get("reasons", {}).items():
        value = _knob_value(user["limits"], knob) if user.get("limits") else "not written"
        planned = _knob_value(user["planned"], knob)
        band = "" if planned == value else f" (plan {planned}: within the hysteresis band, not rewritten)"
        out.append(f"  {knob} = {value}: {reason}{band}")
    out += _class_lines(doc, user)
    if user.get("written"):
        out.append(f"Written this tick: {', '.join(user['written'])}.")
    if user.get("error"):
        out.append(f"Error: {user['error']}")
    return out


def _filling_sentence(doc: dict, user: dict) -> str:
    others = [u for u in doc["users"] if u is not user and u["dominant_resource"]]
    contended = doc["saturated"]
    if not contended:
        guard = user.get("memory_guard_bytes")
        if guard is None:
            return "Nothing is contended: every demand fits, so she gets all she demands and no cap applies."
        demand = user["demand"].get("memory", 0.0)
        return ("Nothing is contended: every demand fits, so she gets all she demands — but her memory grew faster "
                "than in the interval before, which no reading has confirmed yet: her memory.high holds her to "
                f"{amount('memory', guard)}, her demand {amount('memory', demand)} plus her part of the free memory "
                f"{amount('memory', max(0.0, guard - demand))} (at least what she holds), until one does.")
    satisfied = all(abs(user["allocation"].get(r, 0.0) - user["demand"].get(r, 0.0)) <= 1e-6 * max(1.0, v)
                    for r, v in user["demand"].items())
    peers = ", ".join(f"{u['name']} {u['weighted_share']:.3f}" for u in others) or "no one else"
    if satisfied:
        return (f"Progressive filling met all her demand before {', '.join(contended)} ran out "
                f"(weighted shares of the others: {peers}).")
    return (f"Progressive filling raised every unsatisfied user's weighted share together until "
            f"{', '.join(contended)} ran out; she stopped at {user['weighted_share']:.3f} (others: {peers}).")


def _class_lines(doc: dict, user: dict) -> list[str]:
    """Her HTB class on each shaped link: rate (guaranteed) and ceil (how far she may borrow)."""
    out = []
    for resource, cls in user.get("classes", {}).items():
        link = Resource.parse(resource)
        where = f"{link.ifname} {'egress' if link.direction == 'tx' else 'ingress (IFB)'}"
        contended = resource in doc["saturated"]
        why = ("the link is contended: ceil = her DRF allocation" if contended
               else "the link is not contended: she may borrow all of it")
        out.append(f"  tc class on {where} = rate {amount(resource, cls['rate_bits_per_s'])} (her weighted share "
                   f"of the link), ceil {amount(resource, cls['ceil_bits_per_s'])}: {why}")
    if doc.get("network_error"):
        out.append(f"Network shaping failed this tick: {doc['network_error']}")
    return out


def _knob_value(limits: dict, name: str) -> str:
    try:
        knob = Knob.parse(name)
    except ValueError:  # a document not of the daemon's: shown, not trusted
        return "?"
    if knob.device is not None:
        io = limits.get("io.max")
        return io.get(knob.device, "max") if isinstance(io, dict) else "max"
    value = limits.get(knob.file)
    if knob.is_memory and value is not None:
        return f"{value} ({amount('memory', value)})"
    return "max" if value is None else str(value)


def _pct(value: float, capacity: float) -> str:
    return f"{100 * value / capacity:.0f}%" if capacity else "-"
