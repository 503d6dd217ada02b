"""How tables and figure data read on the page: never wider than the page, long text collapsed,
links shortened; and the report says how far it got."""

from __future__ import annotations

import duckdb
import polars as pl

from estimator.reports.build import LINK_TEXT, LONG_CELL, _claims_html, _table_html, build_report, sections
from estimator.reports.model import Claim


def test_tables_scroll_inside_the_page_and_collapse_long_cells():
    url = "https://github.com/Azure/azurehpc/blob/" + "a" * 80 + "/README.md"
    reasons = "pairs: " + ", ".join(f"row-{i} vs base-{i}" for i in range(60))
    df = pl.DataFrame({"id": ["r1"], "value": [1.5], "source": [f"{url} (section NCCL)"], "reason": [reasons]})
    page = _table_html(df)
    assert page.startswith("<div class='scroll'><table>")
    assert f"href='{url}'" in page and f">{url}<" not in page  # full address in the link, short text shown
    shown = page.split(f"href='{url}'>")[1].split("</a>")[0]
    assert len(shown) <= LINK_TEXT and "(section NCCL)" in page
    assert len(reasons) > LONG_CELL and "<details><summary>pairs: row-0 vs base-0" in page
    assert f"({len(reasons):,} characters)" in page
    assert "<td>1.5</td>" in page


def test_claims_reasons_collapse_but_short_ones_and_tolerances_stay_visible():
    long = Claim("scaling within 5 points", "<= 5 points", "max 9.7", False, "pairs: " + "a vs b, " * 80)
    short = Claim("bus bandwidth within 15 %", "<= 15 %", "12.9 %", True, "held out: max 12.9 % <= tolerance 15 %")
    page = _claims_html([long, short])
    assert page.count("<details>") == 1
    assert "held out: max 12.9 % &lt;= tolerance 15 %" in page and "reason (rule and tolerance)" in page


def test_report_prints_one_progress_line_per_section(tmp_path):
    store = tmp_path / "empty.duckdb"
    duckdb.connect(str(store)).execute("CREATE TABLE nothing (x INT)").close()
    lines: list[str] = []
    page = build_report(store, tmp_path / "out", progress=lines.append)
    assert page.is_file()
    assert len(lines) == len(sections())
    assert lines[0].startswith(f"report [1/{len(sections())}]") and "no results yet" in lines[-1]
