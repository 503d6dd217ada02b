"""Seed 004's panels from the ``packetsim`` DuckDB table: throughput, packet loss and latency vs
offered load, for OPSquare (paper Fig. 2) and the NVLink leaf-spine (Fig. 3), one line per
(size, locality). Every number is drawn from the SQL below.

    python -m estimator.reports.sections.packetsim results/estimates.duckdb reports/figures/packetsim.png

``SECTION`` describes the same panels for the HTML report builder (:mod:`estimator.reports.build`).
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import polars as pl  # noqa: E402

from estimator.errors import EstimatorError  # noqa: E402
from estimator.files import atomic_path  # noqa: E402
from estimator.reports.model import Figure, Section  # noqa: E402
from estimator.reports.plots import label_axes, legend, panel_axes  # noqa: E402
from estimator.reports.style import styles  # noqa: E402

SQL = """
SELECT network, nodes, locality, load,
       avg(throughput) AS throughput,
       avg(loss_ratio) AS loss_ratio,
       avg(latency_intra_mean_s) * 1e6 AS latency_intra_us,
       avg(latency_inter_mean_s) * 1e6 AS latency_inter_us
FROM packetsim
WHERE traffic = 'uniform'
GROUP BY network, nodes, locality, load
ORDER BY network, nodes, locality, load
"""

PANELS = (
    ("throughput", "throughput / 3.6 Tb/s", "linear"),
    ("loss_ratio", "packet loss ratio", "symlog"),
    ("latency", "mean latency (µs)", "log"),
)
TITLES = {"opsquare": "OPSquare (cf. Fig. 2)", "leafspine": "Leaf-spine (cf. Fig. 3)"}
LATENCY = {"intra": "latency_intra_us", "inter": "latency_inter_us"}


def _label(nodes: int, locality: float) -> str:
    return f"{nodes} nodes, {locality:.0%} local"


def _plot_panel(df: pl.DataFrame, ax, metric: str, network: str, style: dict | None = None) -> None:
    """One network's lines (one per size and locality) of ``metric``: a column, or "latency" for intra-pod
    (solid) and inter-pod (dashed, the same colour) together."""
    rows = df.filter(pl.col("network") == network)
    groups = list(rows.group_by(["nodes", "locality"], maintain_order=True))
    style = style or styles(_label(n, loc) for (n, loc), _ in groups)
    for (nodes, loc), part in groups:
        s = style[_label(nodes, loc)]
        if metric == "latency":
            ax.plot(part["load"], part["latency_intra_us"], ms=3, label=_label(nodes, loc), **s.line())
            ax.plot(part["load"], part["latency_inter_us"], ms=3, label="_inter", **{**s.line(), "linestyle": "--"})
        else:
            ax.plot(part["load"], part[metric], ms=3, label=_label(nodes, loc), **s.line())
    if metric == "throughput":
        ax.plot([0, 1], [0, 1], color="grey", lw=0.8, ls=":", label="ideal")
    ax.grid(alpha=0.3)


def _panels(metric: str, label: str, scale: str):
    """The report's figure of one metric: a panel per network (latency: per network and direction)."""

    def plot(df: pl.DataFrame, ax) -> None:
        nets = [n for n in TITLES if n in set(df["network"].to_list())]
        style = styles(_label(n, loc) for (n, loc), _ in df.group_by(["nodes", "locality"], maintain_order=True))
        panels = [(n, c, f"{TITLES[n]}: {d}-pod") for n in nets for d, c in LATENCY.items()] if metric == "latency" \
            else [(n, metric, TITLES[n]) for n in nets]
        axes = panel_axes(ax, len(panels), ncols=2)
        for a, (net, column, title) in zip(axes, panels, strict=True):
            _plot_panel(df, a, column, net, style)
            a.set_yscale(scale, **({"linthresh": 1e-4} if scale == "symlog" else {}))
            a.set_title(title, fontsize=9)
        label_axes(axes, "offered load", label)
        legend(axes)

    return plot


# rows written before the loss split existed have NULL there (the claims reading it say no-data)
PKT = "(SELECT * FROM packetsim UNION ALL BY NAME (SELECT NULL::BIGINT AS lost_spine, NULL::BIGINT AS lost_intra LIMIT 0))"
U = f"FROM {PKT} AS p WHERE traffic = 'uniform'"
OPS, LS = "network = 'opsquare'", "network = 'leafspine'"


