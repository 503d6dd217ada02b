"""Report build speed (issue #27): the whole ``estimator report``, and drawing its figures the old way
against the new way.

    python benchmarks/report_bench.py [STORE] [--runs 3]

1. ``estimator report`` end to end on STORE (default ``results/estimates.duckdb``, the pipeline's),
   as a fresh process ``--runs`` times: wall and CPU (user + system) time, minimum and median.
2. Every figure of the report drawn from STORE twice, in this process, with the same plot functions:
   *old* — what the builder did before: ``tight_layout`` (a layout pass), then PNG at 120 dpi and SVG,
   each with ``bbox_inches="tight"`` (an extra draw each to find the bounding box); *new* —
   :func:`estimator.reports.render.drawn`: constrained layout computed during the one SVG draw.
   CPU time per way, summed over the figures.

The machine's load average is printed before and after, with the commit measured: timings on a
loaded machine are noisy, compare the two ways within one run.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def report_runs(store: Path, runs: int) -> None:
    walls, cpus = [], []
    with tempfile.TemporaryDirectory() as out:
        for _ in range(runs):
            before = os.times()
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "estimator.cli", "report", f"store={store}", f"report_dir={out}"],
                           cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            walls.append(time.perf_counter() - t0)
            after = os.times()
            cpus.append(after.children_user - before.children_user + after.children_system - before.children_system)
    print(f"estimator report: wall min {min(walls):.2f} s median {statistics.median(walls):.2f} s; "
          f"CPU min {min(cpus):.2f} s median {statistics.median(cpus):.2f} s ({runs} runs)", flush=True)


def figure_ways(store: Path) -> None:
    import duckdb
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from estimator.reports.plots import FIGSIZE, polish
    from estimator.reports.registry import sections
    from estimator.reports.render import drawn
    from estimator.reports.style import PALETTE

    def old(fig, df) -> None:
        f = plt.figure(figsize=FIGSIZE)
        try:
            with plt.rc_context({"axes.prop_cycle": matplotlib.cycler(color=PALETTE)}):
                fig.plot(df, f.add_subplot())
            for a in f.axes:
                polish(a)
            f.suptitle(fig.title, fontsize=10)
            f.tight_layout()
            for ext, dpi in (("png", 120), ("svg", None)):
                f.savefig(io.BytesIO(), format=ext, dpi=dpi, bbox_inches="tight")
        finally:
            plt.close(f)

    def new(fig, df) -> None:
        with drawn(fig, df):
            pass

    con = duckdb.connect(str(store), read_only=True)
    figures = []
    for sec in sections():
        for fig in sec.figures:
            try:
                df = con.sql(fig.sql).pl()
            except duckdb.Error:
                continue
            if not df.is_empty():
                figures.append((fig, df))
    new(*figures[0])  # warm-up: fonts, caches
    spent = {}
    for name, way in (("old (tight_layout, PNG + SVG, bbox tight)", old), ("new (constrained, one SVG)", new)):
        t0 = time.process_time()
        for fig, df in figures:
            way(fig, df)
        spent[name] = time.process_time() - t0
    for name, t in spent.items():
        print(f"{len(figures)} figures, {name:<42} CPU {t:6.2f} s ({1000 * t / len(figures):.0f} ms per figure)")
    first, second = spent.values()
    print(f"new / old: {second / first:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store", nargs="?", default=str(ROOT / "results" / "estimates.duckdb"))
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    store = Path(args.store).resolve()
    if not store.is_file():
        sys.exit(f"{store}: no such store (run the pipeline: snakemake --cores 2)")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    print(f"commit {commit}, store {store}, load average before {os.getloadavg()}")
    report_runs(store, args.runs)
    figure_ways(store)
    print(f"load average after {os.getloadavg()}")


if __name__ == "__main__":
    main()
