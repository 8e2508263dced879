"""The layers are folders, and imports point down only (README "Layout"; DESIGN.md "Layers").

Read from the source with :mod:`ast` — every import, at module level or inside a function
(a lazy import still runs), except under ``if TYPE_CHECKING:``. Two rules:

1. **Pure rooms do no I/O.** Everything the fairness and control rooms import, transitively
   (package ``__init__`` files included: importing ``a.b`` runs ``a/__init__.py``), is pure:
   no module of the project that reads or writes the host, and none of the libraries or
   standard modules that do (pyroute2, jeepney, sqlite3, subprocess, socket, psutil, ...).
2. **Arrows point down.** A room imports only from the rooms the table below allows.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("governor", "cgroups", "cgroups_v1", "monitors")

PURE_ROOMS = ("governor.fairness", "governor.control")
#: Project modules that touch the host (files, netlink, D-Bus, processes, the password database).
IO_MODULES = (
    "cgroups.cgroup", "cgroups.mount", "cgroups.devices", "cgroups_v1.cgroup", "cgroups_v1.mounts", "cgroups_v1.slice",
    "monitors.samplev1", "monitors.cgroupv1monitor", "governor.enforce.cgroupfs_v1",
    "cgroups_v1.mixed", "monitors.mixed", "governor.enforce.mixed",
    "monitors.sample", "monitors.users", "monitors.procfs", "monitors.procmonitor", "monitors.cgroupmonitor",
    "monitors.capacity",
    "governor.enforce.cgroupfs", "governor.enforce.systemd", "governor.enforce.dryrun",
    "governor.shaping.htb", "governor.shaping.ingress", "governor.shaping.nft", "governor.shaping.classbatch",
    "governor.shaping.shaper", "governor.shaping.probe",
    "governor.config", "governor.service", "governor.offline", "governor.cli",
)
#: Libraries and standard modules that do I/O (or log, or read the user databases).
IO_LIBRARIES = ("pyroute2", "jeepney", "sqlite3", "subprocess", "socket", "psutil", "sdnotify", "yaml", "typer",
                "rich", "logging", "pwd", "grp", "shutil", "tempfile", "mmap", "matplotlib", "prometheus_client",
                "cgroupspy")

#: Who may import whom, by room (a module's room is the longest prefix listed here).
ALLOWED = {
    "governor.fairness": {"governor.fairness"},
    "governor.control": {"governor.control", "governor.fairness", "governor.enforce.model", "governor.enforce.apply",
                         "governor.shaping.model", "governor.shaping.classes", "monitors.model", "monitors.rates",
                         "cgroups.limits", "cgroups.errors", "cgroups.parse"},
    "governor.enforce": {"governor.enforce", "cgroups", "cgroups_v1"},
    "governor.shaping": {"governor.shaping", "governor.control.resources"},
    "governor.config": {"governor.config", "governor.control.model", "governor.control.resources",
                        "governor.enforce.model", "cgroups.limits", "monitors.model",
                        # check-config's host: its disks and interfaces as drfgov run finds them
                        "monitors.capacity"},
    "governor.offline": {"governor.offline", "governor.fairness", "governor.config.source"},
    "governor.service": {"governor.service", "governor.config", "governor.control", "governor.enforce",
                         "governor.shaping", "governor.fairness", "cgroups", "cgroups_v1", "monitors"},
    "governor.cli": {"governor"},  # the top: it may use any room (thin wrappers)
    "monitors": {"monitors", "cgroups", "cgroups_v1"},
    "cgroups": {"cgroups"},
    "cgroups_v1": {"cgroups_v1", "cgroups"},  # the v1 layer shares the v2 layer's errors and parsers
    "governor": {"governor"},  # governor/__init__.py
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def source_files() -> dict[str, Path]:
    return {module_name(p): p for pkg in PACKAGES for p in (REPO / pkg).rglob("*.py")}


MODULES = source_files()


def _type_checking_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def imports_of(name: str, top_level_only: bool = False) -> set[str]:
    """Every module ``name`` imports (absolute names; ``from a import b`` gives ``a.b`` when
    that is a module of ours, else ``a``); with ``top_level_only`` just those that run when it
    is imported (not those inside its functions)."""
    tree = ast.parse(MODULES[name].read_text())
    is_package = MODULES[name].name == "__init__.py"
    found: set[str] = set()

    def walk(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if _type_checking_block(child) or (top_level_only and isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))):
                continue
            if isinstance(child, ast.Import):
                found.update(alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = name.split(".") if is_package else name.split(".")[:-1]
                    base = base[: len(base) - child.level + 1]
                    parent = ".".join(base + ([child.module] if child.module else []))
                else:
                    parent = child.module
                for alias in child.names:
                    full = f"{parent}.{alias.name}"
                    found.add(full if full in MODULES else parent)
            walk(child)

    walk(tree)
    return found - {"__future__"}


def packages_of(name: str) -> set[str]:
    """The package ``__init__`` modules importing ``name`` runs first (``a`` and ``a.b`` for ``a.b.c``)."""
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts))} & set(MODULES)


def closure(start: str) -> dict[str, str]:
    """Every module importing ``start`` brings in, transitively → the project module that
    imports it. A module named in an import counts with all its imports (its functions'
    too: calling them runs them); a package that only runs on the way to a submodule counts
    with its top-level imports."""
    seen: dict[str, str] = {}
    todo: list[tuple[str, bool]] = [(p, True) for p in packages_of(start)] + [(start, False)]
    while todo:
        current, top_level_only = todo.pop()
        for imported in imports_of(current, top_level_only):
            ours = imported.split(".")[0] in PACKAGES
            for module, implicit in ([(p, True) for p in packages_of(imported)] if ours else []) + [(imported, False)]:
                if module not in seen and module != start:
                    seen[module] = current
                    if module in MODULES:
                        todo.append((module, implicit))
    return seen


def room_of(name: str) -> str:
    return max((room for room in ALLOWED if name == room or name.startswith(room + ".")), key=len)


def allowed(importer: str, imported: str) -> bool:
    return any(imported == room or imported.startswith(room + ".") for room in ALLOWED[room_of(importer)])


def _is(module: str, names: tuple[str, ...]) -> bool:
    return any(module == n or module.startswith(n + ".") for n in names)


def violations_of_purity() -> list[str]:
    out = []
    for name in sorted(MODULES):
        if not _is(name, PURE_ROOMS):
            continue
        for module, via in sorted(closure(name).items()):
            if _is(module, IO_MODULES) or _is(module, IO_LIBRARIES):
                out.append(f"{name} imports {module} (through {via})")
    return out


def violations_of_direction() -> list[str]:
    out = []
    for name in sorted(MODULES):
        for imported in sorted(imports_of(name)):
            if imported.split(".")[0] in PACKAGES and not allowed(name, imported):
                out.append(f"{name} ({room_of(name)}) imports {imported}")
    return out


def test_the_pure_rooms_import_nothing_that_does_io():
    assert violations_of_purity() == []


def test_imports_point_down_the_layers():
    assert violations_of_direction() == []


def test_the_checker_sees_a_violation(tmp_path, monkeypatch):
    """The rule is not vacuous: a lazy ``import subprocess`` in a pure module, or a control
    module importing the service room, is found."""
    fake = tmp_path / "demand.py"
    fake.write_text("def probe():\n    import subprocess\n    from governor.service import daemon\n")
    monkeypatch.setitem(MODULES, "governor.control.demand", fake)
    assert any("subprocess" in v for v in violations_of_purity())
    assert "governor.control.demand (governor.control) imports governor.service.daemon" in violations_of_direction()


@pytest.mark.parametrize("room", ["fairness", "control", "config", "enforce", "shaping", "service", "offline", "cli"])
def test_every_room_is_a_folder_with_an_index(room):
    index = REPO / "governor" / room / "__init__.py"
    assert index.exists() and ast.get_docstring(ast.parse(index.read_text()))


def test_importing_the_control_loop_loads_no_io_module():
    """The same rule, observed: a fresh interpreter that imports the loop has none of them loaded."""
    import subprocess
    import sys

    banned = [m for m in IO_MODULES + IO_LIBRARIES if not m.startswith("governor.") or m.count(".") > 1]
    code = ("import sys; import governor.control.loop, governor.fairness.alternatives; "
            f"print(sorted(m for m in sys.modules if any(m == b or m.startswith(b + '.') for b in {banned!r})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "[]"
