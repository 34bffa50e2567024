"""Build and run many MLFs × boards on Dask distributed — the CI job a model team runs.

`jobs` says what to run (plain data), `stage` is what a worker does (pure functions of bytes and
dicts), `engine` hands the stages to a Dask cluster, `cluster` gives that cluster (a local one that
leaves nothing behind, or a checked remote scheduler), `cache` keeps builds by content and checks
them before use, `layout` is the rule of which paths a matrix may write, and `report` turns results
into a table, JSON, JUnit and an HTML grid.
"""

from __future__ import annotations

import importlib

# Where each name of the package's interface lives. They load on first use (PEP 562), so that the
# command line, which needs only `cluster`'s defaults to parse its arguments, does not load the
# build pipeline.
_HOMES = {"BuildCache": "cache", "dask_client": "cluster", "BuildConfig": "engine", "Limits": "engine",
          "run_matrix": "engine", "Entry": "jobs", "Filters": "jobs", "Job": "jobs", "apply_filters": "jobs",
          "cross": "jobs", "entries_from_file": "jobs", "label": "jobs", "with_default_samples": "jobs",
          "Progress": "report", "document": "report", "html_grid": "report", "jobs_to_retry": "report",
          "junit_xml": "report", "matrix_exit_code": "report", "merged_with_earlier": "report",
          "summary_table": "report"}


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_HOMES[name]}", __name__), name)


__all__ = ["BuildCache", "BuildConfig", "Entry", "Filters", "Job", "Limits", "Progress", "apply_filters", "cross",
           "dask_client", "document", "entries_from_file", "html_grid", "jobs_to_retry", "junit_xml", "label",
           "matrix_exit_code", "merged_with_earlier", "run_matrix", "summary_table", "with_default_samples"]
