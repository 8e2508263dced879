"""A simulated shaped link for loop and view tests (the real one: tests/netns, tests/vm)."""

from governor.control.resources import Resource
from governor.shaping.model import ClassRate, NetSample, link_resources

MBIT = 1e6
LINK = Resource.link("eth0", "tx")
LINKS = link_resources({"eth0": 100 * MBIT}, {})


class SimNetwork:
    """A 100 Mbit/s link shared the way HTB shares it: each class first gets up to its rate,
    then the rest is lent in proportion to rate, up to each ceil. Without a class a user's
    traffic is in the default class (here: it gets nothing beyond what is left)."""

    def __init__(self, host):
        self.host, self.links = host, dict(LINKS)
        self.want: dict[int, float] = {}
        self.sent: dict[int, float] = {}
        self.over: dict[int, int] = {}
        self.in_force: dict[Resource, dict[int, ClassRate]] = {LINK: {}}
        self.missing: dict[Resource, str] = {}
        self.applied: list[dict] = []

    def sample(self, uids):
        return NetSample(self.host.clock(), {LINK: {u: int(self.sent.get(u, 0)) for u in uids}},
                         {LINK: {u: self.over.get(u, 0) for u in uids}})

    def apply(self, wanted):
        self.applied.append({r: dict(c) for r, c in wanted.items()})
        self.in_force = {r: dict(c) for r, c in wanted.items()}
        return []

    def step(self, seconds):
        classes = self.in_force[LINK]
        got = {u: min(w, classes[u].rate_bits_per_s) if u in classes else 0.0 for u, w in self.want.items()}
        left = 100 * MBIT - sum(got.values())
        for _ in range(50):  # lend what is left, by rate, up to want and ceil
            hungry = {u: classes[u] for u in got if u in classes and got[u] < min(self.want[u], classes[u].ceil_bits_per_s)}
            if left <= 1 or not hungry:
                break
            total = sum(c.rate_bits_per_s for c in hungry.values())
            for u, c in hungry.items():
                extra = min(left * c.rate_bits_per_s / total, min(self.want[u], c.ceil_bits_per_s) - got[u])
                got[u] += extra
            left = 100 * MBIT - sum(got.values())
        for u, rate in got.items():
            self.sent[u] = self.sent.get(u, 0) + rate * seconds / 8
            if rate < self.want[u] - 1:
                self.over[u] = self.over.get(u, 0) + 1
        self.got = got
