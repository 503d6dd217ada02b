"""Large and hostile inputs stay bounded (issue #26): the trace interval queries are exact and
O(log n) (checked against brute force on random spans), the dependency count and JSON container
count are refused before the work they would cost, topology YAML has its own size limit."""

from __future__ import annotations

import json
import random

import pytest

from estimator import limits
from estimator.errors import EstimatorError
from estimator.workloads.importers.chrome_trace import Covered, Enclosers, Span, observed_order_deps


def _spans(rng: random.Random, n: int, tracks: int = 3) -> list[Span]:
    out = []
    for i in range(n):
        ts = rng.choice([rng.randrange(0, 50), rng.uniform(0, 50)])
        dur = rng.choice([0, rng.randrange(0, 30), rng.uniform(0, 60), 1000])
        out.append(Span(f"s{i}", "cpu_op", ts, dur, (0, rng.randrange(tracks)), {}, i))
    return out


def _brute_find(spans: list[Span], track, t: float) -> Span | None:
    order = sorted([s for s in spans if s.track == track], key=lambda s: (s.ts, -s.dur))
    best, best_pos = None, -1
    for pos, s in enumerate(order):
        if s.ts <= t <= s.end and (best is None or s.dur < best.dur or (s.dur == best.dur and pos > best_pos)):
            best, best_pos = s, pos
    return best


def test_enclosers_and_covered_match_brute_force():
    rng = random.Random(7)
    for _ in range(60):
        spans = _spans(rng, rng.randrange(1, 40))
        enc, cov = Enclosers(spans), Covered(spans)
        probes = [s.ts for s in spans] + [s.end for s in spans] + [rng.uniform(-5, 1100) for _ in range(30)]
        for t in probes:
            for track in {s.track for s in spans} | {(0, 99)}:
                assert enc.find(track, t) is _brute_find(spans, track, t)
            assert (t in cov) == any(s.ts <= t <= s.end for s in spans)


def _brute_deps(spans: list[Span], stream_of) -> dict[int, list[int]]:
    deps: dict[int, list[int]] = {}
    for i, s in enumerate(spans):
        mine = stream_of(s)
        own = [j for j in range(i) if stream_of(spans[j]) == mine]
        out = [own[-1]] if own else []
        seen = []
        for j in range(i):
            other = stream_of(spans[j])
            if other != mine and other not in seen:
                seen.append(other)
        for other in sorted(seen, key=lambda o: min(j for j in range(i) if stream_of(spans[j]) == o)):
            done = [(spans[j].end, j) for j in range(i) if stream_of(spans[j]) == other and spans[j].end <= s.ts]
            if done:
                out.append(max(done)[1])
        deps[i] = out
    return deps


def test_observed_order_deps_match_brute_force():
    rng = random.Random(3)
    for _ in range(60):
        spans = sorted(_spans(rng, rng.randrange(1, 30), tracks=4), key=lambda s: s.ts)
        got = observed_order_deps(spans, lambda s: s.track)
        want = _brute_deps(spans, lambda s: s.track)
        assert {i: sorted(d) for i, d in got.items()} == {i: sorted(d) for i, d in want.items()}


def test_dependency_budget_is_refused_before_building():
    spans = [Span(f"s{i}", "kernel", float(i), 1.0, (0, i), {}, i) for i in range(2000)]  # one stream each
    limits.configure({"graph_nodes": 1000})
    try:
        with pytest.raises(EstimatorError, match="limits.graph_nodes"):
            observed_order_deps(spans, lambda s: s.track)
    finally:
        limits.configure({"graph_nodes": limits.Limits().graph_nodes})


def test_json_containers_counted_before_parsing(tmp_path):
    from estimator.workloads import io

    path = tmp_path / "many.workload.json"
    path.write_text("[" + ",".join(["{}"] * 5000) + "]")
    limits.configure({"graph_nodes": 1000})
    try:
        with pytest.raises(EstimatorError, match="5001 JSON objects/arrays, more than 4000"):
            io.load(path)
    finally:
        limits.configure({"graph_nodes": limits.Limits().graph_nodes})


