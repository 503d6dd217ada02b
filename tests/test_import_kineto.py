"""Kineto / Chrome trace JSON: a trace captured here with torch.profiler (CPU), a hand-built
GPU-style trace (labelled as such: kernels + NCCL kernels, no GPU here), and 200+ bad files."""

from __future__ import annotations

import copy
import json
import random
from collections import Counter

import pytest
from fixtures.importing import assert_cli_rejects, assert_rejected, random_blobs, truncations

from estimator.errors import EstimatorError
from estimator.workloads.importers import import_file


@pytest.fixture(scope="module")
def cpu_trace(tmp_path_factory):
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, schedule

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(2, 8)
    path = tmp_path_factory.mktemp("kineto") / "tiny_mlp.json"
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                 schedule=schedule(wait=0, warmup=1, active=2, repeat=1),
                 on_trace_ready=lambda p: p.export_chrome_trace(str(path))) as prof:
        for _ in range(3):
            opt.zero_grad()
            model(x).sum().backward()
            opt.step()
            prof.step()
    return path


def test_captured_cpu_trace(cpu_trace):
    w, fmt = import_file(cpu_trace)
    assert fmt == "kineto" and w.devices == 1 and w.capture_device == "cpu"
    phases = Counter(n.phase for n in w.nodes)
    assert phases["forward"] >= 3 and phases["backward"] >= 3 and phases["optimizer"] >= 1
    names = [n.op for n in w.nodes]
    assert names.count("aten::linear") == 2  # only the last ProfilerStep is imported
    assert all(n.duration_s is not None and n.duration_s >= 0 for n in w.nodes)
    linear = next(n for n in w.nodes if n.op == "aten::linear")
    assert linear.input_shapes == ((2, 8), (16, 8), (16,))
    order = [n.id for n in w.topological_order()]
    assert order == sorted(order)  # one thread: a chain in time order


def test_captured_trace_replicated_over_ranks(cpu_trace):
    one, _ = import_file(cpu_trace)
    four, _ = import_file(cpu_trace, options={"ranks": 4})
    assert four.devices == 4 and len(four.nodes) == 4 * len(one.nodes)
    assert Counter(n.device for n in four.nodes) == {r: len(one.nodes) for r in range(4)}


def test_captured_gloo_collectives(tmp_path):
    """A real trace with c10d/Gloo all-reduces (one process, world size 1, file store)."""
    torch = pytest.importorskip("torch")
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile

    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with Gloo not available")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        model = torch.nn.Linear(16, 8)
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            model(torch.randn(4, 16)).sum().backward()
            for p in model.parameters():
                dist.all_reduce(p.grad)
        prof.export_chrome_trace(str(tmp_path / "gloo.json"))
    finally:
        dist.destroy_process_group()
    w, _ = import_file(tmp_path / "gloo.json", options={"ranks": 2})
    colls = [n for n in w.nodes if n.kind == "collective"]
    assert sorted(n.comm_bytes for n in colls) == [8 * 4, 8 * 16 * 4]  # bias, weight (float32)
    assert all(n.collective == "all_reduce" and n.group == (0, 1) for n in colls)
    assert w.devices == 2 and w.meta["kineto"]["world_size"] == 1


