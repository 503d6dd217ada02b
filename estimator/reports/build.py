"""Build ``reports/index.html`` (static: open it in a browser, no server) from the DuckDB store.

Each section of :mod:`estimator.reports.sections` contributes figures (PNG + SVG written to
``reports/figures/``, with the SQL beside them as ``<name>.sql``), tables and claim rows. A
section whose tables are not in the store yet is listed as "no results yet" rather than failing,
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
import re
import time
from pathlib import Path

import duckdb
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import polars as pl  # noqa: E402

from estimator import __version__  # noqa: E402
from estimator.files import atomic_dir, atomic_path, write_atomic  # noqa: E402
from estimator.reports import claims as claim_rows  # noqa: E402
from estimator.reports.model import Section  # noqa: E402
from estimator.reports.registry import sections  # noqa: E402
from estimator.store.duckdb_store import connect  # noqa: E402

CSS = """
body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
h1{border-bottom:2px solid #444} h2{margin-top:2em;border-bottom:1px solid #aaa}
figure{margin:1em 0} figure img{max-width:100%;border:1px solid #ddd}
details pre{background:#f6f6f6;padding:.5em;overflow-x:auto;font-size:85%}
.scroll{max-width:100%;max-height:80vh;overflow:auto;margin:.5em 0;border-bottom:1px solid #ccc} .scroll table{margin:0}
table{border-collapse:collapse;font-size:90%} td,th{border:1px solid #ccc;padding:3px 8px;vertical-align:top}
td{max-width:28em;overflow-wrap:break-word} td.wide{min-width:13em} td.txt{min-width:8em} td{font-variant-numeric:tabular-nums}
th{background:#eee;position:sticky;top:0} .ok{color:#080;font-weight:bold} .no{color:#b00;font-weight:bold}
.na{color:#777} .mid{color:#a60;font-weight:bold} td details summary{cursor:pointer;color:#225}
.v-holds{background:#dff3df;color:#063;font-weight:bold} .v-fails{background:#fbe0e0;color:#900;font-weight:bold}
.v-simplified{background:#fff1cc;color:#850;font-weight:bold}
.v-paper-inconsistent{background:#e8e2f6;color:#539;font-weight:bold} .v-no-data{background:#eee;color:#777}
nav a{margin-right:1em}
"""

#: verdicts with a colour of their own (CSS classes ``v-<verdict>``): verdict cells and count columns
VERDICT_CLASSES = ("holds", "fails", "simplified", "paper-inconsistent", "no-data")


#: cells longer than this many characters collapse into a <details> showing their start
LONG_CELL = 400
#: cells longer than this many characters (phrases: hardware, layouts) get a minimum width
SHORT_CELL = 24
#: a link's visible text is cut to this many characters (the full address is its href)
LINK_TEXT = 40


def _table_html(df: pl.DataFrame, max_rows: int = 60) -> str:
    """An HTML table in a box never wider than the page nor taller than 80 % of the window: it
    scrolls both ways inside the box, so a wide table's sideways scrollbar is always in view and its
    header row stays on top (sticky); long text collapsed (:data:`LONG_CELL`), links shortened
    (:data:`LINK_TEXT`)."""
    head = "".join(f"<th>{html.escape(c)}</th>" for c in df.columns)
    body = []
    for row in df.head(max_rows).iter_rows():
        cells = "".join(_verdict_td(c, v) or _td(v) for c, v in zip(df.columns, row, strict=True))
        body.append(f"<tr>{cells}</tr>")
    more = f"<p>({df.height - max_rows} more rows; the SQL below gives them all)</p>" if df.height > max_rows else ""
    return f"<div class='scroll'><table><tr>{head}</tr>{''.join(body)}</table></div>{more}"


def _verdict_td(column: str, v: object) -> str | None:
    """A coloured cell for a verdict (column ``verdict``) or a non-zero count of one (a column named
    after a verdict, as in the per-paper summary); None for any other cell."""
    if column == "verdict" and v in VERDICT_CLASSES:
        return f"<td class='v-{v}'>{html.escape(str(v))}</td>"
    if column in VERDICT_CLASSES and isinstance(v, int) and v > 0:
        return f"<td class='v-{column}'>{v}</td>"
    return None


def _td(v: object) -> str:
    """A cell; prose (over 80 characters) is given room to be read, a phrase (over :data:`SHORT_CELL`
    characters) a little room, so a wide table's rows stay a few lines tall (numbers use tabular digits)."""
    raw = _fmt(v)
    if len(raw) > 80:
        return f"<td class='wide'>{_cell(v)}</td>"
    if len(raw) > SHORT_CELL:  # a phrase (hardware, layout): a few lines, not one word per line
        return f"<td class='txt'>{_cell(v)}</td>"
    return f"<td>{_cell(v)}</td>"


def _cell(v: object) -> str:
    """A table cell: escaped text; a URL becomes a short link (e.g. a validation row's source),
    text longer than :data:`LONG_CELL` a <details> whose summary is its beginning."""
    raw = _fmt(v)
    first, _, rest = raw.partition(" ")
    if first.startswith(("https://", "http://")):
        shown = first.split("://", 1)[1]
        shown = shown if len(shown) <= LINK_TEXT else shown[: LINK_TEXT - 1] + "…"
        link = f"<a href='{html.escape(first)}'>{html.escape(shown)}</a>"  # the browser shows the href on hover
        return link + (" " + html.escape(rest) if rest else "")
    return _long_text(raw)


def _long_text(raw: str) -> str:
    """Escaped ``raw``; beyond :data:`LONG_CELL` characters, collapsed behind its first words."""
    if len(raw) <= LONG_CELL:
        return html.escape(raw)
    cut = raw[:LONG_CELL // 2].rsplit(" ", 1)[0] or raw[:LONG_CELL // 2]
    return (f"<details><summary>{html.escape(cut)} … ({len(raw):,} characters)</summary>"
            f"{html.escape(raw)}</details>")


def _fmt(v: object) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return "" if v is None else str(v)


def _claims_html(claims: list[dict]) -> str:
    """A section's claim rows (dicts with the ``claims`` table's columns): the statement with the
    paper's sentence, both numbers, the coloured verdict, the rule with its tolerance, the reason and
    any derivation; rows judged under a non-default reading say which."""
    rows = []
    for c in claims:
        where = f" <i>({html.escape(c['section'])})</i>" if c["section"] else ""
        quote = f"<br><q>{_long_text(c['quote'])}</q>" if c["quote"] else ""
        reading = "" if not c["reading"] else (f"<br><small>reading: {html.escape(c['reading'])}"
                                                 f"{' (default)' if c['default_reading'] else ''}</small>")
        rule = (f"<b>{html.escape(c['rule'])}</b>: {html.escape(c['tolerance'])}" if c["rule"] else "")
        derivation = f"<br><b>derivation</b>: {_long_text(c['derivation'])}" if c["derivation"] else ""
        verdict = c["verdict"]
        rows.append(
            f"<tr><td class='wide'>{html.escape(c['statement'])}{where}{quote}{reading}</td>"
            f"<td class='txt'>{html.escape(c['paper_value'])}</td><td class='txt'>{_long_text(c['project_value'])}</td>"
            f"<td class='v-{verdict if verdict in VERDICT_CLASSES else 'no-data'}'>{html.escape(verdict)}</td>"
            f"<td class='txt'>{rule}</td><td class='wide'>{_long_text(c['reason'])}{derivation}</td></tr>"
        )
    return (
        "<div class='scroll'><table><tr><th>paper's claim</th><th>paper</th><th>project</th><th>verdict</th>"
        "<th>rule and tolerance</th><th>reason</th></tr>" + "".join(rows) + "</table></div>"
    )


#: 12 distinguishable colours, one per fabric (matplotlib's tab10 has only 10, so two fabrics
#: shared a colour): tab10 plus black and olive-brown, in a fixed order.
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf", "#000000", "#a6761d"]


#: one marker per series (with the palette: a series stays identifiable where lines coincide)
MARKERS = ["o", "s", "^", "v", "D", "P", "X", "<", ">", "*", "h", "p"]


def _compact(v: float, binary: bool = True) -> str:
    """A log-axis tick label: numbers up to 1024 as they are (GPU counts), larger powers of two
    with binary prefixes (1Ki, 32Mi, 1Gi) when ``binary`` (byte axes), anything else in 3
    significant digits (1e+06 -> 1M; 2048 Gb/s stays 2048, not "2Ki")."""
    if v <= 0:
        return f"{v:g}"
    if v <= 1024 or (not binary and v < 1e5):
        return f"{v:g}"
    for prefix, unit in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if binary and v >= unit and float(v / unit).is_integer():
            return f"{v / unit:g}{prefix}"
    for prefix, unit in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if v >= unit:
            return f"{v / unit:.3g}{prefix}"
    return f"{v:g}"


def _thin_log_ticks(axis, lo: float, hi: float, base: float, binary: bool = True) -> None:
    """At most 9 labelled major ticks on a log axis (a 2^9..2^30 byte axis had 22 overlapping labels)."""
    import math

    from matplotlib.ticker import FixedLocator, FuncFormatter

    if lo <= 0 or hi <= lo:
        return
    k0, k1 = math.ceil(math.log(lo, base) - 1e-9), math.floor(math.log(hi, base) + 1e-9)
    step = max(1, math.ceil((k1 - k0 + 1) / 9))
    axis.set_major_locator(FixedLocator([base**k for k in range(k0, k1 + 1, step)]))
    axis.set_major_formatter(FuncFormatter(lambda v, _: _compact(v, binary)))


def _si(v: float) -> str:
    """A linear-axis tick label for large values: 250k, 1.5M, 2G (0 stays 0)."""
    for prefix, unit in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= unit:
            return f"{v / unit:.3g}{prefix}"
    return f"{v:g}"


def _plain(v: float) -> str:
    """A tick label without mathtext powers: 0.001 .. 99999 as plain numbers, larger ones with an SI
    prefix as on the x axes (100k, 1M: a scatter's two axes read alike), smaller ones as 1e-04."""
    if abs(v) >= 1e5:
        return _si(v)
    return f"{v:g}" if 1e-3 <= abs(v) else f"{v:.0e}"


def _log10_ticks(axis, lo: float, hi: float) -> None:
    """Labels on a base-10 log axis: plain decades (0.1, 1, 10, not 10⁻¹); 1-2-5 steps under ~2.5
    decades; and on a short range (a speedup axis from 0.7 to 1.02, where no 1-2-5 tick but 1 falls)
    every 0.1-, 1- or 10-step, so at least three labels show."""
    import math

    from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator

    if not (0 < lo < hi):
        return
    if hi / lo >= 300:
        axis.set_major_locator(LogLocator(base=10))
    elif sum(lo <= m * 10.0**k <= hi for k in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
             for m in (1, 2, 5)) >= 3:
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    else:
        k0, k1 = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
        ticks = [m * 10.0**k for k in range(k0, k1 + 1) for m in range(1, 10) if lo <= m * 10.0**k <= hi]
        if len(ticks) < 3:  # within one step of the 1..9 grid: five even steps
            ticks = [lo + (hi - lo) * i / 4 for i in range(5)]
            axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.3g}"))
            axis.set_major_locator(FixedLocator(ticks))
            return
        axis.set_major_locator(FixedLocator(ticks))
    axis.set_major_formatter(FuncFormatter(lambda v, _: _plain(v)))


def _distinguish_lines(ax) -> None:
    """Give every data series its own marker, and draw earlier series wider than later ones, so
    series that coincide (two policies at speedup 1.0, ring on two fabrics) all stay visible."""
    lines = [ln for ln in ax.get_lines() if not ln.get_label().startswith("_") and len(ln.get_xdata()) > 1]
    n = len(lines)
    if n < 2:
        return
    for i, line in enumerate(lines):
        width = 1.0 + 1.6 * (n - 1 - i) / (n - 1)
        line.set_linewidth(width)
        if line.get_marker() not in (None, "None", "", " "):
            line.set_marker(MARKERS[i % len(MARKERS)])
            line.set_markersize(3 + 3 * (n - 1 - i) / (n - 1))
            line.set_markerfacecolor("none" if i % 2 else line.get_color())


def _polish(ax) -> None:
    """Shared figure conventions: thinned, readable tick labels on log axes (no "6×10⁻¹" minor
    clutter, 1Mi not 1048576), a dashed y = 1 reference line on speedup/ratio charts, distinct
    markers and widths so overlapping series stay visible, and legends outside the data area."""
    from matplotlib.ticker import FuncFormatter, NullFormatter, ScalarFormatter

    _distinguish_lines(ax)
    for axis, scale, (lo, hi) in ((ax.xaxis, ax.get_xscale(), ax.get_xlim()), (ax.yaxis, ax.get_yscale(), ax.get_ylim())):
        if scale == "log":
            axis.set_minor_formatter(NullFormatter())
            base = getattr(axis.get_transform(), "base", 10)
            name = (axis.get_label_text() or "").lower()
            binary = "byte" in name or "(b)" in name or "buffer" in name  # Ki/Mi/Gi only for sizes
            if axis is ax.xaxis or base == 2:
                _thin_log_ticks(axis, lo, hi, base, binary)
            else:
                _log10_ticks(axis, lo, hi)
            axis.set_view_interval(lo, hi, ignore=True)  # fixed tick lists must not widen the axis
        elif scale == "linear" and type(axis.get_major_formatter()) is ScalarFormatter and max(abs(lo), abs(hi)) >= 1e5:
            axis.set_major_formatter(FuncFormatter(lambda v, _: _si(v)))  # 1.5M, not "1.5" under a "1e6" offset
    label = (ax.get_ylabel() or "").lower()
    lo, hi = ax.get_ylim()
    ratio = re.search(r"\b(speedup|relative|ratio)\b", label) or " / " in label or "(x)" in label
    if ratio and lo < 1 < hi:  # not "iteration"
        ax.axhline(1.0, color="#444", lw=0.8, ls="--", zorder=0, label="_y=1")
    legend = ax.get_legend()
    if legend is not None and getattr(legend, "_bbox_to_anchor", None) is not None:
        return  # the section placed it outside the axes itself
    if legend is not None and len(legend.get_texts()) > 3:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    elif legend is not None:
        ax.legend(loc="best", fontsize=7, framealpha=0.85)


def _figure_html(fig, df: pl.DataFrame, fig_dir: Path) -> str:
    f, ax = plt.subplots(figsize=(7, 4.2))
    try:
        with plt.rc_context({"axes.prop_cycle": matplotlib.cycler(color=PALETTE)}):
            ax.set_prop_cycle(color=PALETTE)
            fig.plot(df, ax)
        _polish(ax)
        ax.set_title(fig.title, fontsize=10)
        f.tight_layout()
        for ext in ("png", "svg"):
            with atomic_path(fig_dir / f"{fig.name}.{ext}") as tmp:
                f.savefig(tmp, dpi=120, bbox_inches="tight")  # keeps a legend placed outside
    finally:
        plt.close(f)
    write_atomic(fig_dir / f"{fig.name}.sql", fig.sql.strip() + "\n")
    with atomic_path(fig_dir / f"{fig.name}.csv") as tmp:
        df.write_csv(tmp)
    return (
        f"<figure><img src='figures/{fig.name}.png' alt='{html.escape(fig.title)}'>"
        f"<figcaption>{html.escape(fig.caption)}</figcaption></figure>"
        f"<details><summary>Data plotted ({df.height} rows; figures/{fig.name}.csv)</summary>"
        f"{_table_html(df, max_rows=200)}</details>"
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


def _section_html(sec: Section, q, fig_dir: Path, claims: list[dict]) -> list[str]:
    parts: list[str] = []
    if sec.claims is not None:
        mine = [c for c in claims if c["paper"] == sec.title]
        parts.append("<h3>Claims</h3>" + (_claims_html(mine) if mine else
                                            "<p class='na'>No claim rows (run <code>estimator claims</code>).</p>"))
    for fig in sec.figures:
        df = _optional(q, fig.sql)
        if df is None or df.is_empty():
            parts.append(f"<p class='na'>{html.escape(fig.title)}: no rows yet.</p>")
        else:
            parts.append(_figure_html(fig, df, fig_dir))
    for tab in sec.tables:
        df = _optional(q, tab.sql)
        parts.append(f"<h3>{html.escape(tab.title)}</h3>")
        if df is None:
            parts.append("<p class='na'>No rows yet (its table is not in the store).</p>")
            continue
        if tab.caption:
            parts.append(f"<p>{html.escape(tab.caption)}</p>")
        parts.append(_table_html(df))
        parts.append(f"<details><summary>SQL</summary><pre>{html.escape(tab.sql.strip())}</pre></details>")
    return parts


def build_report(store: str | Path, out_dir: str | Path = "reports", progress=None) -> Path:
    """Render every section into ``out_dir/index.html``; returns the page's path.

    A section whose results are not (all) in the store says so on the page instead of failing
    the build: the page can be made after any subset of the experiments. ``progress(message)``,
    when given, is told as each section finishes (and how long it took)."""
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
            state = "done"
            if missing:
                parts.append(f"<p class='na'>No results yet (missing tables: {', '.join(missing)}).</p>")
                state = f"no results yet (missing {', '.join(missing)})"
            else:
                try:
                    parts.extend(_section_html(sec, q, fig_dir, claims))
                except duckdb.Error as exc:  # e.g. a column of an experiment that has not run yet
                    first = str(exc).splitlines()[0]
                    parts.append(f"<p class='na'>Results incomplete for this section ({html.escape(first)}).</p>")
                    state = "incomplete"
            if progress is not None:
                progress(f"report [{k}/{len(todo)}] {sec.key}: {state}, {time.perf_counter() - t0:.1f} s "
                         f"({time.perf_counter() - started:.0f} s so far)")
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    page = (
        "<!doctype html><html><head><meta charset='utf-8'><title>Interconnect training estimates</title>"
        f"<style>{CSS}</style></head><body><h1>Training-performance estimates across interconnects</h1>"
        f"<p>estimator {html.escape(__version__)} · built {stamp} from <code>{html.escape(str(store))}</code>. "
        "Every number below is computed from the DuckDB store by the SQL shown with it.</p>"
        f"<nav>{''.join(nav)}</nav>{''.join(parts)}</body></html>"
    )
    return write_atomic(out_dir / "index.html", page)
