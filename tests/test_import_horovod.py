"""Horovod timelines, built here in the layout horovod/common/timeline.cc writes (labelled: synthetic
files from the documented format, no Horovod run), plus 200+ bad files."""

from __future__ import annotations

import json
import random

import pytest
from fixtures.importing import assert_cli_rejects, assert_rejected, random_blobs, truncations

from estimator.workloads.importers import import_file

TENSORS = [("grad/fc.weight", "[1000, 2048]", "HOROVOD_FLOAT32"), ("grad/fc.bias", "[1000]", "HOROVOD_FLOAT32"),
           ("grad/conv1.weight", "[64, 3, 7, 7]", "HOROVOD_FLOAT16")]
NBYTES = [1000 * 2048 * 4, 1000 * 4, 64 * 3 * 7 * 7 * 2]


def timeline(iterations: int = 3, ranks: int = 4, drop_last: bool = False) -> list[dict]:
    """Events as Horovod writes them: per tensor a pid with process_name metadata; per step a
    NEGOTIATE_ALLREDUCE B/E with one X tick per rank, then ALLREDUCE B, nested activities, E+args."""
    ev = [{"name": "process_name", "ph": "M", "pid": 0, "args": {"start_time_since_epoch_in_micros": 1}},
          {"name": "process_sort_index", "ph": "M", "pid": 0, "args": {"sort_index": 0}}]
    for pid, (tensor, _, _) in enumerate(TENSORS, start=1):
        ev += [{"name": "process_name", "ph": "M", "pid": pid, "args": {"name": tensor}},
               {"name": "process_sort_index", "ph": "M", "pid": pid, "args": {"sort_index": pid}}]
    t = 0
    for it in range(iterations):
        ev.append({"ph": "i", "name": "CYCLE_START", "ts": t, "s": "g"})
        for pid, (_, shape, dtype) in enumerate(TENSORS, start=1):
            if drop_last and it == iterations - 1 and pid == 3:
                continue
            t += 1000  # backward compute between gradients
            ev.append({"ph": "B", "name": "NEGOTIATE_ALLREDUCE", "ts": t, "pid": pid})
            for r in range(ranks):
                ev.append({"ph": "X", "name": str(r), "ts": t + 10 * r, "pid": pid, "dur": 0})
            ev.append({"ph": "E", "ts": t + 10 * ranks, "pid": pid})
            start = t + 10 * ranks + 5
            ev += [{"ph": "B", "name": "ALLREDUCE", "ts": start, "pid": pid},
                   {"ph": "B", "name": "QUEUE", "ts": start + 1, "pid": pid},
                   {"ph": "E", "ts": start + 2, "pid": pid},
                   {"ph": "B", "name": "NCCL_ALLREDUCE", "ts": start + 2, "pid": pid},
                   {"ph": "E", "ts": start + 300, "pid": pid},
                   {"ph": "E", "ts": start + 301, "pid": pid, "args": {"dtype": dtype, "shape": shape}}]
            t = start + 301
    return ev


def write(tmp_path, events, name="timeline.json"):
    path = tmp_path / name
    path.write_text("[\n" + ",\n".join(json.dumps(e) for e in events) + "]")
    return path


def test_timeline_steady_state_iteration(tmp_path):
    w, fmt = import_file(write(tmp_path, timeline()))
    assert fmt == "horovod" and w.devices == 4 and w.capture_device == "horovod"
    meta = w.meta["horovod"]
    assert (meta["iterations"], meta["iteration"], meta["tensors"]) == (3, 2, 3)
    colls = [n for n in w.nodes if n.kind == "collective"]
    assert [n.name for n in colls] == [t for t, _, _ in TENSORS]
    assert [n.comm_bytes for n in colls] == [float(b) for b in NBYTES]
    assert all(n.collective == "all_reduce" and n.group == (0, 1, 2, 3) for n in colls)
    assert meta["comm_bytes"] == sum(NBYTES)
    assert colls[1].deps[-1] == colls[0].id  # collectives run in order
    assert colls[0].attrs["measured_s"] == pytest.approx(301e-6)
    assert colls[0].attrs["negotiate_s"] == pytest.approx(45e-6)
    rank3 = [n for n in w.nodes if n.kind == "compute" and n.device == 3]
    # first gap: previous iteration end -> rank 3's tick (1000 us later + 30 us of tick offset)
    assert rank3[0].duration_s == pytest.approx(1030e-6)
    assert [g.nbytes for g in w.gradients] == NBYTES and w.gradient_bytes == sum(NBYTES)
    assert meta["cycles"] == 1


