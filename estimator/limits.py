"""Size and count limits checked before anything is parsed, built or allocated.

A corrupt or hostile input (a 300 MB file, a FIFO, a world size of 2**63, a topology with 10**9
nodes) must fail in bounded time and memory with one line, not exhaust the machine. The defaults
below are generous for every workload and fabric the papers use (the largest: 65,536-node
collectives in seed 002's OpTree sweeps, 5 M-node TopoOpt graphs) and are configurable in
``conf/config.yaml`` under ``limits:`` (``estimator import big.json limits.input_mb=2048``). The CLI
installs the composed values with :func:`configure` before any command runs.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from estimator.errors import EstimatorError


@dataclass(frozen=True)
class Limits:
    #: largest input file read (trace, workload, SQL, measurements), MiB; the JSON readers need about
    #: 9-13x the file size in memory and 20-45 s per 100 MB (benchmarks/input_bench.py,
    #: docs/reliability.md), so 256 MiB stays under ~3.5 GB and a few minutes.
    input_mb: float = 256.0
    #: largest topology YAML file, MiB: YAML costs ~30x JSON per byte (PyYAML builds every node in
    #: Python even with its C parser), ~70x the file size in memory; 16 MiB (~700,000 links) stays
    #: near 1 GB. Large shapes are declared with ``builder:`` and cost no file size.
    topology_mb: float = 16.0
    #: accelerators in one workload or fabric (seed 002 prices OpTree at 65,536 nodes).
    devices: int = 1 << 17
    #: nodes of one workload graph (TopoOpt's DLRM graphs have ~10^5; 5 M leaves 50x headroom).
    graph_nodes: int = 5_000_000
    #: vertices (endpoints + switches) of one topology, and links of one topology file.
    topology_nodes: int = 1 << 20
    #: per-device batch of an estimate and the capture batch (capture runs on this CPU).
    batch: int = 1 << 16
    capture_batch: int = 4096
    #: packets of one packet-level simulation (the 1,024-node, load 1.0 point of seed 004 has 12 M).
    sim_packets: int = 100_000_000
    #: grid points of one sweep.
    sweep_points: int = 2_000_000
    #: files one ``estimator export`` writes (one Chakra ET file per device; ASTRA-sim runs of
    #: the papers' sizes use up to a few thousand ranks).
    export_files: int = 4096
    #: points of one ``-m`` command line (each is composed and run as its own command, ~0.3 s
    #: uncached; 1,000 is minutes: a larger grid is a sweep, which runs ~10^3-10^4 points/s).
    multirun_points: int = 1000
    #: tenant requests of one ``estimator allocate`` run: about 60 us per request and policy (100,000 requests x the
    #: three policies took 16 s on the project's 2-core machine, measured in round h74), so 10^6 is a few minutes;
    #: the Lumorph comparison replays 500.
    alloc_requests: int = 1_000_000


_current = Limits()


def configure(values: Any) -> Limits:
    """Install limits from the config's ``limits`` mapping (unknown keys and bad values are errors)."""
    global _current
    if not values:
        return _current
    known = {f.name: f for f in fields(Limits)}
    kw: dict[str, Any] = {}
    for key, value in dict(values).items():
        if key not in known:
            raise EstimatorError(f"limits.{key}: unknown limit (known: {', '.join(known)})")
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0 or value != value:
            raise EstimatorError(f"limits.{key} must be a positive number, got {value!r}")
        if value == float("inf"):
            raise EstimatorError(f"limits.{key} must be finite, got {value!r}")
        kw[key] = float(value) if known[key].type == "float" else int(value)
    _current = replace(Limits(), **kw)
    return _current


def get() -> Limits:
    return _current


def check_count(value: Any, limit_name: str, what: str) -> int:
    """``value`` as an int in 1..limit (``limits.<limit_name>``), or one error line naming ``what``."""
    limit = getattr(_current, limit_name)
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise EstimatorError(f"{what} must be a whole number, got {_short(value)}")
    if value < 1:
        raise EstimatorError(f"{what} must be >= 1 (1..{limit}, limits.{limit_name}), got {value}")
    if value > limit:
        raise EstimatorError(f"{what} = {value} exceeds the limit of {limit} (raise limits.{limit_name} if this is real)")
    return value


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
