"""Timings of issue #14's targets (run: python benchmarks/llm_bench.py; only the MoE search: ... llm_bench.py moe).

* GPT-3 175B on 1,024 GPUs, fixed layout (tp 8, pp 16, dp 8): first call (captures the layer
  shards on the meta device) and a warm call (the in-process target: < 100 ms).
* placement=auto for GPT-3 175B on 4,096 GPUs (target: < 60 s on one core), cold and warm.
* The same fixed layout on a fat tree, where every group is priced together with its sibling
  groups on the topology (estimator/parallel/concurrent.py): cold (routes compiled) and warm.
* The same fixed layout on the OCS, every group on its own circuits plus the step's circuit plan
  (estimator/fabrics/ocs.py group_cost, estimator/parallel/circuits.py): cold and warm.
* placement=auto for DeepSeek-V3 on 1,024 H100 (fp8, global batch 8192; the search tries ep, etp and the
  layouts: ~212): cold (a fresh capture cache dir: every MoE layer captured, its attention half once per tp / sp,
  its MoE half per etp / ep) and warm (the in-process caches cleared, captures read from that dir, as a
  repeated CLI call).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

import estimator
from estimator.estimate import estimate
from estimator.parallel.layer import capture_parts
from estimator.parallel.step import part_times

DGX_A100 = ["system=dgx_a100"]


def timed(overrides, system=DGX_A100, model="gpt3_175b"):
    cfg = estimator.resolve_config([f"model={model}", "parallelism=hybrid", *system, *overrides])
    t0 = time.perf_counter()
    result = estimate(cfg)
    return time.perf_counter() - t0, result.metrics


def main() -> None:
    fixed = ["fabric.nodes=1024", "parallelism.tp=8", "parallelism.pp=16"]
    cold, m = timed(fixed)
    warm = min(timed(fixed)[0] for _ in range(5))
    print(f"175B on 1024 GPUs fixed {m['layout']}: cold {cold:.2f} s, warm {warm * 1e3:.2f} ms; "
          f"step {m['iter_time_s']:.2f} s, MFU {m['mfu']:.3f}")
    auto = ["fabric.nodes=4096", "parallelism.placement=auto"]
    cold, m = timed(auto)
    warm, _ = timed(auto)
    print(f"175B on 4096 GPUs placement=auto: cold {cold:.1f} s, warm {warm:.2f} s, {m['layouts_evaluated']} layouts; "
          f"chose {m['layout']}, step {m['iter_time_s']:.2f} s, MFU {m['mfu']:.3f}")
    tree = ["device=a100", "fabric=fattree"]
    cold, m = timed(fixed, tree)
    warm = min(timed(fixed, tree)[0] for _ in range(3))
    print(f"175B on a 1024-GPU fat tree fixed {m['layout']} (concurrent groups): cold {cold:.2f} s, "
          f"warm {warm * 1e3:.2f} ms; step {m['iter_time_s']:.2f} s")
    ocs = ["device=a100", "fabric=ocs", "fabric.topology=ring"]
    cold, m = timed(fixed, ocs)
    warm = min(timed(fixed, ocs)[0] for _ in range(3))
    print(f"175B on a 1024-server OCS (ring circuits per group) fixed {m['layout']}: cold {cold:.2f} s, "
          f"warm {warm * 1e3:.2f} ms; step {m['iter_time_s']:.2f} s, {m['circuit_plan']}, "
          f"reconfiguration {m['reconfig_time_s']:.2f} s")

    moe_search()


def moe_search() -> None:
    """The MoE layout search, cold (fresh capture cache dir) and warm (captures read back from it)."""
    args = (["fabric.nodes=1024", "parallelism.global_batch=8192", "precision=fp8"], ["system=dgx_h100"], "deepseek_v3")
    before = os.environ.get("ESTIMATOR_CACHE")
    with tempfile.TemporaryDirectory() as cache:
        os.environ["ESTIMATOR_CACHE"] = cache
        try:
            cold, m = timed(*args)
            capture_parts.cache_clear()  # the in-process caches: the next call reads the disk
            part_times.cache_clear()
            warm, _ = timed(*args)
        finally:
            if before is None:
                os.environ.pop("ESTIMATOR_CACHE")
            else:
                os.environ["ESTIMATOR_CACHE"] = before
    print(f"DeepSeek-V3 on 1024 H100 placement=auto fp8: cold {cold:.1f} s, warm {warm:.2f} s, "
          f"{m['layouts_evaluated']} layouts; chose {m['layout']}, step {m['iter_time_s']:.2f} s")


if __name__ == "__main__":
    moe_search() if sys.argv[1:] == ["moe"] else main()
