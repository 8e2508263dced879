"""Which policy file the commands load when none is given (governor.cli.app.config_path)."""

import importlib

app = importlib.import_module("governor.cli.app")  # the module: governor.cli.app is also the Typer object


def test_a_dangling_default_policy_symlink_is_loaded_not_skipped(tmp_path, monkeypatch):
    """The audit: /etc/drfgov/drfgov.yaml as a dangling symlink (its target moved) was skipped
    by Path.exists(), and the built-in defaults governed silently. Anything at the path is
    loaded now, and fails loudly; nothing there still means the defaults."""
    default = tmp_path / "drfgov.yaml"
    monkeypatch.setattr(app, "DEFAULT_CONFIG", default)
    assert app.config_path(None) is None
    default.symlink_to(tmp_path / "moved-away.yaml")
    assert app.config_path(None) == default
    assert app.config_path(tmp_path / "given.yaml") == tmp_path / "given.yaml"
