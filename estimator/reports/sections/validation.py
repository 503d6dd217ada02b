"""Against real hardware: the ``validation`` table (``estimator validate``) as figures and tables.

Each measurement row of ``validation/*.csv`` is a public nccl-tests or training-throughput number;
``role`` says which group it is in (validation/README.md): ``calibration`` (a constant of the model
was fitted or chosen on it), ``same-source`` (another point of the same curve, table or run as a
calibration row: it was not fitted on, but it shares the calibration's setup and any error of the
source) or ``independent`` (no source in common with anything the model was fitted on). The scatter
plots draw the three groups with different markers; the summary reports their errors apart. The
targets are issue #10's, checked on every row that matches them (the detail column gives the
independent part).
"""

from __future__ import annotations

import polars as pl

from estimator.reports.model import Figure, Section, Table
from estimator.reports.rules import AtMost
from estimator.reports.sections.paper_helpers import Query, judged, rows
from estimator.reports.style import MARKERS, PALETTE
from estimator.validation.envelope import ACCEPT_MAX_PCT, ACCEPT_MEAN_PCT, ACCEPT_MIN_ROWS
from estimator.validation.llm import ERRORS_SQL as LLM_ERRORS_SQL

BAND = 0.15  # the ±15 % band drawn around y = x (issue #10's accuracy target for large sizes)
STYLE = {"calibration": {"marker": "s", "color": PALETTE[3], "label": "calibration (a constant was fitted on it)"},
         "same-source": {"marker": "^", "color": PALETTE[1], "label": "same source as a calibration row"},
         "independent": {"marker": "o", "color": PALETTE[0], "label": "independent (shares no source)"}}


def _roles(df: pl.DataFrame) -> list[tuple[str, dict]]:
    """The roles present, in reading order, with their marker and colour (a role the table does not
    know yet is drawn too, in grey, under its own name)."""
    present = list(dict.fromkeys(df["role"].to_list()))
    known = [r for r in STYLE if r in present]
    other = [r for r in present if r not in STYLE]
    return [(r, STYLE[r]) for r in known] + [(r, {"marker": MARKERS[4 + i], "color": PALETTE[7], "label": str(r)})
                                             for i, r in enumerate(other)]
# the groups in their reading order (SQL sorts them with this CASE, not alphabetically)
ROLE_ORDER = "CASE role WHEN 'calibration' THEN 0 WHEN 'same-source' THEN 1 ELSE 2 END"


def _scatter_sql(kind: str) -> str:
    return f"""
SELECT id, role, gpus, coalesce(collective, model) AS what, bytes, precision, measured, predicted, unit, error_pct
FROM validation
WHERE kind = '{kind}'
ORDER BY role, id
"""


# the large-model rows with their long text (model overrides, software, source) after the numbers
LLM_ROWS_SQL = f"""
SELECT * EXCLUDE (overrides, software, source), overrides, software, source
FROM ({LLM_ERRORS_SQL.strip()}) AS r
ORDER BY gpus, id
"""

NCCL_SQL = _scatter_sql("nccl")
TRAINING_SQL = _scatter_sql("training")


def _scatter(label: str):
    def plot(df: pl.DataFrame, ax) -> None:
        lo = min(df["measured"].min(), df["predicted"].min()) / 1.5
        hi = max(df["measured"].max(), df["predicted"].max()) * 1.5
        xs = [lo, hi]
        ax.fill_between(xs, [x * (1 - BAND) for x in xs], [x * (1 + BAND) for x in xs], color="0.85",
                        label=f"±{BAND:.0%} of measured")
        ax.plot(xs, xs, color="0.3", lw=1, label="predicted = measured")
        for role, style in _roles(df):
            part = df.filter(pl.col("role") == role)
            ax.scatter(part["measured"], part["predicted"], s=22, alpha=0.85, edgecolors="k", linewidths=0.4, **style)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_aspect("equal")
        _plain_ticks(ax, hi / lo)
        unit = df["unit"][0]
        ax.set_xlabel(f"measured {label} ({unit})")
        ax.set_ylabel(f"predicted {label} ({unit})")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.03, 1.0), borderaxespad=0)

    return plot


