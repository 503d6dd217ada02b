"""How tables and figure data read on the page: never wider than the page, long text collapsed,
links shortened; and the report says how far it got."""

from __future__ import annotations

import re

import duckdb
import polars as pl

from estimator.reports.build import build_report, sections
from estimator.reports.claims import claim_rows
from estimator.reports.model import Claim
from estimator.reports.tables import LINK_TEXT, LONG_CELL, claims_html, table_html


def test_tables_scroll_inside_the_page_and_collapse_long_cells():
    url = "https://github.com/Azure/azurehpc/blob/" + "a" * 80 + "/README.md"
    reasons = "pairs: " + ", ".join(f"row-{i} vs base-{i}" for i in range(60))
    df = pl.DataFrame({"id": ["r1"], "value": [1.5], "source": [f"{url} (section NCCL)"], "reason": [reasons]})
    page = table_html(df)
    assert page.startswith("<div class='scroll'><table>")
    assert f"href='{url}'" in page and f">{url}<" not in page  # full address in the link, short text shown
    shown = page.split(f"href='{url}'>")[1].split("</a>")[0]
    assert len(shown) <= LINK_TEXT and "(section NCCL)" in page
    assert len(reasons) > LONG_CELL and "<details><summary>pairs: row-0 vs base-0" in page
    assert f"({len(reasons):,} characters)" in page
    assert "<td class='num'>1.5</td>" in page


def test_claims_reasons_collapse_but_short_ones_and_tolerances_stay_visible():
    long = Claim("scaling within 5 points", "<= 5 points", "max 9.7", False, "pairs: " + "a vs b, " * 80, rule="at-most",
                 tolerance="<= 5 points")
    short = Claim("bus bandwidth within 15 %", "<= 15 %", "12.9 %", True, "held out: max 12.9 % <= tolerance 15 %",
                  rule="at-most", tolerance="<= 15 %", quote="within 15 %")
    derived = Claim("k*", "7", "6", False, "6 != printed 7", "paper-inconsistent", rule="paper-arithmetic",
                    tolerance="exactly the printed 7", derivation="6.39 rounded = 6")
    page = claims_html(claim_rows("Paper", [long, short, derived]))
    assert page.count("<details>") == 1
    assert "held out: max 12.9 % &lt;= tolerance 15 %" in page and "rule and tolerance" in page
    assert "<b>at-most</b>: &lt;= 15 %" in page and "<q>within 15 %</q>" in page
    # every verdict cell is coloured, and a derivation is shown beside its reason
    assert page.count("class='v-fails'") == 1 and page.count("class='v-holds'") == 1
    assert "class='v-paper-inconsistent'" in page and "<b>derivation</b>: 6.39 rounded = 6" in page


def test_report_prints_one_progress_line_per_section(tmp_path):
    store = tmp_path / "empty.duckdb"
    duckdb.connect(str(store)).execute("CREATE TABLE nothing (x INT)").close()
    lines: list[str] = []
    page = build_report(store, tmp_path / "out", progress=lines.append)
    assert page.is_file()
    assert len(lines) == len(sections())
    assert lines[0].startswith(f"report [1/{len(sections())}]") and "no results yet" in lines[-1]


def test_table_box_scrolls_both_ways_and_phrases_get_room():
    from estimator.reports.build import CSS

    box = CSS.split(".scroll{", 1)[1].split("}", 1)[0]
    assert "overflow:auto" in box and "max-height:80vh" in box  # the sideways scrollbar stays in view
    page = table_html(pl.DataFrame({"id": ["a100x8-allreduce-128MiB"], "hardware": ["8x A100, NVSwitch"]}))
    assert "<td>a100x8-allreduce-128MiB</td>" in page and "<td>8x A100, NVSwitch</td>" in page
    phrase = "Azure ND A100 v4: 8x A100-SXM4-80GB, NVSwitch (NVLink3)"
    assert f"<td class='txt'>{phrase}</td>" in table_html(pl.DataFrame({"hardware": [phrase]}))
    assert "td.txt{min-width:12em}" in CSS  # a phrase gets a few lines, not one word per line


def test_validation_row_tables_put_the_numbers_before_the_long_text():
    from estimator.reports.sections import validation as v

    con = duckdb.connect()
    con.execute("""CREATE TABLE validation AS SELECT 'r1' AS id, 'holdout' AS role, 'nccl' AS kind, 'box' AS hardware,
        8 AS gpus, 'all_reduce' AS collective, 1048576.0 AS bytes, 'ring/ll' AS algorithm, 'bert' AS model,
        'amp' AS precision, 32 AS batch_per_gpu, 36.2 AS measured, 33.1 AS predicted, 'GB/s' AS unit,
        -8.5 AS error_pct, 'NCCL 2.18' AS software, 'https://x' AS source, 'k=v' AS overrides""")
    for tab in v.SECTION.tables:
        if tab.name.endswith("_errors"):
            cols = con.sql(tab.sql.replace("kind = 'training'", "kind = 'nccl'").replace("kind = 'llm'", "kind = 'nccl'")).columns
            assert cols.index("error_pct") < min(cols.index(c) for c in ("software", "source")), tab.name
            long = [c for c in ("hardware", "overrides") if c in cols]
            assert long and all(cols.index("error_pct") < cols.index(c) for c in long), tab.name


def test_columns_read_in_words_with_units_and_the_unit_that_suits_them():
    df = pl.DataFrame({"fabric_name": ["sipac", "bcube"], "iter_time_s": [0.016634, 0.5913], "exposed_comm_time_s": [6.08e-05, 2.1e-05],
                       "bytes": [1073741824.0, 4096.0], "mfu": [0.5522, 0.4], "speedup_vs_leafspine": [1.0312, 0.086],
                       "per_gpu_GBps": [450.0, 950.0], "samples_per_s": [246235.9, 1234.5], "bound_holds": [True, False]})
    page = table_html(df)
    heads = re.findall(r"<th[^>]*>(.*?)</th>", page)
    assert heads == ["fabric", "iteration (ms)", "exposed communication (µs)", "size", "MFU (%)",
                     "speedup over the leaf-spine (×)", "per-GPU bandwidth (GB/s)", "throughput (samples/s)", "bound holds"]
    cells = re.findall(r"<td[^>]*>(.*?)</td>", page)
    assert cells[:9] == ["sipac", "16.6", "60.8", "1 GiB", "55.2", "1.031", "450", "246,236", "yes"]
    assert cells[9:] == ["bcube", "591.3", "21.0", "4 KiB", "40.0", "0.0860", "950", "1,234", "no"]
    assert "6.08e-05" not in page and "1073741824" not in page  # the CSV keeps those, not the page
    assert "<td class='num'>16.6</td>" in page  # numbers right-aligned
    assert "<td class='v-holds'>yes</td>" in page and "<td class='v-fails'>no</td>" in page  # a verdict, coloured


def test_a_table_can_say_how_a_column_reads_and_decimals_follow_the_values():
    df = pl.DataFrame({"64 GPUs": [1.0312, 0.5], "overall": [0.7375, 0.9439], "error_pct": [1.3, 11.9],
                       "nodes": [1024, 16384]})
    page = table_html(df, formats={"64 GPUs": "x", "overall": "%"})
    assert re.findall(r"<th[^>]*>(.*?)</th>", page) == ["64 GPUs (×)", "overall (%)", "error (%)", "nodes"]
    cells = re.findall(r"<td[^>]*>(.*?)</td>", page)
    assert cells == ["1.031", "73.8", "1.3", "1,024", "0.5000", "94.4", "11.9", "16,384"]  # 4 digits; none the SQL did not write
