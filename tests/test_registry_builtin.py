"""The registry's built-in table (loaded without scanning installed metadata) is the package's own
``estimator.fabrics`` entry points."""

import tomllib
from pathlib import Path

from estimator.fabrics import registry


def test_builtin_table_is_the_pyproject_entry_points():
    doc = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    assert registry.BUILTIN == doc["project"]["entry-points"][registry.GROUP]


def test_every_builtin_loads_and_is_listed():
    for name in registry.BUILTIN:
        assert registry.fabric_class(name).name == name
    assert set(registry.BUILTIN) <= set(registry.available())
