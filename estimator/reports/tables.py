"""Tables a person reads: column headers in words with their unit, numbers in the unit that suits
the column (an iteration in ms, a message in µs, a buffer in MiB, MFU in %), right-aligned, verdicts
coloured. The CSV files beside the figures keep the raw SI values; only the page is formatted.

How a column reads is decided by its name (:func:`column_kind`): ``*_s`` is a time in seconds,
``*_ms`` / ``*_us`` times in those units, ``*_pct`` a percentage, ``bytes`` and ``*_bytes`` sizes,
``*_Bps`` / ``*_GBps`` / ``*_bps`` / ``*_Gbps`` bandwidths, names with ``speedup`` ratios, and
:data:`FRACTIONS` fractions shown as %. A table can name a column's kind itself
(:attr:`estimator.reports.model.Table.formats`). Headers come from :data:`HEADERS` or, failing
that, the name with its unit suffix dropped and underscores as spaces.

A time column gets one unit for all its cells (s, ms, µs or ns, by its median), so cells compare at a
glance; each cell keeps at least two significant digits.
"""

from __future__ import annotations

import html
import math
import statistics
from decimal import Decimal

import polars as pl

#: verdicts with a colour of their own (CSS classes ``v-<verdict>``): verdict cells and count columns
VERDICT_CLASSES = ("holds", "fails", "simplified", "paper-inconsistent", "no-data")
#: cells longer than this many characters collapse into a <details> showing their start
LONG_CELL = 400
#: cells longer than this many characters (phrases: hardware, layouts) get a minimum width
SHORT_CELL = 24
#: a link's visible text is cut to this many characters (the full address is its href)
LINK_TEXT = 40

#: column names read as a fraction and shown in %
FRACTIONS = ("mfu", "utilisation", "exposed_share", "exposed_comm_share", "bubble_share", "jct_reduction",
             "less_than_ring", "less_than_tree_unpipelined", "less_than_tree_nccl_pipelined", "loss_ratio",
             "throughput", "reduction")

#: headers in words for names the default rule would leave cryptic (unit added by the column's kind)
HEADERS = {
    "fabric_name": "fabric", "model_name": "model", "nodes": "nodes", "gpus": "GPUs",
    "iter_time_s": "iteration", "compute_time_s": "compute", "exposed_comm_time_s": "exposed communication",
    "exposed_ms": "exposed communication", "exposed_share": "exposed share of the iteration",
    "exposed_comm_share": "exposed communication share", "bubble_share": "pipeline bubble share",
    "samples_per_s": "throughput", "speedup_vs_leafspine": "speedup over the leaf-spine", "speedup": "speedup",
    "algorithm_used": "algorithm used", "per_gpu_GBps": "per-GPU bandwidth", "mfu": "MFU",
    "tp_comm_time_s": "tensor-parallel communication", "pp_p2p_time_s": "pipeline sends",
    "dp_exposed_time_s": "data-parallel exposed communication", "tp_saved_s": "TP time saved",
    "pp_saved_s": "PP time saved", "dp_saved_s": "DP time saved", "helps_most": "helps most", "memory_gb": "memory",
    "paper_value": "paper's number", "project_value": "project's number", "default_reading": "default reading",
    "default": "default reading", "above_bound_pct": "slower than the bound", "margin_pct": "margin over the bound",
    "bound_holds": "bound holds", "bound_GBps": "bound's per-GPU bandwidth", "bound_s": "bound's iteration",
    "fastest_other": "fastest other fabric / algorithm", "fastest_other_s": "its iteration",
    "k_best": "best depth", "k_best_brute_force": "best depth (brute force)", "min_steps": "fewest steps",
    "steps_at_k_star": "steps at k*", "k_star": "k*", "optimal_depths": "optimal depths",
    "steps_by_depth": "steps at depth 1, 2, ...", "time_by_depth": "time at depth 1, 2, ...",
    "normalised_time": "time / optimum", "wrht_variant": "WRHT formula", "nodes_study": "node-count study",
    "wavelengths_study": "wavelength study", "less_than_ring": "less time than Ring",
    "less_than_tree_unpipelined": "less time than Tree (unpipelined)",
    "less_than_tree_nccl_pipelined": "less time than Tree (NCCL, pipelined)", "lumorph_s": "Lumorph (paper accounting)",
    "lumorph_refined_s": "Lumorph (refined)", "ring_s": "Ring", "tree_unpipelined_s": "Tree (unpipelined)",
    "tree_nccl_pipelined_s": "Tree (NCCL, pipelined)", "dnc_s": "D&C", "lumorph_2_s": "Lumorph-2",
    "lumorph_4_s": "Lumorph-4", "nccl_tree_algorithm": "NCCL tree used", "lumorph_algorithm": "Lumorph algorithm",
    "lumorph_samples_per_s": "Lumorph throughput", "ring_samples_per_s": "Ring throughput",
    "lumorph_exposed_s": "Lumorph exposed communication", "ring_exposed_s": "Ring exposed communication",
    "num_collectives": "collectives per iteration", "jct_reduction": "JCT reduction",
    "stranded_gpu_s": "stranded GPU time", "largest_request": "largest request (GPUs)", "rounded_up": "given a larger slice",
    "rejected_fragmented": "rejected while GPUs were free", "per_cu_Gbps": "per-CU bandwidth",
    "hybrid_s": "all-reduce + all-to-all", "collective_bytes": "size", "bytes": "size", "error_pct": "error",
    "mean_abs_error_pct": "mean |error|", "median_abs_error_pct": "median |error|", "max_abs_error_pct": "max |error|",
    "max_abs_error_pct_below_256MiB": "max |error| below 256 MiB", "max_abs_error_pct_from_256MiB": "max |error| from 256 MiB",
    "within_15pct": "rows within ±15 %", "measured_efficiency_pct": "measured efficiency",
    "predicted_efficiency_pct": "predicted efficiency", "difference_points": "difference (points)",
    "scaling_error_pct": "scaling error", "batch_per_gpu": "batch per GPU", "base_id": "base row",
    "latency_intra_us": "intra-pod latency", "latency_inter_us": "inter-pod latency", "loss_ratio": "packet loss",
    "throughput": "throughput (share of capacity)", "opsquare_iter_s": "OPSquare iteration",
    "leafspine_iter_s": "leaf-spine iteration", "opsquare_exposed_s": "OPSquare exposed communication",
    "leafspine_exposed_s": "leaf-spine exposed communication", "opsquare_s": "OPSquare", "leafspine_s": "leaf-spine",
    "opsquare_speedup": "OPSquare speedup", "sipac_s": "SiPAC", "baseline_s": "baseline", "bcube_s": "BCube",
    "sipac_speedup": "SiPAC speedup", "sipac_iter_s": "SiPAC iteration", "sipac_exposed_s": "SiPAC exposed communication",
    "best_samples_per_s": "best throughput", "paper_algorithm": "algorithm (paper's name)", "time_s": "time",
}

