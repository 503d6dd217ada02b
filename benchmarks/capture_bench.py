"""Capture time per zoo model (build + warm-up + cost pass + timed pass) on this machine.

    python benchmarks/capture_bench.py [model ...]      # default: every conf/model/*.yaml

Prints one row per model: capture batch, ops, build and capture wall time, the profiled
iteration's wall time and the sum of its measured op durations. Nothing is written to traces/.
"""

from __future__ import annotations

import sys
import time

from estimator.config import compose, config_groups, to_container
from estimator.workloads import zoo
from estimator.workloads.capture import capture


def bench(name: str) -> dict:
    cfg = compose([f"model={name}"])
    model_cfg, cap = to_container(cfg.model), to_container(cfg.capture)
    batch = cap["batch"] or model_cfg.get("capture_batch", 1)
    t0 = time.perf_counter()
    model = zoo.build(model_cfg)
    t1 = time.perf_counter()
    w = capture(model, batch, cap["warmup_iters"], cap["seed"], model_cfg)
    t2 = time.perf_counter()
    return {
        "model": name,
        "batch": batch,
        "ops": len(w.nodes),
        "build_s": t1 - t0,
        "capture_s": t2 - t1,
        "iteration_s": w.meta["iteration_wall_s"],
        "op_sum_s": sum(n.duration_s or 0 for n in w.nodes),
        "gflop_per_sample": w.forward_flops / batch / 1e9,
    }


def main(names: list[str]) -> None:
    import torch

    names = names or config_groups()["model"]
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(
        f"{'model':<14}{'batch':>6}{'ops':>7}{'build s':>9}{'capture s':>11}{'iter s':>9}{'op sum s':>10}{'GFLOP/smp':>11}"
    )
    for name in names:
        r = bench(name)
        print(
            f"{r['model']:<14}{r['batch']:>6}{r['ops']:>7}{r['build_s']:>9.2f}{r['capture_s']:>11.2f}"
            f"{r['iteration_s']:>9.3f}{r['op_sum_s']:>10.3f}{r['gflop_per_sample']:>11.3f}"
        )
        sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
