"""The README and the documentation site (issue #27): the README fits a screen, every `estimator`
command shown in README.md and docs/*.md composes and validates (`estimator --check`, nothing
runs), the site builds strictly (a broken link or anchor fails), and the generated store schema is
current."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys

import pytest

from estimator import cli
from estimator.errors import EstimatorError
from tests.conftest import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)


def command_lines(text: str) -> list[str]:
    """Every `estimator ...` command in the fenced code blocks of a Markdown text (continuation
    lines joined, comments dropped by the shell-like split)."""
    out = []
    for block in FENCE.findall(text):
        joined = re.sub(r"\\\n\s*", " ", block)
        out.extend(line.strip() for line in joined.splitlines() if line.strip().startswith("estimator "))
    return out


def all_commands() -> list[tuple[str, str]]:
    return [(page.name, line) for page in PAGES for line in command_lines(page.read_text(encoding="utf-8"))]


def test_readme_fits_a_screen_and_links_the_docs():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 200
    for page in ("usage", "workloads", "fabrics", "large-models", "validation", "report", "store-schema",
                 "extending", "performance", "design"):
        assert f"(docs/{page}.md)" in readme, page
    # the two set-up commands: one installs and runs the pipeline, one installs and runs the tests
    assert readme.count('pip install -c constraints.txt -e ".[capture,dev]" && snakemake --cores 2') == 1
    assert readme.count('pip install -c constraints.txt -e ".[capture,dev]" && pytest -q') == 1
    assert "open `reports/index.html`" in readme


def test_command_examples_are_found():
    commands = all_commands()
    assert len(commands) >= 40, len(commands)
    assert any(page == "README.md" for page, _ in commands)


@pytest.mark.parametrize("page, line", all_commands(), ids=lambda x: x[:60] if isinstance(x, str) else x)
def test_every_command_example_composes(page, line, capsys):
    argv = shlex.split(line, comments=True)[1:]
    argv = ["--check", *(argv[1:] if argv[:1] in (["--check"], ["--cfg"]) else argv)]
    try:
        assert cli.run(argv) == 0
    except EstimatorError as exc:
        pytest.fail(f"{page}: `{line}` no longer composes: {exc}")
    assert capsys.readouterr().out.startswith("ok: ")


def test_a_stale_example_would_fail():
    """The check above can fail: a renamed key, an unknown fabric, a missing input."""
    for line in ("estimator estimate fabric=ideal fabric.nodez=8", "estimator estimate fabric=lumorf",
                 "estimator import traces/reference/gone.kineto.json"):
        with pytest.raises(EstimatorError):
            cli.run(["--check", *shlex.split(line)[1:]])
    (line,) = command_lines("```bash\nestimator estimate \\\n  fabric=ideal  # note\n```\n")
    assert shlex.split(line, comments=True) == ["estimator", "estimate", "fabric=ideal"]


def test_the_site_builds_strictly(tmp_path):
    out = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
                         cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert (tmp_path / "site" / "usage" / "index.html").is_file()


def _tiny_site(tmp_path, page: str) -> subprocess.CompletedProcess:
    """A one-page site under the repository's link rules (its hook and validation settings)."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text(page)
    (tmp_path / "README.md").write_text("# a repository file outside docs/\n")
    validation = (REPO / "mkdocs.yml").read_text().split("\nvalidation:", 1)[1]  # the repository's rules
    (tmp_path / "mkdocs.yml").write_text(f"site_name: x\nhooks:\n  - {REPO / 'docs' / 'hooks' / 'repo_links.py'}\n"
                                         f"validation:{validation}")
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("link", ["[gone](missing.md)", "[anchor](#no-such-heading)", "[gone](../missing.md)"])
def test_a_broken_link_fails_the_strict_build(tmp_path, link):
    out = _tiny_site(tmp_path, f"# x\n\n{link}\n")
    assert out.returncode != 0, out.stdout + out.stderr
    assert link.split("(")[1].rstrip(")") in out.stdout + out.stderr


def test_a_link_to_a_repository_file_shows_its_path(tmp_path):
    out = _tiny_site(tmp_path, "# x\n\nSee [the README](../README.md).\n")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "<code>README.md</code>" in (tmp_path / "site" / "index.html").read_text()


def test_the_store_schema_page_is_current():
    """docs/store-schema.md is what `python -m estimator.schema_doc` generates now (regenerate it
    with that command after a change to a table, a column or a config parameter)."""
    from estimator.schema_doc import DOC, generate

    assert DOC.read_text(encoding="utf-8") == generate(), "run: python -m estimator.schema_doc"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_input_files_named_in_examples_exist_or_are_made(page):
    """An example reading a file (`cluster.trace=`, `fabric.topology=`) names one in the repository or
    one an earlier line of its block writes (`> FILE`): a newcomer can run the block as written."""
    for block in FENCE.findall(page.read_text(encoding="utf-8")):
        made: set[str] = set()
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            made.update(re.findall(r">\s*(\S+)", line))
            if not line.strip().startswith("estimator "):
                continue
            for value in re.findall(r"(?:cluster\.trace|fabric\.topology)=(\S+)", line):
                if value != "auto":
                    assert value in made or (REPO / value).is_file(), f"{page.name}: {line.strip()} reads {value}"
