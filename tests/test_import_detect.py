"""Format detection across all importers (neutral file names, so only the bytes decide)."""

from __future__ import annotations

import json

import pytest
from test_export_chakra import COMP, et_node
from test_import_flexflow import mlp_cg
from test_import_horovod import timeline
from test_import_kineto import gpu_style_trace
from test_import_topoopt import small_graph

from estimator.errors import EstimatorError
from estimator.workloads.importers import available, import_file
from estimator.workloads.importers.chakra_schema import GlobalMetadata, write_messages
from estimator.workloads.importers.topoopt_schema import build_taskgraph


def samples():
    return {
        "topoopt": build_taskgraph(small_graph()),
        "kineto": json.dumps(gpu_style_trace()).encode(),
        "horovod": ("[\n" + ",\n".join(json.dumps(e) for e in timeline(ranks=2)) + "]").encode(),
        "flexflow": json.dumps(mlp_cg()).encode(),
        "chakra": write_messages([GlobalMetadata(version="0.0.4"), et_node(1, "a", COMP, duration=5)]),
    }


def test_every_format_is_available():
    assert sorted(available()) == ["chakra", "flexflow", "horovod", "kineto", "topoopt"]


def test_detected_from_bytes_alone(tmp_path):
    for fmt, data in samples().items():
        path = tmp_path / f"sample_{fmt}.data"
        path.write_bytes(data)
        _, detected = import_file(path)
        assert detected == fmt


def test_undetectable_and_unknown_format(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("hello, not a trace\n")
    with pytest.raises(EstimatorError, match="cannot detect the trace format"):
        import_file(path)
    with pytest.raises(EstimatorError, match="unknown format 'onnx'"):
        import_file(path, "onnx")
    with pytest.raises(EstimatorError, match="no such file"):
        import_file(tmp_path / "missing.fbuf")
    with pytest.raises(EstimatorError, match="no per-rank Kineto trace files"):
        import_file(tmp_path)  # a directory is read as per-rank Kineto traces
    with pytest.raises(EstimatorError, match="is a directory; only importer.format=kineto"):
        import_file(tmp_path, "topoopt")