def _plain_ticks(ax, span: float) -> None:
    """Plain numbers on the log axes; minor ticks labelled on a narrow range (all under 4x, 2 and 5 x 10^k
    under two decades, none beyond)."""
    from matplotlib.ticker import FuncFormatter

    def minor(v: float, _) -> str:
        text = f"{v:g}"
        if span < 4:
            return text
        return text if span < 100 and text.lstrip("0.")[:1] in ("2", "5") else ""

    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        axis.set_minor_formatter(FuncFormatter(minor))
        axis.set_tick_params(which="both", labelsize=7)


ERRORS_SQL = """
SELECT kind, id, role, error_pct
FROM validation
ORDER BY kind, id
"""


def _plot_errors(df: pl.DataFrame, ax) -> None:
    """Signed error per row, rows grouped by kind, the ±15 % band shaded."""
    ax.axhspan(-100 * BAND, 100 * BAND, color="0.88", label=f"±{BAND:.0%}")
    ax.axhline(0, color="0.3", lw=1)
    df = df.with_row_index("x")
    for role, style in _roles(df):
        part = df.filter(pl.col("role") == role)
        ax.scatter(part["x"], part["error_pct"], s=20, edgecolors="k", linewidths=0.4, **style)
    ticks = []
    for (kind,), part in df.group_by(["kind"], maintain_order=True):
        lo, hi = part["x"].min(), part["x"].max()
        ticks.append(((lo + hi) / 2, f"{kind}\n({part.height} rows)"))  # two lines: a narrow group's label fits
        if lo > 0:
            ax.axvline(lo - 0.5, color="0.5", lw=0.8, ls="--")
    ax.set_xticks([t for t, _ in ticks], [label for _, label in ticks], fontsize=7)
    ax.set_xlim(-1, df.height)
    ax.set_ylabel("error = (predicted − measured) / measured (%)")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.03, 1.0), borderaxespad=0)


SUMMARY_SQL = f"""
SELECT kind, role, count(*) AS rows,
       round(avg(abs(error_pct)), 1) AS mean_abs_error_pct,
       round(median(abs(error_pct)), 1) AS median_abs_error_pct,
       round(max(abs(error_pct)), 1) AS max_abs_error_pct,
       count(*) FILTER (WHERE abs(error_pct) <= 15) AS within_15pct
FROM validation
GROUP BY kind, role
ORDER BY kind, {ROLE_ORDER}
"""

NCCL_BY_SCALE_SQL = f"""
SELECT system, gpus, role, count(*) AS rows,
       round(avg(abs(error_pct)), 1) AS mean_abs_error_pct,
       round(max(abs(error_pct)), 1) AS max_abs_error_pct,
       round(max(abs(error_pct)) FILTER (WHERE bytes < {256 * 2**20}), 1) AS max_abs_error_pct_below_256MiB,
       round(max(abs(error_pct)) FILTER (WHERE bytes >= {256 * 2**20}), 1) AS max_abs_error_pct_from_256MiB
FROM validation
WHERE kind = 'nccl'
GROUP BY system, gpus, role
ORDER BY system, gpus, {ROLE_ORDER}
"""

# issue #23's acceptance rule for independent large-model rows, applied per class of run (the rule estimator
# estimate prints beside a hybrid estimate: estimator/validation/envelope.py)
ISSUE_23 = "issue #23's acceptance"

LLM_CLASSES_SQL = f"""
SELECT run_class, any_value(validation_class) AS validation_class, count(*) AS rows,
       round(avg(abs(error_pct)), 1) AS mean_abs_error_pct,
       round(max(abs(error_pct)), 1) AS max_abs_error_pct,
       round(min(error_pct), 1) AS lowest_error_pct, round(max(error_pct), 1) AS highest_error_pct,
       CASE WHEN count(*) < {ACCEPT_MIN_ROWS} THEN 'too few rows'
            WHEN avg(abs(error_pct)) <= {ACCEPT_MEAN_PCT} AND max(abs(error_pct)) <= {ACCEPT_MAX_PCT} THEN 'holds'
            ELSE 'fails' END AS verdict,
       arg_max(id, abs(error_pct)) AS worst_id
FROM validation
WHERE kind = 'llm' AND role = 'independent' AND error_pct IS NOT NULL
GROUP BY run_class
ORDER BY rows DESC, run_class
"""

