"""Build and run many MLFs × boards on Dask distributed — the CI job a model team runs.

`jobs` says what to run (plain data), `stage` is what a worker does (pure functions of bytes and
dicts), `engine` hands the stages to a Dask cluster, `cluster` gives that cluster (a local one that
leaves nothing behind, or a checked remote scheduler), `cache` keeps builds by content and checks
them before use, `layout` is the rule of which paths a matrix may write, and `report` turns results
into a table, JSON, JUnit and an HTML grid.
"""

from __future__ import annotations

from .cache import BuildCache
from .cluster import dask_client
from .engine import BuildConfig, Limits, run_matrix
from .jobs import Entry, Filters, Job, apply_filters, cross, entries_from_file, label, with_default_samples
from .report import (Progress, document, html_grid, jobs_to_retry, junit_xml, matrix_exit_code, merged_with_earlier,
                     summary_table)

__all__ = ["BuildCache", "BuildConfig", "Entry", "Filters", "Job", "Limits", "Progress", "apply_filters", "cross",
           "dask_client", "document", "entries_from_file", "html_grid", "jobs_to_retry", "junit_xml", "label",
           "matrix_exit_code", "merged_with_earlier", "run_matrix", "summary_table", "with_default_samples"]
