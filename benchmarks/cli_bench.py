"""CLI latency: help, a warm data-parallel estimate, a repeated large-model estimate (issue #27).

    python benchmarks/cli_bench.py [--runs 10]

Each command runs as a fresh process (``python -m estimator.cli ...``, as the console script does)
``--runs`` times after one warm-up run that fills the caches a user's second call finds (the
composition cache; for the large model, the layer-capture cache in ``~/.cache/estimator``); the
minimum and median wall times are printed, with the machine's load average before and after and the
commit measured. Targets (issue #27, on a quiet machine): help <= 0.5 s, a repeated large-model
estimate <= 1 s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASES = {
    "estimator --help": ["--help"],
    "estimator (bare)": [],
    "estimate resnet50 (data parallel, warm)": ["estimate", "model=resnet50", "fabric=ideal", "fabric.nodes=8"],
    "estimate gpt3_175b tp8 pp16 (repeated)": ["estimate", "model=gpt3_175b", "parallelism=hybrid", "system=dgx_a100",
                                                "fabric.nodes=1024", "parallelism.tp=8", "parallelism.pp=16",
                                                "parallelism.recompute=full"],
    "estimate llama2_70b placement=auto (repeated)": ["estimate", "model=llama2_70b", "parallelism=hybrid",
                                                       "fabric=nvlink_leafspine", "fabric.nodes=4096",
                                                       "parallelism.placement=auto"],
}


def wall(args: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "estimator.cli", *args], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--only", nargs="*", default=None, help="case names (substrings) to run")
    args = ap.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    print(f"commit {commit}, {time.strftime('%Y-%m-%d %H:%M')}, load average before {os.getloadavg()}")
    for name, argv in CASES.items():
        if args.only and not any(s in name for s in args.only):
            continue
        wall(argv)  # warm-up: caches filled as by a user's first call
        times = [wall(argv) for _ in range(args.runs)]
        print(f"{name:<48} min {min(times):6.3f} s   median {statistics.median(times):6.3f} s   ({args.runs} runs)",
              flush=True)
    print(f"load average after {os.getloadavg()}")


if __name__ == "__main__":
    main()
