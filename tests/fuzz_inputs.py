"""Mutation classes and per-format seeds for fuzzing every input format (used by
``tests/test_fuzz_inputs.py`` with hypothesis and by ``benchmarks/fuzz_inputs.py`` for a longer run
that prints tried / failures per format).

A *failure* is anything but: the file loads into a valid workload/topology whose canonical form
serialises (no NaN/Infinity slips through), or an :class:`EstimatorError` of one short line.
"""

from __future__ import annotations

import json
import random
import re
import struct
import sys
from collections.abc import Callable
from pathlib import Path

from estimator.errors import EstimatorError

REPO = Path(__file__).resolve().parents[1]
CLASSES = ("truncate", "bitflip", "splice", "nan_inf", "huge_int", "deep", "utf16")
_NUMBER = re.compile(rb"(?<![A-Za-z_\"])-?\d+(\.\d+)?([eE][+-]?\d+)?")


def mutate(data: bytes, other: bytes, cls: str, rng: random.Random) -> bytes:
    """Apply one mutation class to ``data`` (``other`` is a second seed for splices)."""
    n = len(data)
    if cls == "truncate":
        return data[: rng.randrange(n)] if n else data
    if cls == "bitflip":
        out = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(n)
            out[i] ^= 1 << rng.randrange(8)
        return bytes(out)
    if cls == "splice":
        i, j = rng.randrange(n + 1), rng.randrange(len(other) + 1)
        return data[:i] + other[j:]
    if cls in ("nan_inf", "huge_int"):
        new = (rng.choice([b"NaN", b"Infinity", b"-Infinity", b"1e999", b"-1e400"]) if cls == "nan_inf"
               else rng.choice([b"9223372036854775808", b"18446744073709551616", b"-9223372036854775809",
                                b"1" + b"0" * 40, b"99999999999999"]))
        spots = list(_NUMBER.finditer(data))
        if spots:  # a text format: replace one number token
            m = rng.choice(spots)
            return data[: m.start()] + new + data[m.end():]
        if n >= 8:  # a binary format: overwrite an aligned 4/8-byte word with NaN/Inf/2^63
            i = rng.randrange(0, n - 8) & ~3
            word = (struct.pack("<d", rng.choice([float("nan"), float("inf")])) if cls == "nan_inf"
                    else struct.pack("<Q", rng.choice([2**63, 2**64 - 1, 10**14])))
            return data[:i] + word + data[i + 8:]
        return data
    if cls == "deep":
        depth = rng.choice([1000, 100_000])
        stripped = data.lstrip()
        if stripped[:1] in (b"{", b"["):  # JSON: a deep array as the value of the first key / element
            i = data.index(stripped[:1]) + 1
            colon = data.find(b":", i)
            at = colon + 1 if stripped[:1] == b"{" and colon > 0 else i
            tail = data[at:].lstrip()
            end = b"," if tail[:1] not in (b"}", b"]") else b""
            return data[:at] + b"[" * depth + b"]" * depth + end + data[at:]
        if data[:1].isalpha():  # YAML: a deep flow sequence
            return b"deep: " + b"[" * depth + b"]" * depth + b"\n" + data
        return b"[" * depth + data  # binary: garbage prefix
    if cls == "utf16":
        return data.decode("utf-8", "replace").encode(rng.choice(["utf-16", "utf-16-le", "utf-32"]))
    raise ValueError(cls)


def _seed_bytes() -> dict[str, list[tuple[bytes, str]]]:
    """Per format: (valid file bytes, suffix) seeds."""
    sys.path.insert(0, str(REPO / "tests"))
    from helpers import chain_workload
    from test_export_chakra import COMP, et_node
    from test_import_flexflow import mlp_cg
    from test_import_horovod import timeline
    from test_import_kineto import gpu_style_trace
    from test_import_topoopt import small_graph

    from estimator.workloads import io
    from estimator.workloads.importers.chakra_schema import GlobalMetadata, write_messages
    from estimator.workloads.importers.topoopt_schema import build_taskgraph

    wl = chain_workload([1e-3, 2e-3], [2e-3, 1e-3], 1e-4, [1024, 4096])
    seeds = {
        "topoopt": [(build_taskgraph(small_graph()), ".fbuf")],
        "kineto": [(json.dumps(gpu_style_trace()).encode(), ".json")],
        "horovod": [(("[\n" + ",\n".join(json.dumps(e) for e in timeline(ranks=2)) + "]").encode(), ".json")],
        "flexflow": [(json.dumps(mlp_cg()).encode(), ".json")],
        "chakra": [(write_messages([GlobalMetadata(version="0.0.4"), et_node(1, "a", COMP, duration=5)]), ".0.et")],
        "workload": [(io.dumps(wl).encode(), ".workload.json")],
        "topology": [((REPO / "topologies" / n).read_bytes(), ".yaml") for n in ("two_leaves.yaml", "torus_4x4.yaml")],
    }
    for p in sorted(Path("/work/shared/fixtures/topoopt").glob("*vgg*.fbuf"))[:1]:
        seeds["topoopt"].append((p.read_bytes(), ".fbuf"))
    return seeds


def loader(fmt: str) -> Callable[[Path], object]:
    """The in-process entry point the CLI uses for ``fmt``; returns what it loaded."""
    if fmt == "workload":
        from estimator.workloads import io

        def load_workload(path: Path) -> object:
            w = io.load(path)
            io.dumps(w)  # the canonical form must serialise (NaN/Infinity would fail here)
            return w

        return load_workload
    if fmt == "topology":
        from estimator.topology.loader import load_topology

        return load_topology

    def load_trace(path: Path) -> object:
        from estimator.workloads import io
        from estimator.workloads.importers import import_file

        w, _ = import_file(path, fmt)
        io.dumps(w)
        return w

    return load_trace


def check_one(fmt: str, blob: bytes, suffix: str, folder: Path) -> str | None:
    """Load one mutant; return None when the outcome is acceptable, else a description."""
    path = folder / f"mutant{suffix}"
    path.write_bytes(blob)
    try:
        loader(fmt)(path)
    except EstimatorError as exc:
        msg = str(exc)
        if "\n" in msg or len(msg) > 600:
            return f"error message not one short line: {msg[:200]!r}"
    except Exception as exc:  # noqa: BLE001 - any other exception is the failure being looked for
        return f"{type(exc).__name__}: {str(exc)[:200]}"
    finally:
        path.unlink(missing_ok=True)
    return None


SEEDS: dict[str, list[tuple[bytes, str]]] = {}


def seeds() -> dict[str, list[tuple[bytes, str]]]:
    if not SEEDS:
        SEEDS.update(_seed_bytes())
    return SEEDS