KINDS = ("s", "ms", "us", "%", "pct", "x", "bytes", "GB/s", "Gb/s", "GB", "samples/s", "bool", "number", "text")


def column_kind(name: str, dtype: pl.DataType) -> str:
    """How column ``name`` reads (one of :data:`KINDS`)."""
    if dtype == pl.Boolean:
        return "bool"
    if not (dtype.is_numeric() or isinstance(dtype, pl.List)):
        return "text"
    low = name.lower()
    for suffix, kind in (("_ms", "ms"), ("_us", "us"), ("_pct", "pct"), ("_gbps", None), ("_bps", None),
                         ("_bytes", "bytes"), ("_gb", "GB"), ("samples_per_s", "samples/s"), ("_s", "s")):
        if low.endswith(suffix):
            if kind is None:  # bandwidths: B/s vs b/s by the case of the suffix
                return "GB/s" if name.endswith(("Bps", "GBps")) else "Gb/s"
            return kind
    if low in FRACTIONS:
        return "%"
    if low == "bytes":
        return "bytes"
    if "speedup" in low or low == "normalised_time":
        return "x"
    return "number"


UNIT_TEXT = {"%": "%", "pct": "%", "x": "×", "GB/s": "GB/s", "Gb/s": "Gb/s", "GB": "GB", "samples/s": "samples/s"}


def header(name: str, kind: str, unit: str = "") -> str:
    """The column's header in words, with its unit."""
    words = HEADERS.get(name)
    if words is None:
        words = name
        for suffix in ("_samples_per_s", "_ms", "_us", "_pct", "_GBps", "_Gbps", "_Bps", "_bps", "_bytes", "_gb", "_s"):
            if words.endswith(suffix) and len(words) > len(suffix):
                words = words[: -len(suffix)] + (" throughput" if suffix == "_samples_per_s" else "")
                break
        words = words.replace("_", " ")
    unit = unit or UNIT_TEXT.get(kind, "")
    return f"{words} ({unit})" if unit and f"({unit})" not in words else words


def _decimals(v: float, sig: int) -> int:
    """Decimals that show ``v`` to ``sig`` significant digits (0 for large values, at most 6)."""
    if v == 0 or not math.isfinite(v):
        return 0
    return max(0, min(6, sig - 1 - math.floor(math.log10(abs(v)))))


