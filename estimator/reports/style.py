"""One colour and marker per series, in one place: every figure of the report draws its series
with :func:`styles`, so no two series of a figure share colour and marker, and a fabric (or an
algorithm, a topology, a model) looks the same in every figure it appears in.

Named series (:data:`NAMED`: the fabrics, TeraRack's all-gather schemes, the OCS topologies, the
models) keep a fixed style; any other label gets the first (colour, marker) pair of
:data:`PALETTE` x :data:`MARKERS` that no series of the figure uses yet — a fresh colour while
one is left, then a fresh marker on a used colour — so up to 144 series stay distinct.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

#: 12 distinguishable colours (matplotlib's tab10 has only 10): tab10 plus black and olive-brown
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf", "#000000", "#a6761d")
#: 12 marker shapes, told apart in print and by colour-blind readers
MARKERS = ("o", "s", "^", "v", "D", "P", "X", "<", ">", "*", "h", "p")


@dataclass(frozen=True)
class Style:
    color: str
    marker: str
    linestyle: str = "-"

    def line(self) -> dict:
        """Keyword arguments for ``Axes.plot``."""
        return {"color": self.color, "marker": self.marker, "linestyle": self.linestyle}


_C = dict(zip(("blue", "orange", "green", "red", "purple", "brown", "pink", "grey", "olive", "cyan", "black", "ochre"),
              PALETTE, strict=True))

#: fixed styles: a fabric, scheme, topology or model looks the same in every figure
NAMED: dict[str, Style] = {
    # fabrics (the ideal switch in black: it is the reference; the electrical leaf-spine in grey)
    "ideal": Style(_C["black"], "o"),
    "ideal (lower bound)": Style(_C["black"], "*"),
    "ideal (default: ring)": Style(_C["black"], "p", "--"),
    "nvlink_leafspine": Style(_C["grey"], "s"),
    "leafspine": Style(_C["grey"], "s"),
    "lumorph": Style(_C["blue"], "o"),
    "sipac": Style(_C["orange"], "s"),
    "terarack": Style(_C["green"], "^"),
    "opsquare": Style(_C["red"], "v"),
    "ocs": Style(_C["purple"], "D"),
    "torus2d": Style(_C["brown"], "P"),
    "fattree": Style(_C["pink"], "X"),
    "bcube": Style(_C["olive"], "<"),
    "superpod": Style(_C["cyan"], ">"),
    # TeraRack's all-gather schemes (seed 002)
    "optree": Style(_C["red"], "o"),
    "wrht": Style(_C["blue"], "s"),
    "ring": Style(_C["green"], "^"),
    "ne": Style(_C["orange"], "D"),
    # the OCS topologies (seed 001; ring and torus2d as above)
    "btree": Style(_C["purple"], "v"),
    "one_switch": Style(_C["ochre"], "h"),
    # models
    "bert_base": Style(_C["blue"], "o"),
    "mobilenet_v2": Style(_C["orange"], "s"),
    "resnet50": Style(_C["green"], "^"),
    "vgg13": Style(_C["red"], "D"),
    "gpt3_175b": Style(_C["purple"], "o"),
    "llama2_70b": Style(_C["brown"], "s"),
}


def styles(labels: Iterable[str]) -> dict[str, Style]:
    """A distinct style for every label (in order): the named ones first, then a free pair each."""
    labels = list(dict.fromkeys(str(label) for label in labels))
    out: dict[str, Style] = {}
    used: set[tuple[str, str]] = set()
    for label in labels:
        named = NAMED.get(label)
        if named is not None and (named.color, named.marker) not in used:
            out[label] = named
            used.add((named.color, named.marker))
    for label in labels:
        if label not in out:
            out[label] = free_style(used)
            used.add((out[label].color, out[label].marker))
    return {label: out[label] for label in labels}


def free_style(used: set[tuple[str, str]]) -> Style:
    """The first (colour, marker) pair not in ``used``: an unused colour with the marker of the same
    rank while colours last, then the next unused marker on each colour in turn."""
    colours_used = {c for c, _ in used}
    for i, colour in enumerate(PALETTE):
        if colour not in colours_used:
            for marker in MARKERS[i:] + MARKERS[:i]:
                if (colour, marker) not in used:
                    return Style(colour, marker)
    for shift in range(1, len(MARKERS)):
        for i, colour in enumerate(PALETTE):
            marker = MARKERS[(i + shift) % len(MARKERS)]
            if (colour, marker) not in used:
                return Style(colour, marker)
    raise ValueError(f"more than {len(PALETTE) * len(MARKERS)} series in one figure")
