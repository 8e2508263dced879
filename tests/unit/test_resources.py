"""Resource ids: one instance per name (the loop's dicts hash them by identity)."""

import copy
import pickle

import pytest

from governor.control.resources import CPU, MEMORY, Resource


def test_one_instance_per_name_however_it_is_made():
    disk = Resource.disk("8:0")
    assert Resource.parse("disk:8:0") is disk and Resource("disk", device="8:0") is disk
    assert copy.copy(disk) is disk and copy.deepcopy({disk: 1}) == {disk: 1}
    assert pickle.loads(pickle.dumps(disk)) is disk
    assert Resource.parse("cpu") is CPU and Resource("memory") is MEMORY
    assert Resource.link("eth0", "tx") is Resource.parse("net:eth0:tx") is not Resource.link("eth0", "rx")
    assert {Resource.parse("disk:8:0"): 1}[disk] == 1 and disk != "disk:8:0" and str(disk) == "disk:8:0"


@pytest.mark.parametrize("text", ["disk:8", "net:eth0:up", "gpu", "cpu:1", "net::tx"])
def test_malformed_ids_are_refused(text):
    with pytest.raises(ValueError):
        Resource.parse(text)


def test_resource_sets_are_one_instance_per_content_and_bounded(monkeypatch):
    from governor.control import resources

    disk = Resource.disk("8:0")
    first = resources.resource_set([CPU, disk])
    assert resources.resource_set(iter([disk, CPU, disk])) is first == frozenset({CPU, disk})
    assert resources.resource_set([]) is resources.resource_set(()) == frozenset()
    from governor.control.interned import Interned

    monkeypatch.setattr(resources, "_SETS", Interned(most=2))
    for members in ([CPU], [MEMORY], [CPU, MEMORY]):
        resources.resource_set(members)
    assert len(resources._SETS._kept) <= 2 and resources.resource_set([MEMORY, CPU]) == frozenset({CPU, MEMORY})