LLM_INDEPENDENT_SQL = """
SELECT count(*) AS n, avg(abs(error_pct)) AS mean_abs, max(abs(error_pct)) AS max_abs,
       arg_max(id, abs(error_pct)) AS worst_id
FROM validation
WHERE kind = 'llm' AND role = 'independent' AND error_pct IS NOT NULL
"""

ROLES_SQL = f"""
SELECT kind, role, count(*) AS rows, string_agg(id, ', ' ORDER BY id) AS ids
FROM validation
GROUP BY kind, role
ORDER BY kind, {ROLE_ORDER}
"""


def _errors_sql(kind: str) -> str:
    """One line per row: what was measured and the error first, the long descriptive columns
    (hardware, software, source) last, so the numbers read without scrolling sideways."""
    detail = ("collective, CAST(bytes AS BIGINT) AS bytes, algorithm" if kind == "nccl"
              else "model, precision, batch_per_gpu")
    return f"""
SELECT id, role, gpus, {detail}, round(measured, 2) AS measured, round(predicted, 2) AS predicted,
       unit, round(error_pct, 1) AS error_pct, hardware, software, source
FROM validation
WHERE kind = '{kind}'
ORDER BY id
"""


def _scaling_sql(base_gpus: int) -> str:
    """Scaling efficiency of each training row on more than ``base_gpus`` GPUs against a row on
    ``base_gpus`` GPUs of the same setup: same system, model, precision, per-GPU batch, source and
    hardware (ignoring a leading node count such as ``2x ``); the first such base row by id.
    efficiency = samples/s x base_gpus / (gpus x base samples/s), measured and predicted."""
    return f"""
WITH t AS (SELECT *, coalesce(system, '') AS sys, regexp_replace(hardware, '^[0-9]+x ', '') AS box
           FROM validation WHERE kind = 'training'),
     base AS (SELECT sys, model, precision, batch_per_gpu, source, box, min(id) AS base_id,
                     arg_min(measured, id) AS mb, arg_min(predicted, id) AS pb
              FROM t WHERE gpus = {base_gpus} GROUP BY ALL)
SELECT t.id, t.role, base.base_id, t.model, t.precision, t.gpus,
       round(100 * t.measured * {base_gpus} / (t.gpus * base.mb), 1) AS measured_efficiency_pct,
       round(100 * t.predicted * {base_gpus} / (t.gpus * base.pb), 1) AS predicted_efficiency_pct,
       round(100 * t.predicted * {base_gpus} / (t.gpus * base.pb)
             - 100 * t.measured * {base_gpus} / (t.gpus * base.mb), 1) AS difference_points,
       round(100 * ((t.predicted / base.pb) / (t.measured / base.mb) - 1), 1) AS scaling_error_pct
FROM t JOIN base USING (sys, model, precision, batch_per_gpu, source, box)
WHERE t.gpus > {base_gpus}
ORDER BY t.model, t.precision, t.gpus, t.id
"""


SCALING_SQL = _scaling_sql(1)
MULTINODE_SQL = _scaling_sql(8)


ISSUE_10 = "issue #10's accuracy target"


def _target(q: Query, what: str, target: str, where: str, limit: float):
    sql = f"""
SELECT max(abs(error_pct)) AS worst, count(*) AS n,
       max(abs(error_pct)) FILTER (WHERE role = 'independent') AS worst_independent,
       count(*) FILTER (WHERE role = 'independent') AS n_independent,
       arg_max(id, abs(error_pct)) AS worst_id
FROM validation WHERE {where}
"""
    r = rows(q, sql)[0]
    value = None if not r["n"] else r["worst"]
    held = ("no independent rows" if not r["n_independent"]
            else f"independent: max {r['worst_independent']:.1f} % over {r['n_independent']} rows")
    shown = f"max |error| {value:.1f} % over {r['n']} rows (worst {r['worst_id']}); {held}" if value is not None else ""
    return judged(what, target, value, shown, AtMost(limit, lambda v: f"{v:.1f} %", ISSUE_10), where=ISSUE_10,
                  unit="%", sql=sql)