def test_topology_yaml_has_its_own_size_limit(tmp_path):
    from estimator.topology.loader import load_topology

    path = tmp_path / "t.yaml"
    links = "".join(f"  - [gpu{i}, s0]\n" for i in range(60_000))
    path.write_text(f"defaults: {{bandwidth_Bps: 1.0e9, latency_s: 1.0e-6}}\nendpoints: 60000\nswitches: [s0]\n"
                    f"links:\n{links}")  # ~1 MiB
    limits.configure({"topology_mb": 0.5})
    try:
        with pytest.raises(EstimatorError, match="limits.topology_mb"):
            load_topology(path)
        limits.configure({"topology_nodes": 10_000})
        with pytest.raises(EstimatorError, match="lines and commas"):
            load_topology(path)
    finally:
        limits.configure({"topology_nodes": limits.Limits().topology_nodes})  # every other limit: its default
    assert load_topology(path).num_endpoints == 60_000


def test_input_bench_generators_make_valid_files(tmp_path):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from input_bench import GENERATORS

    for fmt, (make, _suffix) in GENERATORS.items():
        data = make(20_000)
        assert len(data) >= 10_000, fmt  # about the asked size
        if fmt != "topology":
            json.loads(data)


def test_fuzz_harness_sees_hangs_crashes_and_memory_blowups(tmp_path):
    """The fuzzer's worker is killed on a time limit (a hang), notices a dead worker (a crash) and
    runs under an address-space limit (a blow-up is a MemoryError failure, not a stalled run)."""
    import subprocess
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import importlib.util

    spec = importlib.util.spec_from_file_location("fuzz_bench", Path(__file__).resolve().parents[1] / "benchmarks"
                                                  / "fuzz_inputs.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)

    class Fake(bench.Worker):
        def __init__(self, code: str) -> None:
            super().__init__(512, 1.0)
            self.code = code

        def _start(self):
            return subprocess.Popen([sys.executable, "-c", self.code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    text=True, preexec_fn=bench._limits(self.memory_mb))

    hang = Fake("import time; time.sleep(60)")
    assert hang.run("workload", tmp_path / "x").startswith("hang") and hang.restarts == 1
    crash = Fake("import sys; sys.stdin.readline(); sys.exit(3)")
    assert crash.run("workload", tmp_path / "x").startswith("crash")
    blowup = Fake("import json, sys\nsys.stdin.readline()\ntry:\n    b = bytearray(1 << 30)\n    p = None\n"
                  "except MemoryError:\n    p = 'MemoryError'\nprint(json.dumps({'problem': p}), flush=True)")
    assert blowup.run("workload", tmp_path / "x") == "MemoryError"
    real = bench.Worker(2048, 60.0)
    try:
        good = tmp_path / "w.workload.json"
        good.write_text(json.dumps({"format": "estimator.workload", "format_version": 1, "name": "w", "devices": 1,
                                    "batch_size": 1, "nodes": [{"id": 0, "name": "a"}]}))
        assert real.run("workload", good) is None
        bad = tmp_path / "b.workload.json"
        bad.write_text('{"format": "estimator.workload", "nodes": [{"id": 0, "deps": [Infinity]}]}')
        assert real.run("workload", bad) is None  # a one-line EstimatorError is the right outcome
    finally:
        real.stop()


def test_binary_formats_count_while_decoding(tmp_path):
    from test_export_chakra import COMP, et_node
    from test_import_topoopt import small_graph

    from estimator.workloads.importers import import_file
    from estimator.workloads.importers.chakra_schema import GlobalMetadata, write_messages
    from estimator.workloads.importers.topoopt_schema import build_taskgraph

    et = tmp_path / "t.0.et"
    et.write_bytes(write_messages([GlobalMetadata(version="0.0.4"),
                                   *(et_node(i, f"n{i}", COMP, duration=5) for i in range(1, 21))]))
    fbuf = tmp_path / "g.fbuf"
    fbuf.write_bytes(build_taskgraph(small_graph()))
    assert import_file(et)[0].nodes and import_file(fbuf)[0].nodes
    limits.configure({"graph_nodes": 3})
    try:
        with pytest.raises(EstimatorError, match="more than 3 node messages"):
            import_file(et)
        with pytest.raises(EstimatorError, match="limits.graph_nodes = 3"):
            import_file(fbuf)
    finally:
        limits.configure({"graph_nodes": limits.Limits().graph_nodes})