def _numbers(values: list[float | None], sig: int) -> list[str]:
    """Cells of one numeric column: the decimals the median value needs for ``sig`` digits — fewer in
    a cell that has ``sig`` digits without them, more in one that would otherwise keep fewer than two
    significant digits — but never more than the values have (450, not 450.0; a column the SQL
    rounded to one decimal keeps one); thousands separated."""
    present = [abs(v) for v in values if v is not None and math.isfinite(v) and v != 0]
    base = _decimals(statistics.median(present), sig) if present else 0
    written = next((k for k in range(7) if all(abs(v - round(v, k)) <= 1e-9 * v for v in present)), 6)
    out = []
    for v in values:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            out.append("")
            continue
        d = max(min(base, _decimals(v, sig)), _decimals(v, 2))  # 17,785 ms beside 14.60 ms, 0.062 ms
        out.append(f"{v:,.{min(d, written)}f}" if v != 0 else "0")  # 450 GB/s, not 450.0
    return out


TIME_UNITS = (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9))


def _time_unit(seconds: list[float]) -> tuple[str, float]:
    present = [abs(v) for v in seconds if v is not None and math.isfinite(v) and v != 0]
    m = statistics.median(present) if present else 1.0
    return next(((name, scale) for name, scale in TIME_UNITS if m >= scale * 0.9995), TIME_UNITS[-1])


def size(v: float | None) -> str:
    """Bytes in binary units: 512 B, 4 KiB, 1 GiB, 95.37 MiB."""
    if v is None:
        return ""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(v) >= scale:
            q = v / scale
            return f"{q:g} {unit}" if float(q).is_integer() else f"{q:.4g} {unit}"
    return f"{v:g} B"


def format_column(name: str, series: pl.Series, kind: str | None = None) -> tuple[str, list[str], bool]:
    """(header, cell texts, numeric?) for one column."""
    kind = kind or column_kind(name, series.dtype)
    values = series.to_list()
    if kind == "text":
        return header(name, kind), ["" if v is None else str(v) for v in values], False
    if kind == "bool":
        return header(name, kind), ["" if v is None else ("yes" if v else "no") for v in values], False
    if isinstance(series.dtype, pl.List):  # one list per cell; a time list in the unit its values suit
        if kind in ("s", "ms", "us"):
            scale = {"s": 1.0, "ms": 1e-3, "us": 1e-6}[kind]
            unit, to = _time_unit([x * scale for v in values for x in (v or []) if x is not None])
            return header(name, kind, unit), [", ".join(_numbers([x * scale / to for x in (v or [])], 3))
                                              for v in values], False
        return header(name, kind), [", ".join(_plain(x) for x in (v or [])) for v in values], False
    values = [(int(v) if v == v.to_integral_value() else float(v)) if isinstance(v, Decimal) else v
              for v in values]  # a DuckDB sum of counts is a Decimal
    if kind in ("s", "ms", "us"):
        seconds = [None if v is None else v * {"s": 1.0, "ms": 1e-3, "us": 1e-6}[kind] for v in values]
        unit, scale = _time_unit(seconds)
        return header(name, kind, unit), _numbers([None if v is None else v / scale for v in seconds], 4), True
    if kind == "bytes":
        return header(name, kind), [size(v) for v in values], True
    if kind == "%":
        return header(name, kind), _numbers([None if v is None else 100 * v for v in values], 3), True
    if kind in ("GB/s", "Gb/s") and name.endswith(("_Bps", "_bps")):
        values = [None if v is None else v / 1e9 for v in values]
    if all(isinstance(v, int) or v is None for v in values):  # thousands separated when one needs it: 1,024 beside 16,384
        sep = any(v is not None and abs(v) >= 10_000 for v in values)
        return header(name, kind), ["" if v is None else (f"{v:,}" if sep else str(v)) for v in values], True
    return header(name, kind), _numbers(values, 3 if kind == "pct" else 4), True


def _plain(x: object) -> str:
    return f"{x:.4g}" if isinstance(x, float) else str(x)


def table_html(df: pl.DataFrame, max_rows: int = 60, formats: dict[str, str] | None = None) -> str:
    """An HTML table in a box never wider than the page nor taller than 80 % of the window: it
    scrolls both ways inside the box, so a wide table's sideways scrollbar is always in view and its
    header row stays on top (sticky); headers in words with units, numbers formatted and
    right-aligned, verdicts coloured, long text collapsed (:data:`LONG_CELL`), links shortened
    (:data:`LINK_TEXT`)."""
    formats = formats or {}
    shown = df.head(max_rows)
    columns = [format_column(c, shown[c], formats.get(c)) for c in shown.columns]
    head = "".join(f"<th{' class=num' if numeric else ''}>{html.escape(h)}</th>" for h, _, numeric in columns)
    body = []
    for i, row in enumerate(shown.iter_rows()):
        cells = "".join(_verdict_td(c, v, text) or _td(text, numeric)
                        for c, v, (_, texts, numeric) in zip(shown.columns, row, columns, strict=True)
                        for text in (texts[i],))
        body.append(f"<tr>{cells}</tr>")
    more = f"<p>({df.height - max_rows} more rows; the SQL below gives them all)</p>" if df.height > max_rows else ""
    return f"<div class='scroll'><table><tr>{head}</tr>{''.join(body)}</table></div>{more}"


