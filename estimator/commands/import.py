"""Import a foreign trace and write it as a canonical workload.

    estimator import FILE [importer.format=auto|topoopt|flexflow|kineto|horovod|chakra]
                          [importer.name=NAME] [importer.out=PATH] [output=json]

FILE may also be a directory of per-rank Kineto traces (one ``torch.profiler`` JSON per rank).
The format is detected from the file's first bytes unless ``importer.format`` forces one. The
workload goes to ``importer.out`` or ``${traces_dir}/<name>.workload.json``, written atomically:
on any error nothing is written. Prints the format, node counts by kind, devices and the path.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from estimator.config import to_container
from estimator.errors import EstimatorError
from estimator.workloads import io
from estimator.workloads.importers import import_file
from estimator.workloads.importers._common import number

HELP = "import a TopoOpt/FlexFlow/Kineto/Horovod/Chakra trace as a canonical workload"
POSITIONAL = ("file",)


def save_atomically(workload: Any, out: Path) -> Path:
    """``io.save`` with file-system errors turned into one line naming the output."""
    try:
        return io.save(workload, out)
    except OSError as exc:
        raise EstimatorError(f"{out}: cannot write workload ({exc.strerror or exc})") from None


def check(cfg: DictConfig) -> None:
    """``--check`` (and a run, first): ``importer.ranks`` / ``iteration`` whatever the format (a
    TopoOpt file ignores them, but a negative one is still a mistake); the file is read by the run."""
    opts = to_container(cfg.importer)
    for key, minimum in (("ranks", 1), ("iteration", 0)):
        if opts.get(key) is not None:
            number(opts[key], f"importer.{key}", minimum=minimum, integer=True)


def run(cfg: DictConfig) -> dict[str, Any]:
    file = cfg.get("file")
    if not file:
        raise EstimatorError("estimator import: missing FILE argument (estimator import FILE)")
    opts = to_container(cfg.importer)
    check(cfg)
    workload, fmt = import_file(file, opts.get("format") or "auto", opts.get("name"), opts)
    out = Path(opts["out"]) if opts.get("out") else Path(cfg.traces_dir) / f"{workload.name}{io.SUFFIX}"
    save_atomically(workload, out)
    kinds = Counter(n.kind for n in workload.nodes)
    return {
        "format": fmt,
        "name": workload.name,
        "nodes": len(workload.nodes),
        "compute": kinds.get("compute", 0),
        "collective": kinds.get("collective", 0),
        "p2p": kinds.get("p2p", 0),
        "devices": workload.devices,
        "comm_bytes": workload.comm_bytes(),
        "output": str(out),
    }


def format_text(result: dict[str, Any]) -> str:
    return (f"imported {result['format']} trace as {result['name']!r}: {result['nodes']} nodes "
            f"({result['compute']} compute, {result['collective']} collective, {result['p2p']} p2p) "
            f"on {result['devices']} devices -> {result['output']}")
