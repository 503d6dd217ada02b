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
    ("latency", "mean latency µs (solid intra, dashed inter)", "log"),
)
TITLES = {"opsquare": "OPSquare (cf. Fig. 2)", "leafspine": "Leaf-spine (cf. Fig. 3)"}


def _plot_panel(df: pl.DataFrame, ax, metric: str, network: str | None = None) -> None:
    rows = df if network is None else df.filter(pl.col("network") == network)
    for (net, nodes, loc), part in rows.group_by(["network", "nodes", "locality"], maintain_order=True):
        label = f"{net} {nodes} nodes, {loc:.0%} local" if network is None else f"{nodes} nodes, {loc:.0%} local"
        if metric == "latency":
            line = ax.plot(part["load"], part["latency_intra_us"], marker="o", ms=3, label=label)[0]
            ax.plot(part["load"], part["latency_inter_us"], marker="s", ms=3, ls="--", color=line.get_color())
        else:
            ax.plot(part["load"], part[metric], marker="o", ms=3, label=label)
    if metric == "throughput":
        ax.plot([0, 1], [0, 1], color="grey", lw=0.8, ls=":", label="ideal")
    ax.set_xlabel("offered load")
    ax.grid(alpha=0.3)


def _panel(metric: str, scale: str):
    def plot(df: pl.DataFrame, ax) -> None:
        _plot_panel(df, ax, metric)
        ax.set_yscale(scale, **({"linthresh": 1e-4} if scale == "symlog" else {}))
        ax.legend(fontsize=6)

    return plot


U = "FROM packetsim WHERE traffic = 'uniform'"
OPS, LS = "network = 'opsquare'", "network = 'leafspine'"


def _rule(ok, text: str):
    """A :data:`~estimator.reports.sections.paper_helpers.Judge`: ``holds`` when ``ok(v)``, else
    ``fails``; the reason is ``text`` (the rule and its tolerance) with the project's value."""

    def judge(v):
        good = bool(ok(v))
        return ("holds" if good else "fails", f"{'meets' if good else 'misses'} the rule: {text}")

    return judge


# The SQL behind each packet-level claim (stored with the claim in the `claims` table).
CLAIM_SQL = {
    "ideal": f"SELECT max(abs(throughput - load) / load) AS dev, sum(lost) AS lost {U} AND {OPS} AND load <= 0.6",
    "intra": f"SELECT max(latency_intra_p99_s) {U} AND {OPS}",
    "inter": f"SELECT max(latency_inter_p99_s) {U} AND {OPS}",
    "scale": f"""SELECT max(b.latency_inter_mean_s - a.latency_inter_mean_s)
        FROM packetsim a JOIN packetsim b USING (network, traffic, load, locality, seed)
        WHERE a.{OPS} AND a.traffic = 'uniform' AND a.nodes = 256 AND b.nodes = 1024""",
    "local": f"SELECT max(latency_intra_mean_s) {U} AND {LS} AND load <= 0.1",
    "sat": f"SELECT max(latency_inter_mean_s) {U} AND {LS}",
    "step": f"SELECT min(load) {U} AND {LS} AND abs(locality - 0.33) < 0.01 AND loss_ratio > 0",
    "two": f"SELECT max(throughput) {U} AND {LS} AND abs(locality - 0.67) < 0.01",
    "one": f"SELECT max(throughput) {U} AND {LS} AND abs(locality - 0.33) < 0.01",
}


