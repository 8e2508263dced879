"""Problem files: what is accepted, and the exact error for each kind of mistake."""

import pytest

from governor.offline.allocate import solve
from governor.offline.problem import InputError, load_problem
from governor.config.source import loads
from governor.offline.problem import parse_problem

GOOD = """\
capacity: {cpu: 9, memory: 18}
users:
  A: {demand: {cpu: 1, memory: 4}}
  B: {demand: {cpu: 3, memory: 1}, max_units: 5, weight: 2}
  C: {demand: {cpu: 1}, weight: {cpu: 2, memory: 1}, allocated: {cpu: 1}}
"""


def parse(text):
    return parse_problem(loads(text, "p.yaml"))


def test_good_file_parses_in_order_with_defaults():
    problem = parse(GOOD)
    assert problem.resources == ["cpu", "memory"]
    a, b, c = problem.users
    assert (a.name, a.weight, a.max_units, a.allocated) == ("A", 1.0, None, {})
    assert (b.weight, b.max_units) == (2.0, 5.0)
    assert c.weight == {"cpu": 2.0, "memory": 1.0} and c.allocated == {"cpu": 1.0}


def test_json_is_accepted(tmp_path):
    path = tmp_path / "p.json"
    path.write_text('{"capacity": {"cpu": 9, "memory": 18}, "users": {"A": {"demand": {"cpu": 1, "memory": 4}}, '
                    '"B": {"demand": {"cpu": 3, "memory": 1}}}}')
    result = solve(load_problem(path))
    assert result.to_json()["users"]["A"]["units"] == 3.0


def test_max_units_zero_receives_nothing_and_shares_reflect_holdings():
    problem = parse("capacity: {cpu: 10}\nusers:\n  z: {demand: {cpu: 1}, max_units: 0, allocated: {cpu: 2}}\n"
                    "  o: {demand: {cpu: 1}}\n")
    doc = solve(problem).to_json()
    assert doc["users"]["z"]["units"] == 0.0 and doc["users"]["z"]["dominant_share"] == 0.2
    assert doc["users"]["o"]["units"] == 8.0


@pytest.mark.parametrize(
    "text, expected",
    [
        ("capacity: {cpu: 9\nusers: {]\n", "p.yaml:2: not valid YAML/JSON"),
        ("capacity: {cpu: 9}\nusers: {}\nextra: 1\n", "p.yaml:3: extra: unknown key; expected one of: capacity, users"),
        ("users: {}\n", "p.yaml:1: capacity: missing"),
        ("capacity: {cpu: -1}\nusers: {}\n", "p.yaml:1: capacity.cpu: expected a number ≥ 0, got -1"),
        ("capacity: {cpu: lots}\nusers: {}\n", "p.yaml:1: capacity.cpu: expected a number ≥ 0, got text 'lots'"),
        ("capacity: {cpu: 9}\nusers:\n  A: {demand: {gpu: 1}}\n",
         "p.yaml:3: users.A.demand.gpu: resource 'gpu' is not in capacity; expected one of: cpu"),
        ("capacity: {cpu: 9}\nusers:\n  A: {demand: {cpu: 1}, weight: 0}\n",
         "p.yaml:3: users.A.weight: expected a number > 0, got 0"),
        ("capacity: {cpu: 9}\nusers:\n  A:\n    demand: {cpu: 1}\n    max_units: -2\n",
         "p.yaml:5: users.A.max_units: expected a number ≥ 0, got -2"),
        ("capacity: {cpu: 9}\nusers:\n  A: {demand: {cpu: 1}, wieght: 2}\n",
         "p.yaml:3: users.A.wieght: unknown key; expected one of: demand, max_units, weight, allocated"),
        ("capacity: {cpu: 9}\nusers:\n  A: {max_units: 2}\n", "p.yaml:3: users.A.demand: missing"),
        ("capacity: {cpu: 9}\nusers:\n  A: {demand: {cpu: true}}\n",
         "p.yaml:3: users.A.demand.cpu: expected a number ≥ 0, got a boolean (true)"),
        ("capacity: {cpu: .inf}\nusers: {}\n", "p.yaml:1: capacity.cpu: expected a number ≤ 1e+18, got inf"),
        ("capacity: {cpu: 9}\nusers:\n  A: {demand: {cpu: 1}}\n  A: {demand: {cpu: 2}}\n", "p.yaml:4: users.A: duplicate key"),
        ("- 1\n- 2\n", "p.yaml:1: expected a mapping with 'capacity' and 'users', got a list"),
        ("capacity: {}\nusers: {}\n", "p.yaml:1: capacity: expected at least one resource"),
    ],
)
def test_mistakes_name_file_line_field_and_expectation(text, expected):
    with pytest.raises(InputError) as info:
        parse(text)
    assert str(info.value).startswith(expected), str(info.value)


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        load_problem(tmp_path / "nope.yaml")