def _verdict_td(column: str, v: object, text: str) -> str | None:
    """A coloured cell for a verdict (column ``verdict``), a non-zero count of one (a column named
    after a verdict, as in the per-paper summary) or a yes/no whether something holds (a boolean
    column named ``...holds``); None for any other cell."""
    if column == "verdict" and v in VERDICT_CLASSES:
        return f"<td class='v-{v}'>{html.escape(str(v))}</td>"
    if column in VERDICT_CLASSES and isinstance(v, int) and v > 0:
        return f"<td class='v-{column} num'>{html.escape(text)}</td>"
    if column.endswith("holds") and isinstance(v, bool):
        return f"<td class='v-{'holds' if v else 'fails'}'>{html.escape(text)}</td>"
    return None


def _td(raw: str, numeric: bool = False) -> str:
    """A cell; numbers right-aligned; prose (over 80 characters) is given room to be read, a phrase
    (over :data:`SHORT_CELL` characters) a little room, so a wide table's rows stay a few lines tall."""
    if numeric:
        return f"<td class='num'>{html.escape(raw)}</td>"
    if len(raw) > 80:
        return f"<td class='wide'>{cell(raw)}</td>"
    if len(raw) > SHORT_CELL:  # a phrase (hardware, layout): a few lines, not one word per line
        return f"<td class='txt'>{cell(raw)}</td>"
    return f"<td>{cell(raw)}</td>"


def cell(raw: str) -> str:
    """A text cell: escaped; a URL becomes a short link (e.g. a validation row's source), text longer
    than :data:`LONG_CELL` a <details> whose summary is its beginning."""
    first, _, rest = raw.partition(" ")
    if first.startswith(("https://", "http://")):
        shown = first.split("://", 1)[1]
        shown = shown if len(shown) <= LINK_TEXT else shown[: LINK_TEXT - 1] + "…"
        link = f"<a href='{html.escape(first)}'>{html.escape(shown)}</a>"  # the browser shows the href on hover
        return link + (" " + html.escape(rest) if rest else "")
    return long_text(raw)


def long_text(raw: str) -> str:
    """Escaped ``raw``; beyond :data:`LONG_CELL` characters, collapsed behind its first words."""
    if len(raw) <= LONG_CELL:
        return html.escape(raw)
    cut = raw[:LONG_CELL // 2].rsplit(" ", 1)[0] or raw[:LONG_CELL // 2]
    return (f"<details><summary>{html.escape(cut)} … ({len(raw):,} characters)</summary>"
            f"{html.escape(raw)}</details>")


def claims_html(claims: list[dict]) -> str:
    """A section's claim rows (dicts with the ``claims`` table's columns): the statement with the
    paper's sentence, both numbers, the coloured verdict, the rule with its tolerance, the reason and
    any derivation; rows judged under a non-default reading say which."""
    rows = []
    for c in claims:
        where = f" <i>({html.escape(c['section'])})</i>" if c["section"] else ""
        quote = f"<br><q>{long_text(c['quote'])}</q>" if c["quote"] else ""
        reading = "" if not c["reading"] else (f"<br><small>reading: {html.escape(c['reading'])}"
                                                 f"{' (default)' if c['default_reading'] else ''}</small>")
        rule = (f"<b>{html.escape(c['rule'])}</b>: {html.escape(c['tolerance'])}" if c["rule"] else "")
        derivation = f"<br><b>derivation</b>: {long_text(c['derivation'])}" if c["derivation"] else ""
        verdict = c["verdict"]
        rows.append(
            f"<tr><td class='wide'>{html.escape(c['statement'])}{where}{quote}{reading}</td>"
            f"<td class='txt'>{html.escape(c['paper_value'])}</td><td class='txt'>{long_text(c['project_value'])}</td>"
            f"<td class='v-{verdict if verdict in VERDICT_CLASSES else 'no-data'}'>{html.escape(verdict)}</td>"
            f"<td class='txt'>{rule}</td><td class='wide'>{long_text(c['reason'])}{derivation}</td></tr>"
        )
    return (
        "<div class='scroll'><table><tr><th>paper's claim</th><th>paper's number</th><th>project's number</th>"
        "<th>verdict</th><th>rule and tolerance</th><th>reason</th></tr>" + "".join(rows) + "</table></div>"
    )