def _claims(q):
    """Seed 004 Sec. 3's statements vs the sweep, each number from SQL over ``packetsim``
    (:data:`CLAIM_SQL`), each rule with its tolerance stated in the reason."""
    from estimator.reports.sections.paper_helpers import judged, num, rows, scalar

    first = rows(q, CLAIM_SQL["ideal"])
    dev, lost = (first[0]["dev"], first[0]["lost"]) if first else (None, None)
    ideal = None if dev is None else (dev, lost)
    intra, inter, scale, local, sat, step, two, one = (
        scalar(q, CLAIM_SQL[k]) for k in ("intra", "inter", "scale", "local", "sat", "step", "two", "one"))
    us, where = 1e6, "Sec. 3"
    us_num = lambda v: num(None if v is None else v * us, " µs")  # noqa: E731
    two_one = None if two is None or one is None else (two, one)

    def step_judge(v):
        if abs(v - 0.8) >= 0.05:
            return "fails", f"first load with loss {v:.2f}, not within 0.05 of 0.8"
        return ("simplified", f"first load with loss {v:.2f} (within 0.05 of 0.8), but here the shared 16 MB "
                "leaf buffer overflows; the model has no separate spine-buffer drop the paper names")

    return [
        judged("OPSquare: near-ideal throughput, zero loss up to load 0.6", "≈ ideal, 0 lost", ideal,
               "" if ideal is None else f"max deviation {dev:.1%}, {int(lost or 0)} lost",
               _rule(lambda v: v[0] <= 0.03 and not v[1],
                     "throughput within 3 % of the offered load and no packet lost, every size and "
                     "locality at load <= 0.6"), where=where, sql=CLAIM_SQL["ideal"]),
        judged("OPSquare: intra-pod packets within 0.5 µs", "<= 0.5 µs", intra, us_num(intra),
               _rule(lambda v: v <= 0.5e-6, "max p99 intra-pod latency over all loads <= 0.5 µs"),
               where=where, unit="s", sql=CLAIM_SQL["intra"]),
        judged("OPSquare: inter-pod packets within 6 µs", "<= 6 µs", inter, us_num(inter),
               _rule(lambda v: v <= 6e-6, "max p99 inter-pod latency over all loads <= 6 µs"),
               where=where, unit="s", sql=CLAIM_SQL["inter"]),
        judged("OPSquare: 1024 nodes worse than 256 by less than 1 µs", "< 1 µs", scale, us_num(scale),
               _rule(lambda v: v < 1e-6, "max increase of the inter-pod mean latency at equal load and "
                     "locality < 1 µs"), where=where, unit="s", sql=CLAIM_SQL["scale"]),
        judged("Leaf-spine: local traffic ≈ 1 µs (the switch latency) at low load", "≈ 1 µs", local, us_num(local),
               _rule(lambda v: abs(v - 1e-6) <= 0.2e-6, "mean intra-pod latency at load <= 0.1 within 0.2 µs of 1 µs"),
               where=where, unit="s", sql=CLAIM_SQL["local"]),
        judged("Leaf-spine: inter-pod latency saturates near 25 µs", "≈ 25 µs", sat, us_num(sat),
               _rule(lambda v: 20e-6 <= v <= 30e-6, "max mean inter-pod latency in 20-30 µs (the ceiling is "
                     "set by the 20 µs warm-up + 20 µs measurement run)"), where=where, unit="s",
               sql=CLAIM_SQL["sat"]),
        judged("Leaf-spine: loss steps up from load 0.8 at 33 % local traffic", "0.8", step, num(step),
               step_judge, where=where, sql=CLAIM_SQL["step"]),
        judged("Leaf-spine: only two-thirds-local traffic exceeds half the capacity", "> 0.5 vs < 0.5", two_one,
               "" if two_one is None else f"{two:.2f} vs {one:.2f}",
               _rule(lambda v: v[0] > 0.5 > v[1], "max node throughput above 0.5 at 67 % local and below 0.5 "
                     "at 33 % local"), where=where,
               sql=CLAIM_SQL["two"] + ";\n" + CLAIM_SQL["one"]),
    ]


SECTION = Section(
    key="packetsim",
    title="Packet level: OPSquare vs NVLink leaf-spine (seed 004)",
    intro="Uniform random 1500-byte traffic, 20 µs warm-up + 20 µs measurement, per conf/packetsim.yaml.",
    figures=tuple(
        Figure(name=f"packetsim_{metric}", title=label, sql=SQL, plot=_panel(metric, scale))
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
            ax.set_title(f"{TITLES[net]}: {label}", fontsize=9)
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
