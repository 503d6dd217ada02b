"""`estimator --help` and bare `estimator` list every command without importing any of them
(issue #27: importing all 14 took 4.8 s on a loaded machine, matplotlib among them)."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

from estimator import cli
from tests.conftest import REPO

HEAVY = ("matplotlib", "ray", "duckdb", "polars", "torch", "hydra", "omegaconf", "numpy", "pyarrow")


def test_help_lines_read_from_source_equal_each_module_help():
    commands = cli._commands()
    assert {"estimate", "sweep", "report", "capture", "import"} <= set(commands)
    for name, source in commands.items():
        assert cli.help_line(source) == importlib.import_module(f"estimator.commands.{name}").HELP, name


def test_help_line_of_a_module_without_one(tmp_path):
    (tmp_path / "x.py").write_text('"""doc"""\nVALUE = 1\n')
    (tmp_path / "y.py").write_text("HELP = 'it\\'s quoted'  # comment\n")
    assert cli.help_line(tmp_path / "x.py") == "(no help line)"
    assert cli.help_line(tmp_path / "y.py") == "it's quoted"
    assert cli.help_line(tmp_path / "missing.py") == "(no help line)"


@pytest.mark.parametrize("argv", [["--help"], [], ["help"], ["estimate", "--help"]])
def test_help_imports_no_command_module_but_the_one_asked(argv):
    code = (f"import sys, json\nfrom estimator.cli import run\nrun({argv!r})\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('estimator.commands.') "
            f"or m.split('.')[0] in {HEAVY!r})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stderr
    *printed, loaded = out.stdout.strip().splitlines()
    imported = json.loads(loaded)
    expected = ["estimator.commands.estimate"] if argv[:1] == ["estimate"] else []
    assert [m for m in imported if m.startswith("estimator.commands.")] == expected
    if not argv[1:]:
        assert not [m for m in imported if m.split(".")[0] in HEAVY], imported
        assert any(line.startswith("  estimate ") for line in printed)