def _claims(q: Query):
    mib = 2**20
    out = [
        _target(q, "8-GPU all-reduce bus bandwidth within 15 % at every size >= 16 MiB", "<= 15 %",
                f"kind = 'nccl' AND collective = 'all_reduce' AND gpus = 8 AND bytes >= {16 * mib}", 15),
        _target(q, "8-GPU all-reduce bus bandwidth within 30 % at 1 MiB", "<= 30 %",
                f"kind = 'nccl' AND collective = 'all_reduce' AND gpus = 8 AND bytes = {mib}", 30),
        _target(q, "Single-GPU training throughput within 15 %", "<= 15 %", "kind = 'training' AND gpus = 1", 15),
    ]
    eff = rows(q, SCALING_SQL)
    eight = [r for r in eff if r["gpus"] == 8]
    worst = max((abs(r["difference_points"]) for r in eight), default=None)
    worst_id = max(eight, key=lambda r: abs(r["difference_points"]))["id"] if eight else ""
    pairs = "; pairs: " + ", ".join(f"{r['id']} vs {r['base_id']}" for r in eight)
    out.append(judged("8-GPU data-parallel scaling efficiency within 5 points", "<= 5 points", worst,
                      f"max {worst:.1f} points over {len(eight)} pairs (worst {worst_id}){pairs}" if worst is not None
                      else "", AtMost(5, lambda v: f"{v:.1f} points", ISSUE_10), where=ISSUE_10, unit="points",
                      sql=SCALING_SQL))
    multi = [r for r in rows(q, MULTINODE_SQL) if r["gpus"] <= 256]
    worst = max((abs(r["scaling_error_pct"]) for r in multi), default=None)
    worst_id = max(multi, key=lambda r: abs(r["scaling_error_pct"]))["id"] if multi else ""
    pairs = "; pairs: " + ", ".join(f"{r['id']} vs {r['base_id']}" for r in multi)
    out.append(judged("Multi-node scaling (one 8-GPU node -> up to 32 nodes) within 5 %", "<= 5 %", worst,
                      f"max {worst:.1f} % over {len(multi)} pairs (worst {worst_id}){pairs}" if worst is not None else "",
                      AtMost(5, lambda v: f"{v:.1f} %", ISSUE_10), where=ISSUE_10, unit="%",
                      sql=MULTINODE_SQL + "-- the rows with gpus <= 256"))
    out.extend(_llm_claims(q))
    return out


def _llm_claims(q: Query):
    """Issue #23's acceptance on the independent large-model rows: mean and max |error|, both judged."""
    r = rows(q, LLM_INDEPENDENT_SQL)[0]
    if not r["n"]:
        return [judged(f"Independent large-model rows: mean |error| <= {ACCEPT_MEAN_PCT:g} %", f"<= {ACCEPT_MEAN_PCT:g} %",
                       None, "", None, where=ISSUE_23, unit="%", sql=LLM_INDEPENDENT_SQL)]
    over = f" over {r['n']} rows"
    return [
        judged(f"Independent large-model rows: mean |error| <= {ACCEPT_MEAN_PCT:g} %", f"<= {ACCEPT_MEAN_PCT:g} %",
               r["mean_abs"], f"mean |error| {r['mean_abs']:.1f} %{over}",
               AtMost(ACCEPT_MEAN_PCT, lambda v: f"{v:.1f} %", ISSUE_23), where=ISSUE_23, unit="%", sql=LLM_INDEPENDENT_SQL),
        judged(f"Independent large-model rows: max |error| <= {ACCEPT_MAX_PCT:g} %", f"<= {ACCEPT_MAX_PCT:g} %",
               r["max_abs"], f"max |error| {r['max_abs']:.1f} %{over} (worst {r['worst_id']}); per class of run: "
               "the table 'Large-model rows by class of run'",
               AtMost(ACCEPT_MAX_PCT, lambda v: f"{v:.1f} %", ISSUE_23), where=ISSUE_23, unit="%", sql=LLM_INDEPENDENT_SQL),
    ]


