"""Capture one training iteration of a zoo model with the PyTorch profiler on the CPU.

    estimator capture model=resnet50 [capture.batch=N] [capture.warmup_iters=1] [capture.seed=0]
                      [capture.force=false] [traces_dir=traces] [output=json]

Runs ``capture.warmup_iters`` untimed iterations, then profiles forward + backward + an SGD
(momentum 0.9) step at the model's ``capture_batch`` (or ``capture.batch``) and writes
``${traces_dir}/<model>.workload.json`` atomically. Per op: aten name, op class, phase, input
shapes, FLOPs (PyTorch's counter), bytes moved, measured duration; plus every gradient's size and
the order it becomes ready in backward. When the trace already there has the same content (ops,
shapes, FLOPs, bytes, gradients, settings; only measured timings differ) it is left untouched, so
pipelines that depend on it stay up to date; ``capture.force=true`` rewrites it. See ``estimator.workloads.capture`` for the assumptions.
"""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig

from estimator.workloads.capture import capture_to_file, summary

HELP = "profile one training iteration of a zoo model (torch.profiler, CPU) into traces/"


def run(cfg: DictConfig) -> dict[str, Any]:
    workload, path, written = capture_to_file(cfg)
    return {**summary(workload), "output": str(path), "written": written}


def format_text(result: dict[str, Any]) -> str:
    return (
        f"captured {result['name']} at batch {result['batch_size']}: {result['ops']} ops, "
        f"{result['params']:,} parameters, {result['forward_flops'] / 1e9:.3f} GFLOP forward per sample, "
        f"gradients {result['gradient_bytes']:,} B, capture {result['capture_wall_s']:.1f} s -> {result['output']}"
        + ("" if result["written"] else " (unchanged: kept the existing file; capture.force=true rewrites it)")
    )
