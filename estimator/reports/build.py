"""Build ``reports/index.html`` (static: open it in a browser, no server) from the DuckDB store.

Each section of :mod:`estimator.reports.sections` contributes figures (PNG + SVG written to
``reports/figures/``, with the SQL beside them as ``<name>.sql``), tables and claim rows. A
section whose tables are not in the store yet is listed as "no results yet" rather than failing,
so the page can be built after any subset of the sweeps.
"""

from __future__ import annotations

import html
import importlib
import pkgutil
import time
from pathlib import Path

import duckdb
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import polars as pl  # noqa: E402

from estimator import __version__  # noqa: E402
from estimator.files import atomic_path, write_atomic  # noqa: E402
from estimator.reports.model import Claim, Section  # noqa: E402
from estimator.reports.sections.claims import write_claims  # noqa: E402
from estimator.store.duckdb_store import connect  # noqa: E402

CSS = """
body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
h1{border-bottom:2px solid #444} h2{margin-top:2em;border-bottom:1px solid #aaa}
figure{margin:1em 0} figure img{max-width:100%;border:1px solid #ddd}
details pre{background:#f6f6f6;padding:.5em;overflow-x:auto;font-size:85%}
table{border-collapse:collapse;margin:.5em 0;font-size:90%} td,th{border:1px solid #ccc;padding:3px 8px}
th{background:#eee} .ok{color:#080;font-weight:bold} .no{color:#b00;font-weight:bold} .na{color:#777}
.mid{color:#a60;font-weight:bold}
nav a{margin-right:1em}
"""


def sections() -> list[Section]:
    import estimator.reports.sections as pkg

    found = []
    for mod in pkgutil.iter_modules(pkg.__path__):
        module = importlib.import_module(f"estimator.reports.sections.{mod.name}")
        if hasattr(module, "SECTION"):
            found.append(module.SECTION)
    return sorted(found, key=lambda s: (s.order, s.key))


def _table_html(df: pl.DataFrame, max_rows: int = 60) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in df.columns)
    body = []
    for row in df.head(max_rows).iter_rows():
        cells = "".join(f"<td>{_cell(v)}</td>" for v in row)
        body.append(f"<tr>{cells}</tr>")
    more = f"<p>({df.height - max_rows} more rows)</p>" if df.height > max_rows else ""
    return f"<table><tr>{head}</tr>{''.join(body)}</table>{more}"


def _cell(v: object) -> str:
    """A table cell: escaped text; a URL becomes a link (e.g. a validation row's source)."""
    text = html.escape(_fmt(v))
    return f"<a href='{text}'>{text}</a>" if text.startswith(("https://", "http://")) and " " not in text else text


def _fmt(v: object) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return "" if v is None else str(v)


def _claims_html(claims: list[Claim]) -> str:
    rows = []
    css = {"holds": "ok", "fails": "no", "no-data": "na"}
    for c in claims:
        where = f" <i>({html.escape(c.where)})</i>" if c.where else ""
        rows.append(
            f"<tr><td>{html.escape(c.paper_claim)}{where}</td><td>{html.escape(c.paper_value)}</td>"
            f"<td>{html.escape(c.project_value)}</td><td class='{css.get(c.verdict, 'mid')}'>{html.escape(c.verdict)}</td>"
            f"<td>{html.escape(c.detail)}</td></tr>"
        )
    return (
        "<table><tr><th>paper's claim</th><th>paper</th><th>project</th><th>verdict</th><th>reason</th></tr>"
        + "".join(rows)
        + "</table>"
    )


def _figure_html(fig, df: pl.DataFrame, fig_dir: Path) -> str:
    f, ax = plt.subplots(figsize=(7, 4.2))
    try:
        fig.plot(df, ax)
        ax.set_title(fig.title, fontsize=10)
        f.tight_layout()
        for ext in ("png", "svg"):
            with atomic_path(fig_dir / f"{fig.name}.{ext}") as tmp:
                f.savefig(tmp, dpi=120)
    finally:
        plt.close(f)
    write_atomic(fig_dir / f"{fig.name}.sql", fig.sql.strip() + "\n")
    return (
        f"<figure><img src='figures/{fig.name}.png' alt='{html.escape(fig.title)}'>"
        f"<figcaption>{html.escape(fig.caption)}</figcaption></figure>"
        f"<details><summary>SQL for this figure (figures/{fig.name}.sql)</summary>"
        f"<pre>{html.escape(fig.sql.strip())}</pre></details>"
    )


def _section_html(sec: Section, q, fig_dir: Path) -> list[str]:
    parts: list[str] = []
    if sec.claims is not None:
        parts.append("<h3>Claims</h3>" + _claims_html(sec.claims(q)))
    for fig in sec.figures:
        df = q(fig.sql)
        if df.is_empty():
            parts.append(f"<p class='na'>{html.escape(fig.title)}: no rows yet.</p>")
        else:
            parts.append(_figure_html(fig, df, fig_dir))
    for tab in sec.tables:
        df = q(tab.sql)
        parts.append(f"<h3>{html.escape(tab.title)}</h3>")
        if tab.caption:
            parts.append(f"<p>{html.escape(tab.caption)}</p>")
        parts.append(_table_html(df))
        parts.append(f"<details><summary>SQL</summary><pre>{html.escape(tab.sql.strip())}</pre></details>")
    return parts


def build_report(store: str | Path, out_dir: str | Path = "reports") -> Path:
    """Render every section into ``out_dir/index.html``; returns the page's path.

    A section whose results are not (all) in the store says so on the page instead of failing
    the build: the page can be made after any subset of the experiments."""
    out_dir = Path(out_dir)
    fig_dir = out_dir / "figures"
    fig_dir.mkdir(parents=True, exist_ok=True)
    parts: list[str] = []
    nav: list[str] = []
    write_claims(store)  # the `claims` table (estimator/reports/sections/claims.py), rendered at the top
    with connect(store, read_only=True) as con:
        tables = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}

        def q(sql: str) -> pl.DataFrame:
            return con.sql(sql).pl()

        for sec in sections():
            nav.append(f"<a href='#{sec.key}'>{html.escape(sec.title)}</a>")
            parts.append(f"<h2 id='{sec.key}'>{html.escape(sec.title)}</h2>")
            if sec.intro:
                parts.append(f"<p>{sec.intro}</p>")
            missing = [t for t in sec.needs_tables if t not in tables]
            if missing:
                parts.append(f"<p class='na'>No results yet (missing tables: {', '.join(missing)}).</p>")
                continue
            try:
                parts.extend(_section_html(sec, q, fig_dir))
            except duckdb.Error as exc:  # e.g. a column of an experiment that has not run yet
                first = str(exc).splitlines()[0]
                parts.append(f"<p class='na'>Results incomplete for this section ({html.escape(first)}).</p>")
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    page = (
        "<!doctype html><html><head><meta charset='utf-8'><title>Interconnect training estimates</title>"
        f"<style>{CSS}</style></head><body><h1>Training-performance estimates across interconnects</h1>"
        f"<p>estimator {html.escape(__version__)} · built {stamp} from <code>{html.escape(str(store))}</code>. "
        "Every number below is computed from the DuckDB store by the SQL shown with it.</p>"
        f"<nav>{''.join(nav)}</nav>{''.join(parts)}</body></html>"
    )
    return write_atomic(out_dir / "index.html", page)
