"""The seed 004 figure is drawn from SQL over the `packetsim` table (estimator.reports.sections.packetsim)."""

from __future__ import annotations

import pytest

from estimator.errors import EstimatorError
from estimator.packetsim import SimSpec, simulate
from estimator.packetsim.sweep import TABLE, row
from estimator.reports.sections import packetsim as report
from estimator.store.duckdb_store import write_rows


def test_figure_from_store_and_empty_store_error(tmp_path):
    store = tmp_path / "s.duckdb"
    rows = []
    for network in ("opsquare", "leafspine"):
        for load in (0.2, 0.8):
            spec = SimSpec(network=network, nodes=16, load=load, locality=0.5, warmup_s=1e-6, measure_s=2e-6)
            rows.append(row(spec, simulate(spec).summary()))
    write_rows(store, {TABLE: ("config_hash", rows)})
    from estimator.store.duckdb_store import query

    df = query(store, report.SQL)
    assert df.height == 4 and set(df["network"]) == {"opsquare", "leafspine"}
    out = report.make_figure(store, tmp_path / "fig" / "p.png")
    assert out.stat().st_size > 10_000 and out.read_bytes()[:4] == b"\x89PNG"
    assert not list((tmp_path / "fig").glob(".*"))  # no temp file left behind
    write_rows(tmp_path / "empty.duckdb", {TABLE: ("config_hash", [dict(rows[0], traffic="ring_allreduce")])})
    with pytest.raises(EstimatorError, match="no uniform-traffic rows"):
        report.make_figure(tmp_path / "empty.duckdb", tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()


def test_section_renders_in_the_html_report_with_claims(tmp_path, monkeypatch):
    from estimator.reports import build

    store = tmp_path / "s.duckdb"
    rows = []
    for network, nodes in (("opsquare", 16), ("opsquare", 64), ("leafspine", 16)):
        for load, loc in ((0.1, 0.33), (0.6, 0.33), (1.0, 0.33), (1.0, 0.67)):
            spec = SimSpec(network=network, nodes=nodes, load=load, locality=loc, warmup_s=1e-6, measure_s=2e-6)
            rows.append(row(spec, simulate(spec).summary()))
    write_rows(store, {TABLE: ("config_hash", rows)})
    monkeypatch.setattr(build, "sections", lambda: [report.SECTION])
    page = build.build_report(store, tmp_path / "rep").read_text()
    assert "OPSquare (seed 004): packet level vs the NVLink leaf-spine" in page
    assert page.count("<figure class='plot' id='fig-packetsim_throughput'>") == 1
    from estimator.store.duckdb_store import connect

    with connect(store, read_only=True) as con:
        claims = report.SECTION.claims(lambda sql: con.sql(sql).pl())
    assert len(claims) == 14
    by_text = {c.paper_claim: c for c in claims}
    assert by_text["OPSquare: inter-pod packets within 6 µs (max p99 over every load)"].holds is True
    assert by_text["Leaf-spine: local traffic ≈ 1 µs (the switch latency) at low load"].holds is True
    # every packet-level claim carries its SQL, a named rule, a verdict, a reason and the paper's sentence
    for c in claims:
        assert c.sql and "packetsim" in c.sql and c.quote, c.paper_claim
        assert c.verdict == "no-data" or (c.verdict in ("holds", "fails") and c.detail and c.rule), c.paper_claim
    assert sum(c.verdict != "no-data" for c in claims) >= 5  # this small store has no 256/1024-node pair
