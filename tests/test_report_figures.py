"""What a reader sees in the report's figures: every series told apart, named once in a legend, no
text collisions, legends off the data (estimator.reports.figure_checks), on figures that used to
fail (fabrics on top of each other near speedup 1, single points sharing colour and marker, 15
series in one panel, a legend halving the plot), plus the SVG the page embeds (hover points,
legend toggles, no remote address) and the shared styles."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import matplotlib

matplotlib.use("Agg")
import duckdb  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import polars as pl  # noqa: E402
import pytest  # noqa: E402

from estimator.reports import figure_checks  # noqa: E402
from estimator.reports.model import Figure  # noqa: E402
from estimator.reports.plots import line_plot  # noqa: E402
from estimator.reports.render import drawn, hover_json, inline_svg  # noqa: E402
from estimator.reports.sections import cross_fabric, llm, opsquare, packetsim, sipac, terarack  # noqa: E402
from estimator.reports.style import MARKERS, NAMED, PALETTE, styles  # noqa: E402

FABRICS = ("ideal (lower bound)", "sipac", "bcube", "lumorph", "opsquare", "nvlink_leafspine", "torus2d", "superpod",
           "fattree", "ocs", "terarack")


def _figure(name: str):
    return next(f for sec in (cross_fabric, llm, opsquare, packetsim, sipac, terarack) for f in sec.SECTION.figures
                if f.name == name)


# --- the checks can fail ---------------------------------------------------------------------------

def _problems(plot) -> list[str]:
    with drawn(Figure("t", "a test figure", "SELECT 1", plot), pl.DataFrame({"x": [1]})) as d:
        return figure_checks.problems(d.figure)


def test_a_clean_figure_has_no_problems():
    def plot(_, ax):
        for i, s in enumerate(styles(["a", "b"]).values()):
            ax.plot([1, 2, 3], [i, i + 1, i + 2], label="ab"[i], **s.line())
        ax.set_xlabel("x")
        ax.legend()

    assert _problems(plot) == []


def test_two_series_with_one_colour_and_marker_are_reported():
    def plot(_, ax):
        ax.plot([1, 2], [1, 2], color="#1f77b4", marker="o", label="a")
        ax.plot([1, 2], [3, 4], color="#1f77b4", marker="o", label="b")
        ax.legend()

    found = _problems(plot)
    # the builder restyles a look-alike series it can (a line), so the drawn figure is clean ...
    assert found == []
    # ... and the check itself reports one when asked directly
    f, ax = plt.subplots()
    try:
        ax.plot([1, 2], [1, 2], color="#1f77b4", marker="o", label="a")
        ax.plot([1, 2], [3, 4], color="#1f77b4", marker="o", label="b")
        ax.legend()
        f.canvas.draw()
        assert any("look the same" in p for p in figure_checks.problems(f))
    finally:
        plt.close(f)


def test_a_series_missing_from_the_legend_or_named_twice_is_reported():
    def plot(_, ax):
        ax.plot([1, 2], [1, 2], color="red", label="a")
        ax.plot([1, 2], [3, 4], color="blue", label="b")
        ax.legend(handles=ax.get_lines()[:1] * 2, labels=["a", "a"], loc="upper left", bbox_to_anchor=(1.01, 1))

    found = _problems(plot)
    assert any("not in a legend: 'b'" in p for p in found) and any("more than once" in p for p in found)


def test_colliding_tick_labels_are_reported():
    def plot(_, ax):
        names = [f"a long category name {i}" for i in range(12)]
        ax.bar(range(12), range(1, 13), label="values")
        ax.set_xticks(range(12), names)  # horizontal, side by side: they overlap
        ax.legend()

    assert any("collides" in p for p in _problems(plot))


def test_a_legend_over_the_data_is_reported():
    def plot(_, ax):
        xs = [i / 10 for i in range(11)]
        for k, s in enumerate(styles(["a", "b", "c"]).values()):
            ax.plot(xs, [0.9 + 0.01 * k] * 11, label="abc"[k], **s.line())  # all along the top
        ax.legend(loc="upper left", bbox_to_anchor=(0.0, 1.0), fontsize=12)  # placed by the plot: kept there

    assert any("legend covers" in p for p in _problems(plot))


# --- the figures that used to fail -----------------------------------------------------------------

def _speedups() -> pl.DataFrame:
    """11 fabrics x 3 sizes; six of them within 5 % of the leaf-spine (they sat on y = 1 on top of each other)."""
    near = {"ideal (lower bound)": 1.05, "sipac": 1.05, "bcube": 1.049, "lumorph": 1.043, "opsquare": 1.039,
            "nvlink_leafspine": 1.0}
    far = {"torus2d": 0.845, "superpod": 0.744, "fattree": 0.109, "ocs": 0.094, "terarack": 0.086}
    rows = [{"fabric_name": f, "nodes": n, "gpus": f"{n} GPUs", "speedup_vs_leafspine": v * (1 + 0.002 * k)}
            for f, v in {**near, **far}.items() for k, n in enumerate((64, 256, 1024))]
    return pl.DataFrame(rows)


def test_cross_fabric_speedups_near_one_each_get_their_own_row_and_printed_value():
    fig = _figure("cross_speedup_bert_base")
    with drawn(fig, _speedups()) as d:
        assert figure_checks.problems(d.figure) == []
        ax = d.figure.axes[0]
        rows = [t.get_text() for t in ax.get_yticklabels()]
        assert sorted(rows) == sorted(FABRICS) and rows[-1] in ("ideal (lower bound)", "sipac")  # fastest on top
        # every fabric's 1024-GPU point is its own row: at least a row's height from any other fabric's
        pts = {s["label"]: s["points"] for s in d.series}
        ys = sorted(p[1] for p in pts["1024 GPUs"])
        assert len(ys) == 11 and min(b - a for a, b in zip(ys, ys[1:], strict=False)) > 12
        shown = [t.get_text() for t in ax.texts]
        assert f"{1.039 * 1.004:.3f}x" in shown and f"{0.086 * 1.004:.3f}x" in shown and "at 1024 GPUs" in shown


def test_llm_single_points_differ_between_fabrics_and_coinciding_ones_stay_visible():
    rows = [{"model_name": m, "fabric_name": f, "nodes": n, "mfu": 0.5 - 0.02 * i - 0.05 * k}
            for m in ("gpt3_175b", "llama2_70b") for i, f in enumerate(FABRICS[1:]) for k, n in enumerate((1024, 4096))
            if f not in ("sipac", "bcube", "opsquare")]
    rows += [{"model_name": m, "fabric_name": f, "nodes": n, "mfu": 0.37}  # one point each, the same value
             for m in ("gpt3_175b", "llama2_70b") for f, n in (("sipac", 4096), ("bcube", 4096), ("opsquare", 1024))]
    with drawn(_figure("llm_mfu_vs_gpus"), pl.DataFrame(rows)) as d:
        assert figure_checks.problems(d.figure) == []
        assert len(d.figure.axes) == 2 and [a.get_title() for a in d.figure.axes] == ["GPT-3 175B", "Llama-2 70B"]
        lines = {ln.get_label(): ln for ln in d.figure.axes[0].get_lines()}
        # sipac and bcube sit on the same point: the one drawn first is a ring around the other
        under, over = sorted((lines["sipac"], lines["bcube"]), key=lambda ln: -ln.get_markersize())
        assert under.get_markersize() > over.get_markersize() and under.get_markerfacecolor() == "none"
        assert (lines["sipac"].get_color(), lines["sipac"].get_marker()) != (lines["bcube"].get_color(),
                                                                              lines["bcube"].get_marker())


def test_terarack_sixteen_curves_become_four_panels_of_four():
    rows = [{"config": f"{n} nodes, {w} λ", "nodes": n, "wavelengths": w, "algorithm": a, "bytes": 2**b,
             "time_s": t * (1 + 0.05 * (b - 20)) * 64 / w}
            for n, w in ((1024, 64), (1024, 96), (1024, 128), (2048, 64))
            for a, t in (("ne", 0.013), ("optree", 0.0018), ("ring", 0.026), ("wrht", 0.013)) for b in range(20, 27)]
    with drawn(_figure("terarack_time_vs_size"), pl.DataFrame(rows)) as d:
        assert figure_checks.problems(d.figure) == []
        assert len(d.figure.axes) == 4 and all(len(a.get_lines()) >= 4 for a in d.figure.axes)
        for a in d.figure.axes:  # ne and wrht coincide in every panel: the one drawn first is a ring around the other
            lines = {ln.get_label(): ln for ln in a.get_lines()}
            assert lines["ne"].get_linewidth() > lines["wrht"].get_linewidth(), a.get_title()
            assert lines["ne"].get_markerfacecolor() == "none"
        assert [t.get_text() for t in d.figure.legends[0].get_texts()] == ["ne", "optree", "ring", "wrht"]


def test_opsquare_legend_does_not_take_the_plot_and_byte_labels_do_not_collide():
    schemes = ["nvlink_leafspine: hierarchical", "nvlink_leafspine: hierarchical_tree", "nvlink_leafspine: ring",
               "opsquare: hierarchical", "opsquare: hierarchical (3.6 Tb/s per node)", "opsquare: hierarchical_ring",
               "opsquare: hierarchical_ring (3.6 Tb/s per node)"]
    rows = [{"scheme": s, "nodes": n, "bytes": 2**b, "time_s": 1e-6 * (i + 1) + 2**b / 4e11}
            for n in (256, 1024) for i, s in enumerate(schemes) for b in range(9, 31)]
    with drawn(_figure("opsquare_allreduce"), pl.DataFrame(rows)) as d:
        assert figure_checks.problems(d.figure) == []
        width = d.figure.get_size_inches()[0] * d.figure.dpi
        panels = sum(a.bbox.width for a in d.figure.axes)
        assert panels > 0.7 * width  # the legend went below, the panels keep the width


def test_packet_latency_panels_ring_every_series_hidden_under_another():
    """Four series within 1 % of each other in every panel (intra-pod latency is flat): each panel,
    the first included, draws the covered ones as rings (its shared axes settled before looking)."""
    rows = [{"network": net, "nodes": n, "locality": loc, "load": ld / 10, "throughput": ld / 10, "loss_ratio": 0.0,
             "latency_intra_us": base * (1 + 0.002 * (ld + n // 256 + 3 * loc)), "latency_inter_us": base * (2 + ld)}
            for net, base in (("opsquare", 0.12), ("leafspine", 1.0)) for n in (256, 1024) for loc in (0.33, 0.67)
            for ld in range(1, 11)]
    with drawn(_figure("packetsim_latency"), pl.DataFrame(rows)) as d:
        assert figure_checks.problems(d.figure) == []
        for a in d.figure.axes:
            widths = [ln.get_linewidth() for ln in a.get_lines()]
            assert widths == sorted(widths, reverse=True) and widths[0] > widths[-1], a.get_title()


# --- the SVG the page embeds -------------------------------------------------------------------------

def test_page_svg_has_toggle_ids_hover_points_and_no_remote_address():
    fig = Figure("demo", "demo", "SELECT 1",
                 line_plot("n", "t", ["fabric"], xlabel="GPUs", ylabel="time (ms)", logy=False))
    df = pl.DataFrame({"fabric": ["sipac"] * 3 + ["bcube"] * 3, "n": [64, 256, 1024] * 2, "t": [1.0, 2.0, 3.0] * 2})
    with drawn(fig, df) as d:
        svg, series = d.svg, d.series
    page_svg = inline_svg(svg)
    assert "http" not in page_svg and "<?xml" not in page_svg and page_svg.startswith("<svg class='plot' ")
    for k in range(2):  # each series' line and its legend entry carry the ids the page's script toggles
        assert re.search(rf'id="demo--s{k}--\d+"', page_svg) and re.search(rf'id="demo--l{k}--\d+"', page_svg)
    data = json.loads(hover_json("demo", series))
    assert [s["label"] for s in data["series"]] == ["sipac", "bcube"]
    first = data["series"][0]["points"]
    assert len(first) == 3 and first[0][2] == "sipac\nGPUs: 64\ntime (ms): 1"
    width, height = (float(v) for v in re.search(r'viewBox="0 0 ([\d.]+) ([\d.]+)"', svg).groups())
    assert all(0 < x < width and 0 < y < height for x, y, _ in first)
    xs = [p[0] for p in first]
    assert xs == sorted(xs) and first[0][1] > first[-1][1]  # larger values higher on the page (smaller y)
    assert "</script" not in hover_json("x", [{"label": "</script>", "points": []}])


# --- shared styles --------------------------------------------------------------------------------

def test_styles_never_repeat_a_colour_and_marker_pair():
    labels = [f"series {i}" for i in range(len(PALETTE) * len(MARKERS))]
    pairs = {(s.color, s.marker) for s in styles(labels).values()}
    assert len(pairs) == len(labels)
    first = list(styles(labels[:12]).values())
    assert len({s.color for s in first}) == 12  # a fresh colour while colours last
    with pytest.raises(ValueError, match="more than 144 series"):
        styles([*labels, "one too many"])


def test_a_fabric_looks_the_same_in_every_figure_and_the_named_styles_are_distinct():
    assert styles(["x", "sipac"])["sipac"] == styles(["bcube", "sipac", "ocs"])["sipac"] == NAMED["sipac"]
    assert len({(NAMED[f].color, NAMED[f].marker) for f in FABRICS}) == len(FABRICS)
    a, b = styles(["one", "two"]).values()
    assert (a.color, a.marker) != (b.color, b.marker)


# --- in a browser ---------------------------------------------------------------------------------

PROBE = """<script>
window.addEventListener('load', () => {
  const box = document.querySelector('figure.plot'), svg = box.querySelector('svg'), out = [];
  const data = JSON.parse(box.querySelector('script[type="application/json"]').textContent);
  const parts = k => [...svg.querySelectorAll(`[id^="${data.id}--s${k}--"]`)];
  const entry = svg.querySelector(`[id^="${data.id}--l1--"]`);
  entry.dispatchEvent(new MouseEvent('click', {bubbles: true}));
  out.push('hidden ' + parts(1).every(e => e.classList.contains('off') && getComputedStyle(e).visibility === 'hidden'));
  entry.dispatchEvent(new MouseEvent('click', {bubbles: true}));
  out.push('shown ' + parts(1).every(e => !e.classList.contains('off')));
  entry.dispatchEvent(new MouseEvent('dblclick', {bubbles: true}));
  out.push('alone ' + data.series.map((_, k) => parts(k).some(e => e.classList.contains('off')) ? 0 : 1).join(''));
  const p = data.series[1].points[2], at = new DOMPoint(p[0], p[1]).matrixTransform(svg.getScreenCTM());
  svg.dispatchEvent(new MouseEvent('mousemove', {clientX: at.x + 2, clientY: at.y - 2, bubbles: true}));
  out.push('tip ' + JSON.stringify(box.querySelector('.tip').hidden ? '' : box.querySelector('.tip').textContent));
  const pre = document.createElement('pre'); pre.id = 'probe'; pre.textContent = out.join('|');
  document.body.append(pre);
});
</script>"""


@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs a headless browser (Debian: apt-get install chromium)")
def test_the_page_hides_shows_and_reads_out_series_in_a_headless_browser(tmp_path, monkeypatch):
    from estimator.reports import build
    from estimator.reports.model import Section

    store = tmp_path / "s.duckdb"
    con = duckdb.connect(str(store))
    con.execute("CREATE TABLE t AS SELECT * FROM (VALUES ('sipac', 64, 1.0), ('sipac', 256, 2.0), ('sipac', 1024, 3.0),"
                " ('bcube', 64, 1.5), ('bcube', 256, 2.5), ('bcube', 1024, 3.5), ('ocs', 64, 4.0), ('ocs', 256, 5.0),"
                " ('ocs', 1024, 6.0)) AS v(fabric, n, ms)")
    con.close()
    fig = Figure("demo_fig", "demo", "SELECT * FROM t ORDER BY fabric DESC, n",
                 line_plot("n", "ms", ["fabric"], xlabel="GPUs", ylabel="time (ms)", logy=False))
    monkeypatch.setattr(build, "sections", lambda: [Section("demo", "Demo", figures=(fig,), needs_tables=("t",))])
    page = build.build_report(store, tmp_path / "rep")
    probe = page.with_name("probe.html")
    probe.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    out = subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                          "--window-size=1200,1600", "--dump-dom", probe.as_uri()], capture_output=True, text=True,
                         timeout=180)
    found = re.search(r'<pre id="probe">(.*?)</pre>', out.stdout)
    assert found, out.stderr[-500:]
    hidden, shown, alone, tip = found.group(1).split("|")
    assert hidden == "hidden true" and shown == "shown true" and alone == "alone 010"
    assert tip == 'tip "ocs\\nGPUs: 1024\\ntime (ms): 6"'  # series 1 (ORDER BY fabric DESC), alone
