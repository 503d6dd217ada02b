"""Export a canonical workload as Chakra execution traces plus ASTRA-sim configs.

    estimator export WORKLOAD [fabric=ideal|ring|nvlink_leafspine] [export.out=DIR] [export.prefix=NAME]
                              [export.astrasim=true|false] [output=json]

WORKLOAD is a ``.workload.json`` path or the name of one in ``traces_dir``. Writes
``<out>/<prefix>.<rank>.et`` (one per device), ``comm_group.json`` when collectives use device
subsets, and (``export.astrasim=true``) ``network.yml``/``system.json``/``remote_memory.json``
for the chosen fabric (``nvlink_leafspine`` needs ``fabric.latency_model=alpha`` and at most
``gpus_per_node`` devices; see :mod:`estimator.workloads.astrasim`). Everything is checked
before the first file is written (also the file count: at most ``limits.export_files`` devices);
each file is written atomically.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from estimator import limits
from estimator.config import to_container
from estimator.config_checks import check_output_dir
from estimator.errors import EstimatorError
from estimator.files import write_atomic
from estimator.timeline.dag import check_fits
from estimator.workloads import io
from estimator.workloads.astrasim import network_config, write_configs
from estimator.workloads.importers._common import safe_name
from estimator.workloads.importers.chakra import export_chakra

HELP = "export a workload as Chakra ET files (+ ASTRA-sim network/system configs)"
POSITIONAL = ("workload",)


def resolve_workload(value: str, traces_dir: str) -> Path:
    path = Path(value)
    if path.exists():
        return path
    if value.endswith(".json") or "/" in value:  # a path, not the name of a workload in traces_dir
        raise EstimatorError(f"{value}: no such workload file")
    named = Path(traces_dir) / f"{value}{io.SUFFIX}"
    if named.exists():
        return named
    raise EstimatorError(f"{value}: no such workload file (nor {named})")


def _planned(cfg: DictConfig) -> tuple[Any, Path, str, dict[str, Any] | None]:
    """(workload, output folder, file prefix, fabric config or None): everything checked before the
    first file is written."""
    if not cfg.get("workload"):
        raise EstimatorError("estimator export: missing WORKLOAD argument (estimator export WORKLOAD)")
    opts = to_container(cfg.export)
    if opts.get("format", "chakra") != "chakra":
        raise EstimatorError(f"export.format: unknown format {opts['format']!r} (known: chakra)")
    workload = io.load(resolve_workload(str(cfg.workload), str(cfg.traces_dir)))
    if workload.devices > limits.get().export_files:  # one file per device: refused before any is written
        raise EstimatorError(f"export: workload {safe_name(workload.name)!r} has {workload.devices} devices, one ET "
                             f"file each: more than limits.export_files = {limits.get().export_files} "
                             "(raise it if this is real)")
    out = Path(opts["out"]) if opts.get("out") else Path("exports") / safe_name(workload.name)  # a name from a file
    check_output_dir(str(out), "export.out")
    prefix = str(opts.get("prefix") or safe_name(workload.name))
    fabric = to_container(cfg.fabric) if opts.get("astrasim", True) else None
    if fabric is not None:
        check_fits(workload, str(fabric["name"]), int(fabric["nodes"]))  # as estimate refuses it
        network_config(fabric, workload.devices)
    return workload, out, prefix, fabric


def check(cfg: DictConfig) -> None:
    """``--check``: the workload read and every check a run makes before writing; nothing written."""
    _planned(cfg)


def run(cfg: DictConfig) -> dict[str, Any]:
    workload, out, prefix, fabric = _planned(cfg)
    result = export_chakra(workload, out, prefix)
    if fabric is not None:
        try:
            result["astrasim"] = write_configs(fabric, workload.devices, out, write_atomic)
        except OSError as exc:
            raise EstimatorError(f"{out}: cannot write ASTRA-sim configs ({exc.strerror or exc})") from None
    result.update(workload=workload.name, output=str(out))
    return result


def format_text(result: dict[str, Any]) -> str:
    lines = [f"exported {result['workload']!r}: {result['ranks']} Chakra ET file(s), {result['et_nodes']} ET nodes "
             f"-> {result['output']}/"]
    if result.get("astrasim"):
        lines.append("ASTRA-sim configs: " + ", ".join(Path(p).name for p in result["astrasim"]))
    if result["cross_rank_deps_dropped"]:
        lines.append(f"note: {result['cross_rank_deps_dropped']} cross-rank compute dependencies cannot be "
                     "expressed per rank and were left out of data_deps")
    return "\n".join(lines)
