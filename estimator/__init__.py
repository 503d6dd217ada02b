"""Trace-driven, end-to-end training performance estimator for ML cluster interconnects.

Data flow: workloads (capture / import) -> compute model -> timeline simulation -> fabric
(topology + collective algorithms) -> DuckDB store -> reports.
"""

from importlib.metadata import PackageNotFoundError, version

from estimator.errors import EstimatorError

try:
    __version__ = version("estimator")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+src"

__all__ = ["EstimatorError", "__version__"]