# The SQL behind each packet-level claim (stored with the claim in the `claims` table).
CLAIM_SQL = {
    "ideal": f"SELECT max(abs(throughput - load) / load) AS dev, sum(lost) AS lost {U} AND {OPS} AND load <= 0.6",
    "intra": f"SELECT max(latency_intra_p99_s) {U} AND {OPS}",
    "inter": f"SELECT max(latency_inter_p99_s) {U} AND {OPS}",
    "scale": f"""SELECT max(b.latency_inter_mean_s - a.latency_inter_mean_s)
        FROM packetsim a JOIN packetsim b USING (network, traffic, load, locality, seed)
        WHERE a.{OPS} AND a.traffic = 'uniform' AND a.nodes = 256 AND b.nodes = 1024""",
    "local": f"SELECT max(latency_intra_mean_s) {U} AND {LS} AND load <= 0.1",
    "local_p99": f"SELECT max(latency_intra_p99_s) {U} AND {LS}",
    "sat": f"SELECT max(latency_inter_mean_s) {U} AND {LS}",
    "step": f"SELECT min(load) {U} AND {LS} AND abs(locality - 0.33) < 0.01 AND loss_ratio > 0",
    "spine": f"""SELECT sum(lost_spine) / nullif(sum(lost), 0) AS spine_share, sum(lost) AS lost
        {U} AND {LS} AND abs(locality - 0.33) < 0.01 AND load >= 0.8""",
    "two": f"SELECT max(throughput) {U} AND {LS} AND abs(locality - 0.67) < 0.01",
    "one": f"SELECT max(throughput) {U} AND {LS} AND abs(locality - 0.33) < 0.01",
    "ten": f"""SELECT l.nodes, l.locality, l.latency_intra_mean_s / o.latency_intra_mean_s AS ratio,
        l.latency_intra_mean_s AS leafspine_s, o.latency_intra_mean_s AS opsquare_s
        FROM packetsim l JOIN packetsim o USING (traffic, nodes, load, locality, seed)
        WHERE l.{LS} AND o.{OPS} AND l.traffic = 'uniform' AND l.load = 0.1 ORDER BY ratio""",
    "local_loss": f"SELECT sum(lost_intra) AS lost_intra, sum(lost) AS lost {U} AND {LS} AND nodes = 1024",
    "local_ideal": f"SELECT max(abs(throughput - load) / load) {U} AND {OPS} AND abs(locality - 0.67) < 0.01",
    "outgoing": f"SELECT max(throughput / load) {U} AND {OPS} AND abs(locality - 0.33) < 0.01 AND load = 1.0",
}

Q = {  # seed 004's sentences the rows check
    "ideal": "Results show that the proposed architecture achieves a near ideal throughput until a load of 0.6, with "
             "zero packet loss and sub-microsecond latency.",
    "intra": "Intra-pod packets are delivered within 0.5 µs, inter-pod packets are delivered within 6 µs.",
    "scale": "Scaling the network worsens the performance by less than 1 µs",
    "local": "local traffic is delivered within 6 µs, but at low traffic loads around 1 µs, being equal to the switch "
             "latency.",
    "sat": "Inter-pod traffic saturates to 25 µs.",
    "step": "the spine-switch buffer size is causing a step in the number of lost packets from a load of 0.8 for 33% "
            "local traffic.",
    "half": "Only when the traffic is for two-thirds local, the total throughput of each node exceeds half the capacity.",
    "ten": "The transparency of the switches allows for a ten times lower latency for local packets",
    "local_loss": "For a large network, even local traffic faces packet loss.",
    "local_ideal": "The OPSquare network shows almost ideal performance when the majority of the traffic is local",
    "outgoing": "With strong outgoing traffic, the throughput is limited by the inter-pod capacity of a single 3.6 Tb/s "
                "channel.",
}