def gpu_style_trace() -> dict:
    """HAND-BUILT, GPU-STYLE trace in torch.profiler's export layout (no GPU on this machine):
    one forward GEMM, one backward GEMM, then an NCCL all-reduce launched from record_param_comms."""
    cpu = {"pid": 10, "tid": 10}
    bwd = {"pid": 10, "tid": 11}
    return {
        "schemaVersion": 1,
        "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 4},
        "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB", "totalGlobalMem": 85899345920}],
        "traceEvents": [
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 100, "dur": 20, **cpu,
             "args": {"External id": 1, "Input Dims": [[64, 128], [128, 256]]}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 105, "dur": 5, **cpu,
             "args": {"correlation": 1}},
            {"ph": "X", "cat": "kernel", "name": "ampere_sgemm_64x64_nn", "ts": 120, "dur": 50, "pid": 0,
             "tid": 7, "args": {"device": 0, "stream": 7, "correlation": 1}},
            {"ph": "X", "cat": "cpu_op", "name": "autograd::engine::evaluate_function: MmBackward0", "ts": 200,
             "dur": 40, **bwd, "args": {}},
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 205, "dur": 20, **bwd, "args": {}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 210, "dur": 5, **bwd,
             "args": {"correlation": 2}},
            {"ph": "X", "cat": "kernel", "name": "ampere_sgemm_128x64_tn", "ts": 230, "dur": 80, "pid": 0,
             "tid": 7, "args": {"device": 0, "stream": 7, "correlation": 2}},
            {"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "ts": 320, "dur": 15, **cpu,
             "args": {"Collective name": "allreduce", "In msg nelems": 1048576, "Out msg nelems": 1048576,
                      "dtype": "Float", "Group size": 4, "Process Group Ranks": "[0, 1, 2, 3]"}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 325, "dur": 5, **cpu,
             "args": {"correlation": 3}},
            {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgs)",
             "ts": 330, "dur": 400, "pid": 0, "tid": 20, "args": {"device": 0, "stream": 20, "correlation": 3}},
            {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllGather_RING_LL", "ts": 800, "dur": 100,
             "pid": 0, "tid": 20, "args": {"device": 0, "stream": 20, "correlation": 99,
                                           "Collective name": "_allgather_base", "In msg nelems": 1000,
                                           "dtype": "BFloat16"}},
        ],
    }


def test_gpu_style_trace(tmp_path):
    path = tmp_path / "gpu_style.json"
    path.write_text(json.dumps(gpu_style_trace()))
    w, fmt = import_file(path)
    assert fmt == "kineto" and w.devices == 4 and w.capture_device == "nvidia a100-sxm4-80gb"
    kinds = Counter(n.kind for n in w.nodes)
    assert kinds == {"compute": 8, "collective": 2}
    ar, ag = (n for n in w.nodes if n.kind == "collective")
    assert (ar.collective, ar.comm_bytes, ar.group) == ("all_reduce", 4 * 1048576.0, (0, 1, 2, 3))
    assert (ag.collective, ag.comm_bytes) == ("all_gather", 4 * 2000.0)  # gathered buffer: 4 ranks x 1000 bf16
    bwd = [n for n in w.nodes if n.kind == "compute" and n.phase == "backward"]
    assert len(bwd) == 4 and {n.device for n in bwd} == {0, 1, 2, 3}
    assert set(ar.deps) == {n.id for n in bwd}  # waits for every rank's last kernel
    fwd = next(n for n in w.nodes if n.phase == "forward" and n.kind == "compute")
    assert fwd.duration_s == pytest.approx(50e-6) and fwd.attrs["cpu_op"] == "aten::mm"


def _inconsistent(rng: random.Random) -> list[bytes]:
    out = []
    for k in range(60):
        doc = gpu_style_trace()
        ev = doc["traceEvents"]
        i = rng.randrange(len(ev))
        case = k % 12
        if case == 0:
            ev[i]["dur"] = -rng.uniform(1, 100)
        elif case == 1:
            ev[i]["ts"] = "soon"
        elif case == 2:
            del ev[7]["args"]["In msg nelems"]
        elif case == 3:
            ev[7]["args"]["Collective name"] = "teleport"
        elif case == 4:
            ev[7]["args"]["Process Group Ranks"] = f"[0, {4 + k}]"
        elif case == 5:
            ev[7]["args"]["dtype"] = "Quaternion"
        elif case == 6:
            ev[7]["args"]["In msg nelems"] = -rng.randrange(1, 100)
        elif case == 7:
            doc["traceEvents"] = []
        elif case == 8:
            doc["traceEvents"] = {"not": "a list"}
        elif case == 10:  # a corrupt world size must not allocate 10**20 ranks
            doc["distributedInfo"]["world_size"] = 10**12
        elif case == 11:  # ids must be scalars
            ev[i]["pid"] = {"nested": [k]}
        else:
            ev[i]["args"] = ["not", "an", "object"]
        out.append(json.dumps(doc).encode())
    return out


