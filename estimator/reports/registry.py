"""The report's sections: every module of :mod:`estimator.reports.sections` that defines ``SECTION``,
in page order. Shared by the page builder (:mod:`estimator.reports.build`) and the claim rows
(:mod:`estimator.reports.claims`), so neither imports the other."""

from __future__ import annotations

import importlib
import pkgutil

from estimator.reports.model import Section


def sections() -> list[Section]:
    import estimator.reports.sections as pkg

    found = []
    for mod in pkgutil.iter_modules(pkg.__path__):
        module = importlib.import_module(f"estimator.reports.sections.{mod.name}")
        if hasattr(module, "SECTION"):
            found.append(module.SECTION)
    return sorted(found, key=lambda s: (s.order, s.key))