SECTION = Section(
    key="validation",
    title="Against real hardware",
    intro=(
        "Public measurements of real systems (nccl-tests bus bandwidth; training throughput), one row each in "
        "<code>validation/*.csv</code> with its source, run through the model by <code>estimator validate</code> "
        "into the <code>validation</code> table (if that table is missing below, run <code>estimator validate</code>). "
        "A <b>calibration</b> row (squares) is one a constant of the model was fitted or chosen on; a "
        "<b>same-source</b> row (triangles) set nothing but is another point of the same curve, table or run "
        "as a calibration row; an <b>independent</b> row (circles) shares no source with anything the model was "
        "fitted on — its error is the one that says how good the model is out of sample. "
        "error = (predicted − measured) / measured; the grey band is ±15 % around predicted = measured. "
        "The claim rows check issue #10's accuracy targets on every matching row (the independent part in the detail) "
        "and issue #23's on the independent large-model rows."
    ),
    figures=(
        Figure(name="validation_nccl", title="nccl-tests bus bandwidth: predicted vs measured", sql=NCCL_SQL,
               plot=_scatter("bus bandwidth"),
               caption="One point per nccl-tests row (size, collective, GPU count); busbw from the predicted time "
                       "with nccl-tests' factors (all-reduce 2(n-1)/n; all-gather, reduce-scatter, all-to-all "
                       "(n-1)/n; broadcast, reduce 1)."),
        Figure(name="validation_training", title="Training throughput: predicted vs measured", sql=TRAINING_SQL,
               plot=_scatter("throughput"),
               caption="One point per training row: samples/s over all GPUs."),
        Figure(name="validation_errors", title="Error of every row (sorted by kind and id)", sql=ERRORS_SQL,
               plot=_plot_errors,
               caption="Signed error per row; the shaded band is ±15 %. The tables below name each row."),
    ),
    tables=(
        Table(name="validation_summary", title="Errors per group: calibration, same-source, independent",
              sql=SUMMARY_SQL,
              caption="|error| in percent per kind and group (role); within_15pct counts rows with |error| <= 15 %. "
                      "Only the independent rows measure the model out of sample."),
        Table(name="validation_nccl_by_scale", title="nccl-tests errors per system and GPU count", sql=NCCL_BY_SCALE_SQL,
              caption="8 GPUs = one node (NVLink/NVSwitch only); more = several nodes over InfiniBand. Sizes below "
                      "256 MiB are where latency and pipelining matter, from 256 MiB on the bandwidths."),
        Table(name="validation_roles", title="Which rows calibrated a constant, which share its source, which are "
              "independent", sql=ROLES_SQL,
              caption="Calibration rows were used to fit or choose a constant (which constant: the comment next to "
                      "it, see validation/README.md); same-source rows come from the same curve, table or run as a "
                      "calibration row; independent rows share no source with anything fitted."),
        Table(name="validation_nccl_errors", title="nccl-tests rows", sql=_errors_sql("nccl")),
        Table(name="validation_training_errors", title="Training rows", sql=_errors_sql("training")),
        Table(name="validation_llm_errors", title="Large-model training rows (tensor x pipeline x data parallel)",
              sql=LLM_ROWS_SQL, caption="Per-GPU throughput as the source states it (unit column): tokens/s, or TFLOP/s by the source's own "
                      "FLOP count (estimator/validation/llm.py). error > 0: the model was optimistic."),
        Table(name="validation_llm_classes", title="Large-model rows by class of run: how far to trust an estimate",
              sql=LLM_CLASSES_SQL,
              caption="The independent large-model rows grouped by the class estimator estimate prints "
                      "beside a hybrid estimate (validation_class: training stack, sequence up to / over "
                      "16k tokens, FSDP with or without activation checkpointing, DeepSpeed ZeRO-3, mixture of experts). "
                      "verdict applies "
                      f"issue #23's rule to the class: holds when mean |error| <= {ACCEPT_MEAN_PCT:g} % and max |error| "
                      f"<= {ACCEPT_MAX_PCT:g} %, fails otherwise; fewer than {ACCEPT_MIN_ROWS} rows: too few rows. "
                      "error > 0: the model was optimistic."),
        Table(name="validation_scaling", title="Data-parallel scaling efficiency (rows paired with a 1-GPU row)",
              sql=SCALING_SQL,
              caption="Pairs of training rows of the same setup (system, model, precision, per-GPU batch, source "
                      "and hardware, ignoring a leading node count); scaling_error_pct = predicted speed-up / "
                      "measured speed-up - 1."),
        Table(name="validation_multinode", title="Multi-node scaling (rows paired with a one-node, 8-GPU row)",
              sql=MULTINODE_SQL),
    ),
    claims=_claims,
    order=5,
    needs_tables=("validation",),
)