def _claims(q):
    """Seed 004 Sec. 3's statements vs the sweep, each number from SQL over ``packetsim``
    (:data:`CLAIM_SQL`), each judged by a named rule (:mod:`estimator.reports.rules`)."""
    from estimator.reports.rules import (
        ROUND_FIGURE,
        AllOf,
        AtLeast,
        AtMost,
        InRange,
        WithinAbsolute,
        WithinRelative,
    )
    from estimator.reports.sections.paper_helpers import judged, num, rows, scalar

    first = rows(q, CLAIM_SQL["ideal"])
    dev, lost = (first[0]["dev"], first[0]["lost"]) if first else (None, None)
    ideal = None if dev is None else (dev, int(lost or 0))
    intra, inter, scale, local, local99, sat, step, two, one, local_ideal, outgoing = (
        scalar(q, CLAIM_SQL[k]) for k in ("intra", "inter", "scale", "local", "local_p99", "sat", "step", "two", "one",
                                          "local_ideal", "outgoing"))
    us = 1e6
    us_num = lambda v: num(None if v is None else v * us, " µs")  # noqa: E731
    us_fmt = lambda v: f"{v * us:.3g} µs"  # noqa: E731
    frac = lambda v: f"{v:.1%}"  # noqa: E731
    two_one = None if two is None or one is None else (two, one)
    spine = rows(q, CLAIM_SQL["spine"])
    spine_share = None if not spine or not spine[0]["lost"] else spine[0]["spine_share"]
    ten = rows(q, CLAIM_SQL["ten"])
    ten_v = min((r["ratio"] for r in ten), default=None)
    ll = rows(q, CLAIM_SQL["local_loss"])
    local_lost = None if not ll or ll[0]["lost_intra"] is None else int(ll[0]["lost_intra"])
    return [
        judged("OPSquare: near-ideal throughput, zero loss up to load 0.6", "≈ ideal, 0 lost", ideal,
               "" if ideal is None else f"max deviation {dev:.1%}, {ideal[1]} lost",
               AllOf((("deviation from the offered load", AtMost(0.03, frac, "within 3 % of ideal")),
                      ("packets lost", AtMost(0, lambda x: f"{x:g}")))),
               where="Sec. 3, Fig. 2", unit="fraction", sql=CLAIM_SQL["ideal"], quote=Q["ideal"]),
        judged("OPSquare: intra-pod packets within 0.5 µs (max p99 over every load)", "<= 0.5 µs", intra, us_num(intra),
               AtMost(0.5e-6, us_fmt), where="Sec. 3, Fig. 2c", unit="s", sql=CLAIM_SQL["intra"], quote=Q["intra"]),
        judged("OPSquare: inter-pod packets within 6 µs (max p99 over every load)", "<= 6 µs", inter, us_num(inter),
               AtMost(6e-6, us_fmt), where="Sec. 3, Fig. 2c", unit="s", sql=CLAIM_SQL["inter"], quote=Q["intra"]),
        judged("OPSquare: 1024 nodes worse than 256 by less than 1 µs (inter-pod mean, equal load and locality)",
               "< 1 µs", scale, us_num(scale), AtMost(1e-6, us_fmt), where="Sec. 3", unit="s", sql=CLAIM_SQL["scale"],
               quote=Q["scale"]),
        judged("OPSquare: almost ideal throughput when two thirds of the traffic is local (every load, both sizes)",
               "≈ ideal", local_ideal, "" if local_ideal is None else f"max deviation {local_ideal:.1%}",
               AtMost(0.03, frac, "within 3 % of the offered load"), where="Sec. 3, Fig. 2a", unit="fraction",
               sql=CLAIM_SQL["local_ideal"], quote=Q["local_ideal"]),
        judged("OPSquare: with one third local, throughput at full load falls short of the offered load (the inter-pod "
               "channel limits it)", "< offered", outgoing, "" if outgoing is None else f"{outgoing:.1%} of offered",
               AtMost(0.97, frac, "more than 3 % below ideal"), where="Sec. 3, Fig. 2a", unit="fraction",
               sql=CLAIM_SQL["outgoing"], quote=Q["outgoing"]),
        judged("Leaf-spine: local traffic ≈ 1 µs (the switch latency) at low load", "≈ 1 µs", local, us_num(local),
               WithinAbsolute(1e-6, 0.2e-6, us_fmt), where="Sec. 3, Fig. 3c", unit="s", sql=CLAIM_SQL["local"],
               quote=Q["local"]),
        judged("Leaf-spine: local traffic delivered within 6 µs (max p99 over every load)", "<= 6 µs", local99,
               us_num(local99), AtMost(6e-6, us_fmt), where="Sec. 3, Fig. 3c", unit="s", sql=CLAIM_SQL["local_p99"],
               quote=Q["local"]),
        judged("Leaf-spine: inter-pod latency saturates near 25 µs", "≈ 25 µs", sat, us_num(sat),
               InRange(20e-6, 30e-6, 0.0, us_fmt), where="Sec. 3, Fig. 3c", unit="s", sql=CLAIM_SQL["sat"],
               quote=Q["sat"]),
        judged("Leaf-spine: loss steps up from load 0.8 at 33 % local traffic (first load with loss)", "0.8", step,
               num(step), WithinAbsolute(0.8, 0.05), where="Sec. 3, Fig. 3b", sql=CLAIM_SQL["step"], quote=Q["step"]),
        judged("Leaf-spine: that loss is the spine switches' buffers overflowing (share of the lost packets dropped at "
               "a spine, 33 % local, load >= 0.8)", "spine", spine_share,
               "" if spine_share is None else f"{spine_share:.1%} at a spine",
               AtLeast(0.5, frac, "most losses at a spine"), where="Sec. 3, Fig. 3b", unit="fraction",
               sql=CLAIM_SQL["spine"], quote=Q["step"]),
        judged("Leaf-spine, 1024 nodes: even local traffic faces packet loss", "> 0 local packets lost", local_lost,
               "" if local_lost is None else f"{local_lost} intra-pod packets lost of {int(ll[0]['lost'] or 0)}",
               AtLeast(1, lambda x: f"{x:g}"), where="Sec. 3, Fig. 3b", unit="packets", sql=CLAIM_SQL["local_loss"],
               quote=Q["local_loss"]),
        judged("Leaf-spine: only two-thirds-local traffic exceeds half the capacity", "> 0.5 vs < 0.5", two_one,
               "" if two_one is None else f"{two:.2f} vs {one:.2f}",
               AllOf((("67 % local", AtLeast(0.5 + 1e-9, lambda x: f"{x:.3g}")),
                      ("33 % local", AtMost(0.5, lambda x: f"{x:.3g}")))), where="Sec. 3, Fig. 3a",
               sql=CLAIM_SQL["two"] + ";\n" + CLAIM_SQL["one"], quote=Q["half"]),
        judged("Local packets: ten times lower latency on OPSquare than on the leaf-spine (mean intra-pod latency at load "
               "0.1; the smallest ratio over sizes and localities)", "10x", ten_v,
               "" if ten_v is None else f"{ten_v:.2f}x (" + ", ".join(
                   f"{r['nodes']} nodes {r['locality']:.0%} local: {r['leafspine_s'] * us:.3g} / {r['opsquare_s'] * us:.3g} µs"
                   for r in ten) + ")", WithinRelative(10.0, ROUND_FIGURE, lambda x: f"{x:.3g}x"),
               where="Sec. 3", unit="x", sql=CLAIM_SQL["ten"], quote=Q["ten"]),
    ]