def test_iteration_choice_and_incomplete_tail(tmp_path):
    path = write(tmp_path, timeline(iterations=3, drop_last=True))
    w, _ = import_file(path)
    assert w.meta["horovod"]["iteration"] == 1  # iteration 2 misses a tensor
    w0, _ = import_file(path, options={"iteration": 0})
    assert w0.meta["horovod"]["iteration"] == 0
    assert w0.nodes[0].duration_s == 0.0  # iteration 0 starts at its first ready tick


def test_cli_import(tmp_path):
    from fixtures.importing import run_cli

    path = write(tmp_path, timeline(ranks=2), "hvd.json")
    proc = run_cli("import", str(path), f"traces_dir={tmp_path / 'traces'}", "output=json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["format"] == "horovod" and out["collective"] == 3 and out["devices"] == 2


def _inconsistent(rng: random.Random) -> list[bytes]:
    out = []
    for k in range(50):
        ev = timeline(iterations=2, ranks=2)
        case = k % 10
        ends = [i for i, e in enumerate(ev) if e.get("args", {}).get("shape")]
        if case == 0:  # end event before any begin: a dangling end
            ev.insert(rng.randrange(len(ev) - 5, len(ev)), {"ph": "E", "ts": 10**7, "pid": 1})
            ev.append({"ph": "E", "ts": 10**7 + 1, "pid": 1})
        elif case == 1:  # negative dimension
            ev[rng.choice(ends)]["args"]["shape"] = f"[{-rng.randrange(1, 99)}, 3]"
        elif case == 2:  # size unknown
            del ev[rng.choice(ends)]["args"]
        elif case == 3:  # event for a tensor nobody named
            ev.append({"ph": "B", "name": "ALLREDUCE", "ts": 5, "pid": 40 + k})
        elif case == 4:  # ends before it starts
            ev[rng.choice(ends)]["ts"] = rng.randrange(0, 900)
        elif case == 5:  # unknown dtype
            ev[rng.choice(ends)]["args"]["dtype"] = "HOROVOD_QUBIT"
        elif case == 6:  # no operations at all
            ev = ev[:8]
        elif case == 8:  # a rank tick that would mean 10**30 ranks
            tick = next(e for e in ev if e["ph"] == "X")
            tick["name"] = str(10**30)
        elif case == 9:  # ids must be scalars
            ev[rng.randrange(8, len(ev))]["pid"] = [1, 2]
        else:  # timestamp not a number
            ev[rng.randrange(8, len(ev))]["ts"] = "later"
        out.append(("[" + ",".join(json.dumps(e) for e in ev) + "]").encode())
    return out


def test_bad_files_rejected_in_process(tmp_path):
    rng = random.Random(4242)
    good = ("[" + ",".join(json.dumps(e) for e in timeline()) + "]").encode()
    wrong_magic = [b"{" + good[1:], b"\x89PNG" + good[4:], b'{"traceEvents": 3}', b"[1, 2, 3]", b'"text"']
    blobs = truncations(good, rng, 80) + random_blobs(rng, 60) + wrong_magic * 4 + _inconsistent(rng)
    assert len(blobs) >= 200
    joined = "\n".join(assert_rejected(tmp_path, blobs, "horovod", ".json"))
    for problem in ("JSON error", "without a matching begin", "negative dimension", "no dtype/shape",
                    "no process_name", "before it starts", "unknown dtype", "no completed", "expected a number",
                    "exceeds the limit", "expected a number or string id"):
        assert problem in joined, problem


def test_bad_files_rejected_by_cli(tmp_path):
    good = ("[" + ",".join(json.dumps(e) for e in timeline()) + "]").encode()
    assert_cli_rejects(tmp_path, [good[:-30], _inconsistent(random.Random(1))[1]], ".json")