def test_bad_files_rejected_in_process(tmp_path, cpu_trace):
    rng = random.Random(1121)
    good = cpu_trace.read_bytes()
    gpu = json.dumps(gpu_style_trace()).encode()
    wrong_magic = [b"[" + good[1:], b"\x00" + good[1:], b"<html>" + good, json.dumps({"traceEvents": 5}).encode(),
                   b"42", b"null", json.dumps(copy.deepcopy(gpu_style_trace())["traceEvents"]).encode()[:-5]]
    blobs = (truncations(good, rng, 50) + truncations(gpu, rng, 40) + random_blobs(rng, 50)
             + wrong_magic * 3 + _inconsistent(rng))
    assert len(blobs) >= 200
    messages = assert_rejected(tmp_path, blobs, "kineto", ".json")
    joined = "\n".join(messages)
    for problem in ("JSON error", "no traceEvents", "finite number", "no message size", "unknown collective",
                    "outside 0..3", "unknown dtype", "no CPU ops", "UTF-8", "exceeds the limit",
                    "expected a number or string id"):
        assert problem in joined, problem


def test_bad_files_rejected_by_cli(tmp_path, cpu_trace):
    good = cpu_trace.read_bytes()
    assert_cli_rejects(tmp_path, [good[: len(good) // 2], _inconsistent(random.Random(3))[2]], ".json")


def rank_trace(rank: int, slow: float = 1.0, nelems: int = 1048576) -> dict:
    """Per-rank HAND-BUILT GPU-style trace: ``gpu_style_trace`` for a 2-rank job, timeline ``slow`` x."""
    doc = gpu_style_trace()
    doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": 2}
    for ev in doc["traceEvents"]:
        ev["ts"] *= slow
        ev["dur"] *= slow
        if ev["name"] == "record_param_comms":
            ev["args"].update({"Process Group Ranks": "[0, 1]", "Group size": 2, "In msg nelems": nelems})
    return doc


def test_directory_of_rank_traces(tmp_path):
    ranks = tmp_path / "job"
    ranks.mkdir()
    (ranks / "b_worker.json").write_text(json.dumps(rank_trace(0)))  # rank order comes from distributedInfo
    (ranks / "a_worker.json").write_text(json.dumps(rank_trace(1, slow=2.0)))
    w, fmt = import_file(ranks)
    assert fmt == "kineto" and w.name == "job" and w.devices == 2
    assert w.meta["kineto"]["rank_files"] == ["b_worker.json", "a_worker.json"]
    fwd = {n.device: n for n in w.nodes if n.kind == "compute" and n.phase == "forward"}
    assert fwd[0].duration_s == pytest.approx(50e-6) and fwd[1].duration_s == pytest.approx(100e-6)  # not replicated
    ar, ag = (n for n in w.nodes if n.kind == "collective")
    assert (ar.collective, ar.group, ar.comm_bytes) == ("all_reduce", (0, 1), 4 * 1048576.0)
    assert ag.group == (0, 1) and ag.comm_bytes == 2 * 2000.0
    bwd = {n.id for n in w.nodes if n.kind == "compute" and n.phase == "backward"}
    assert set(ar.deps) == bwd and len(bwd) == 2


def test_directory_inconsistencies(tmp_path):
    for label, docs, problem in [
        ("size", [rank_trace(0), rank_trace(1, nelems=7)], "disagree on its kind or size"),
        ("dup", [rank_trace(1), rank_trace(1)], "declare ranks"),
        ("bad", [rank_trace(0), {"traceEvents": 4}], "r1.json: not a Kineto/Chrome trace"),
    ]:
        d = tmp_path / label
        d.mkdir()
        for r, doc in enumerate(docs):
            (d / f"r{r}.json").write_text(json.dumps(doc))
        with pytest.raises(EstimatorError, match=problem) as info:
            import_file(d)
        assert str(info.value).startswith(f"{d}: ")
