"""Build ``reports/index.html`` (static: open it in a browser, no server) from the DuckDB store.

Each section of :mod:`estimator.reports.sections` contributes figures, tables and claim rows. A
figure is drawn once (:mod:`estimator.reports.render`) into an SVG that the page shows inline —
hover a point for its values, click a legend entry to hide or show its series — and that is
written to ``reports/figures/<name>.svg`` with the SQL (``<name>.sql``) and the plotted rows
(``<name>.csv``) beside it; :mod:`estimator.reports.figure_checks` checks every drawn figure and
the build reports what it finds. Tables read in words and units (:mod:`estimator.reports.tables`).
A section whose tables are not in the store yet is listed as "no results yet" rather than failing,
so the page can be built after any subset of the sweeps.

The store is opened read-only: the report never writes it. Claim rows come from the store's
``claims`` table (``estimator claims`` writes it; the pipeline runs that first); a store without
one gets the same rows computed in memory (:mod:`estimator.reports.claims`), and the page says so.

The build is atomic as a whole: figures are drawn into a hidden temporary folder that replaces
``figures/`` in one rename once every section is done, then ``index.html`` is replaced; a killed
build leaves the previous report intact, and its temporary folder is removed by the next build.
"""

from __future__ import annotations

import html
import time
from pathlib import Path

import duckdb
import polars as pl

from estimator import __version__
from estimator.files import atomic_dir, atomic_path, write_atomic
from estimator.reports import claims as claim_rows
from estimator.reports import figure_checks, render
from estimator.reports.model import Figure, Section
from estimator.reports.registry import sections
from estimator.reports.render import drawn, hover_json, inline_svg
from estimator.reports.tables import claims_html, table_html
from estimator.store.duckdb_store import connect

CSS = """
body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
h1{border-bottom:2px solid #444} h2{margin-top:2em;border-bottom:1px solid #aaa}
figure{margin:1em 0} figure img{max-width:100%;border:1px solid #ddd}
details pre{background:#f6f6f6;padding:.5em;overflow-x:auto;font-size:85%}
.scroll{max-width:100%;max-height:80vh;overflow:auto;margin:.5em 0;border-bottom:1px solid #ccc} .scroll table{margin:0}
table{border-collapse:collapse;font-size:90%} td,th{border:1px solid #ccc;padding:3px 8px;vertical-align:top}
td{max-width:28em;overflow-wrap:break-word} td.wide{min-width:13em} td.txt{min-width:12em} td{font-variant-numeric:tabular-nums}
td.num{text-align:right;white-space:nowrap} th.num{text-align:right}
th{background:#eee;position:sticky;top:0} .ok{color:#080;font-weight:bold} .no{color:#b00;font-weight:bold}
.na{color:#777} .mid{color:#a60;font-weight:bold} td details summary{cursor:pointer;color:#225}
.v-holds{background:#dff3df;color:#063;font-weight:bold} .v-fails{background:#fbe0e0;color:#900;font-weight:bold}
.v-simplified{background:#fff1cc;color:#850;font-weight:bold}
.v-paper-inconsistent{background:#e8e2f6;color:#539;font-weight:bold} .v-no-data{background:#eee;color:#777}
nav a{margin-right:1em}
""" + render.CSS

#: under every figure: what the reader can do with it
HINT = ("(Hover a point for its values; click a legend entry to hide or show its series, double-click to show it "
        "alone. A series hidden under another is drawn wider, with hollow rings around the other's markers.)")


def _figure_html(fig: Figure, df: pl.DataFrame, fig_dir: Path, problems: list[str]) -> str:
    """The figure drawn once (an SVG, written to ``figures/<name>.svg`` and shown inline, with its
    tooltips and legend toggles), its SQL and plotted rows beside it; anything
    :mod:`~estimator.reports.figure_checks` finds is appended to ``problems`` and noted under it."""
    with drawn(fig, df) as d:
        found = [f"{fig.name}: {p}" for p in figure_checks.problems(d.figure)]
        svg, series = d.svg, d.series
    problems.extend(found)
    write_atomic(fig_dir / f"{fig.name}.svg", svg)
    write_atomic(fig_dir / f"{fig.name}.sql", fig.sql.strip() + "\n")
    with atomic_path(fig_dir / f"{fig.name}.csv") as tmp:
        df.write_csv(tmp)
    note = "".join(f"<p class='na'>Figure check: {html.escape(p)}</p>" for p in found)
    return (
        f"<figure class='plot' id='fig-{fig.name}'>{inline_svg(svg)}<div class='tip' hidden></div>"
        f"<script type='application/json'>{hover_json(fig.name, series)}</script>"
        f"<figcaption>{html.escape(fig.caption)} <span class='hint'>{HINT}</span></figcaption></figure>{note}"
        f"<details><summary>Data plotted ({df.height} rows; figures/{fig.name}.csv)</summary>"
        f"{table_html(df, max_rows=200, formats=fig.formats)}</details>"
        f"<details><summary>SQL for this figure (figures/{fig.name}.sql)</summary>"
        f"<pre>{html.escape(fig.sql.strip())}</pre></details>"
    )


