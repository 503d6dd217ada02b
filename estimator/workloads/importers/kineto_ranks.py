"""Import a directory of per-rank Kineto traces (one ``torch.profiler`` JSON file per rank).

Each file is read like a single trace (:func:`.kineto.trace_template`) but nothing is replicated:
rank ``r``'s ops run on device ``r`` with that rank's own measured durations (stragglers show).
A file's rank is ``distributedInfo.rank`` when every file has one, else its position in name
order. Collectives are matched across ranks by (process group, k-th collective of that group on
the rank): the k-th collective of a group is one node over the ranks that hold it, depending on
every rank's predecessors, and the ranks must agree on its kind and size. Ranks that issue the
group's collectives in different orders produce a dependency cycle, reported as an error (it
would deadlock a real run).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from estimator.errors import EstimatorError
from estimator.workloads.graph import Node, Workload
from estimator.workloads.importers._common import BadInput, check_scale, read_bytes
from estimator.workloads.importers.kineto import collective_fields, compute_fields, trace_template


def rank_traces(directory: Path) -> list[Path]:
    files = sorted(p for p in directory.iterdir() if p.is_file() and p.name.endswith(".json"))
    if not files:
        raise BadInput("directory holds no per-rank Kineto trace files (*.json)")
    return files


def _ranked(directory: Path, options: dict[str, Any]) -> list[tuple[int, Path, list[dict[str, Any]], str]]:
    loaded = []
    for path in rank_traces(directory):
        try:
            doc, template, device, _ = trace_template(read_bytes(path), options)
        except EstimatorError as exc:
            raise BadInput(f"{path.name}: {exc}") from None
        info = doc.get("distributedInfo")
        rank = info.get("rank") if isinstance(info, dict) else None
        loaded.append((rank, path, template, device))
    n = len(loaded)
    declared = [r for r, *_ in loaded]
    if all(isinstance(r, int) and not isinstance(r, bool) for r in declared):
        if sorted(declared) != list(range(n)):
            raise BadInput(f"the {n} traces declare ranks {sorted(declared)[:8]}, expected 0..{n - 1} once each")
        return sorted(loaded, key=lambda x: x[0])
    return [(r, *rest) for r, (_, *rest) in enumerate(loaded)]


def load_directory(directory: Path, name: str, options: dict[str, Any]) -> Workload:
    ranked = _ranked(directory, options)
    n = len(ranked)
    check_scale(n, sum(len(t) for _, _, t, _ in ranked), "ranks x traced nodes")
    keys: dict[tuple, int] = {}
    placed: dict[tuple, list[tuple[int, dict[str, Any]]]] = {}
    per_rank: list[list[tuple]] = []
    for rank, _, template, _ in ranked:
        ordinal: dict[Any, int] = {}
        mine = []
        for i, t in enumerate(template):
            if t["kind"] == "collective":
                group = None if t["group"] is None else tuple(t["group"])
                k = ordinal.get(group, 0)
                ordinal[group] = k + 1
                key: tuple = ("coll", group, k)
            else:
                key = ("op", rank, i)
            keys.setdefault(key, len(keys))
            placed.setdefault(key, []).append((rank, t))
            mine.append(key)
        per_rank.append(mine)
    nodes: list[Node] = []
    for key, nid in sorted(keys.items(), key=lambda kv: kv[1]):
        copies = placed[key]
        rank, t = copies[0]
        deps = sorted({keys[per_rank[r][d]] for r, c in copies for d in c["deps"]})
        if key[0] == "op":
            nodes.append(Node(nid, t["name"], deps=tuple(deps), **compute_fields(t, rank)))
            continue
        where = f"collective #{key[2]} of process group {list(key[1]) if key[1] else 'default'}"
        if {(c["collective"], c["comm_bytes"]) for _, c in copies} != {(t["collective"], t["comm_bytes"])}:
            raise BadInput(f"{where}: ranks disagree on its kind or size "
                           f"({sorted({(c['collective'], c['comm_bytes']) for _, c in copies})[:3]})")
        holders = tuple(sorted(r for r, _ in copies))
        group = key[1] if key[1] is not None else holders
        if any(not 0 <= r < n for r in group):
            raise BadInput(f"{where}: group {list(group)[:8]} names ranks outside the {n} trace files")
        nodes.append(Node(nid, t["name"], deps=tuple(deps), **collective_fields(t, group)))
    meta = {"kineto": {"rank_files": [p.name for _, p, _, _ in ranked], "ranks": n}}
    return Workload(name=name, nodes=tuple(nodes), source=f"kineto:{name}", devices=n,
                    capture_device=ranked[0][3], meta=meta).validate()