SECTION = Section(
    key="packetsim",
    title="OPSquare (seed 004): packet level vs the NVLink leaf-spine",
    intro="Uniform random 1500-byte traffic, 20 µs warm-up + 20 µs measurement, per conf/packetsim.yaml.",
    figures=tuple(
        Figure(name=f"packetsim_{metric}", title=label, sql=SQL, plot=_panels(metric, label, scale))
        for metric, label, scale in PANELS
    ),
    claims=_claims,
    order=60,
    needs_tables=("packetsim",),
)


def make_figure(store: str | Path, out: str | Path) -> Path:
    """Write the 2 × 3 panel figure (rows: networks; columns: throughput, loss, latency)."""
    from estimator.store.duckdb_store import query

    df = query(store, SQL)
    if df.is_empty():
        raise EstimatorError(f"{store}: table packetsim has no uniform-traffic rows; run the opsquare_packet experiment")
    networks = [n for n in TITLES if n in set(df["network"].to_list())]
    fig, axes = plt.subplots(len(networks), 3, figsize=(14, 4 * len(networks)), squeeze=False)
    for row, net in enumerate(networks):
        for col, (metric, label, scale) in enumerate(PANELS):
            ax = axes[row][col]
            _plot_panel(df, ax, metric, net)
            ax.set_yscale(scale, **({"linthresh": 1e-4} if scale == "symlog" else {}))
            ax.set_xlabel("offered load")
            ax.set_title(f"{TITLES[net]}: {label}" + (" (solid intra-pod, dashed inter-pod)" if metric == "latency"
                                                     else ""), fontsize=9)
            ax.legend(fontsize=7)
    fig.tight_layout()
    out = Path(out)
    try:
        with atomic_path(out) as tmp:
            fig.savefig(tmp, dpi=110)
    finally:
        plt.close(fig)
    return out


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m estimator.reports.sections.packetsim STORE.duckdb OUT.png", file=sys.stderr)
        sys.exit(2)
    try:
        print(make_figure(args[0], args[1]))
    except EstimatorError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