def _optional(q, sql: str) -> pl.DataFrame | None:
    """``q(sql)``, or None when the SQL reads a table the store does not have yet (an experiment's
    optional study, e.g. the packet-level sweeps); other errors propagate."""
    try:
        return q(sql)
    except duckdb.CatalogException:
        return None


def _section_html(sec: Section, q, fig_dir: Path, claims: list[dict], problems: list[str]) -> list[str]:
    parts: list[str] = []
    if sec.claims is not None:
        mine = [c for c in claims if c["paper"] == sec.title]
        parts.append("<h3>Claims</h3>" + (claims_html(mine) if mine else
                                            "<p class='na'>No claim rows (run <code>estimator claims</code>).</p>"))
    for fig in sec.figures:
        df = _optional(q, fig.sql)
        if df is None or df.is_empty():
            parts.append(f"<p class='na'>{html.escape(fig.title)}: no rows yet.</p>")
        else:
            parts.append(_figure_html(fig, df, fig_dir, problems))
    for tab in sec.tables:
        df = _optional(q, tab.sql)
        parts.append(f"<h3>{html.escape(tab.title)}</h3>")
        if df is None:
            parts.append("<p class='na'>No rows yet (its table is not in the store).</p>")
            continue
        if tab.caption:
            parts.append(f"<p>{html.escape(tab.caption)}</p>")
        parts.append(table_html(df, formats=tab.formats))
        parts.append(f"<details><summary>SQL</summary><pre>{html.escape(tab.sql.strip())}</pre></details>")
    return parts


def build_report(store: str | Path, out_dir: str | Path = "reports", progress=None) -> Path:
    """Render every section into ``out_dir/index.html``; returns the page's path.

    A section whose results are not (all) in the store says so on the page instead of failing
    the build: the page can be made after any subset of the experiments. ``progress(message)``,
    when given, is told as each section finishes (and how long it took) and of every problem the
    figure checks find."""
    out_dir = Path(out_dir)
    started = time.perf_counter()
    parts: list[str] = []
    nav: list[str] = []
    with connect(store, read_only=True) as con, atomic_dir(out_dir / "figures") as fig_dir:
        tables = claim_rows.tables(con)
        claims = claim_rows.stored(con)
        source = "the store's <code>claims</code> table (written by <code>estimator claims</code>)"
        if claims is None:  # no (current) claims table: the same rows, computed here, written nowhere
            claims = claim_rows.collect(con)
            claim_rows.as_relation(con, claims)
            tables.add("claims")
            source = ("rows computed while building this page (the store has no current <code>claims</code> table; "
                      "<code>estimator claims</code> writes it)")

        def q(sql: str) -> pl.DataFrame:
            return con.sql(sql).pl()

        todo = sections()
        for k, sec in enumerate(todo, 1):
            t0 = time.perf_counter()
            nav.append(f"<a href='#{sec.key}'>{html.escape(sec.title)}</a>")
            parts.append(f"<h2 id='{sec.key}'>{html.escape(sec.title)}</h2>")
            if sec.intro:
                parts.append(f"<p>{sec.intro}</p>")
            if sec.key == "claims":
                parts.append(f"<p>Claim rows: {source}.</p>")
            missing = [t for t in sec.needs_tables if t not in tables]
            state, problems = "done", []
            if missing:
                parts.append(f"<p class='na'>No results yet (missing tables: {', '.join(missing)}).</p>")
                state = f"no results yet (missing {', '.join(missing)})"
            else:
                try:
                    parts.extend(_section_html(sec, q, fig_dir, claims, problems))
                except duckdb.Error as exc:  # e.g. a column of an experiment that has not run yet
                    first = str(exc).splitlines()[0]
                    parts.append(f"<p class='na'>Results incomplete for this section ({html.escape(first)}).</p>")
                    state = "incomplete"
            if progress is not None:
                progress(f"report [{k}/{len(todo)}] {sec.key}: {state}, {time.perf_counter() - t0:.1f} s "
                         f"({time.perf_counter() - started:.0f} s so far)")
                for problem in problems:
                    progress(f"report: figure check: {problem}")
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    page = (
        "<!doctype html><html><head><meta charset='utf-8'><title>Interconnect training estimates</title>"
        f"<style>{CSS}</style></head><body><h1>Training-performance estimates across interconnects</h1>"
        f"<p>estimator {html.escape(__version__)} · built {stamp} from <code>{html.escape(str(store))}</code>. "
        "Every number below is computed from the DuckDB store by the SQL shown with it.</p>"
        f"<nav>{''.join(nav)}</nav>{''.join(parts)}<script>{render.SCRIPT}</script></body></html>"
    )
    return write_atomic(out_dir / "index.html", page)
