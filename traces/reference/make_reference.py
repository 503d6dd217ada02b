"""Regenerate the reference traces in this folder (the project's own captures, no third-party data).

``lenet5_gloo.kineto.json``: one data-parallel training iteration of LeNet-5 (the project's zoo
model, batch 64) under ``torch.profiler`` with c10d/Gloo gradient all-reduces (world size 1, file
store: the real code path of a DDP-style job on one CPU process). ``lenet5_gloo4.workload.json`` is
``estimator import`` of that trace replicated over 4 ranks, so it estimates at once::

    python traces/reference/make_reference.py
    estimator estimate workload=traces/reference/lenet5_gloo4.workload.json fabric=ideal fabric.nodes=4
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile

from estimator.workloads.zoo import build

HERE = Path(__file__).resolve().parent
LENET = {"name": "lenet5", "arch": "lenet5", "family": "vision", "input_size": 32, "num_classes": 10}


def capture(out: Path, batch: int = 64) -> None:
    torch.manual_seed(0)
    zoo = build(LENET)
    with tempfile.TemporaryDirectory() as tmp:
        dist.init_process_group("gloo", init_method=f"file://{tmp}/store", rank=0, world_size=1)
        try:
            args, target = zoo.make_inputs(batch, "cpu")
            opt = torch.optim.SGD(zoo.module.parameters(), lr=0.01)
            with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
                zoo.loss_fn(zoo.module(*args), target).backward()
                for p in zoo.module.parameters():
                    dist.all_reduce(p.grad)
                opt.step()
            prof.export_chrome_trace(str(out))
        finally:
            dist.destroy_process_group()


def main() -> None:
    trace = HERE / "lenet5_gloo.kineto.json"
    capture(trace)
    subprocess.run(
        [sys.executable, "-m", "estimator.cli", "import", str(trace), "importer.ranks=4",
         "importer.name=lenet5_gloo4", f"importer.out={HERE / 'lenet5_gloo4.workload.json'}"],
        check=True,
    )


if __name__ == "__main__":
    main()
