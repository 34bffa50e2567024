"""`mlfbuild matrix`: many MLFs × boards on a Dask cluster."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from ..cliargs import build_memory_arg, parse_size, samples_arg, seconds_arg
from ..matrix.cluster import CONNECT_TIMEOUT
from ..outfolder import prepare, write_file as write_report_file
from ..toolchain import OPT_LEVELS
from ..style import printable
from ..toolchain import DEFAULT_BUILD_MEMORY
from .base import Command


class MatrixCommand(Command):
    name = "matrix"
    help = "build and run many MLFs on several boards on a Dask cluster (local by default); JUnit, JSON, HTML"

    def add_arguments(self, parser):
        parser.add_argument("mlf", type=Path, nargs="*", help="MLFs (no references: outputs are not checked)")
        parser.add_argument("--jobs-file", type=Path, help='JSON list of {"mlf": path, "references": '
                            '["[MODEL=]ref.npz", ...], "boards": [...], "atol": x, "rtol": y}')
        parser.add_argument("--retry-failed", type=Path, metavar="PREVIOUS.json",
                            help="run again only the jobs that failed or errored in an earlier matrix's JSON")
        parser.add_argument("--board", "-b", action="append", default=[], help="board (repeat; default mps2-an386)")
        parser.add_argument("-o", "--output", type=Path, default=Path("build/matrix"),
                            help="output folder: jobs/<id>/, matrix.json, matrix.html (default build/matrix)")
        parser.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                            help="run on this Dask cluster (default: a local cluster of --workers processes)")
        parser.add_argument("--connect-timeout", type=seconds_arg("--connect-timeout"), default=CONNECT_TIMEOUT,
                            metavar="S", help=f"seconds a --scheduler has to accept and answer as Dask does "
                                              f"(default {CONNECT_TIMEOUT:g}; exit 9 after)")
        parser.add_argument("--workers", type=int, default=os.cpu_count() or 2,
                            help="worker processes of the local cluster (default: the number of cores)")
        parser.add_argument("--build-only", action="store_true", help="build every job, run none")
        parser.add_argument("--cache", type=Path, help="build cache folder (default OUTPUT/cache)")
        parser.add_argument("--no-cache", action="store_true", help="neither read nor fill the build cache")
        parser.add_argument("--samples", type=samples_arg, metavar="N",
                            help="inputs per run, as run --samples, for every job whose entry gives no samples")
        parser.add_argument("--timeout", type=seconds_arg("--timeout"), default=60.0, help="seconds to wait for any reply of a firmware")
        parser.add_argument("--job-timeout", type=seconds_arg("--job-timeout"), default=900.0,
                            help="seconds a job's build, and then its run, may take (default 900)")
        parser.add_argument("--filter-board", action="append", default=[], metavar="GLOB", help="keep these boards")
        parser.add_argument("--filter-model", action="append", default=[], metavar="GLOB",
                            help="keep these models (MLF file name or folder/stem)")
        parser.add_argument("--filter-executor", action="append", default=[], choices=["aot", "graph", "operator"])
        parser.add_argument("--filter-interface", action="append", default=[], choices=["c", "packed", "none"])
        parser.add_argument("--board-file", type=Path, action="append", default=[],
                            help="a board file of your own (sent to the workers by content)")
        parser.add_argument("--runtime", choices=["builtin", "tvm"], default="builtin")
        parser.add_argument("--cmsis-nn", type=Path, help="CMSIS-NN source tree (sent to the workers by content)")
        parser.add_argument("--opt", default="-Os", choices=OPT_LEVELS)
        parser.add_argument("--budget-flash", type=parse_size, metavar="N", help="a failure above this flash use")
        parser.add_argument("--budget-ram", type=parse_size, metavar="N", help="a failure above this RAM use")
        parser.add_argument("--build-memory", type=build_memory_arg("--build-memory"), default=DEFAULT_BUILD_MEMORY,
                            metavar="N", help="address space make and each compiler of a build may use, 64M to "
                                              "1024G (default 4G)")
        parser.add_argument("--junit", type=Path, help="write a JUnit XML report")
        parser.add_argument("--json", action="store_true", help="print the results as versioned JSON")

    def run(self, args):
        from .. import matrix
        from ..errors import UsageError

        jobs = _matrix_jobs(args)
        if not jobs and not args.retry_failed:  # nothing failed earlier: the grid is reported as it stands
            raise UsageError("nothing to do: give MLFs, --jobs-file or --retry-failed (or the filters left no job)")
        config = matrix.BuildConfig(opt=args.opt, runtime=args.runtime, board_files=tuple(args.board_file),
                                    cmsis_nn=args.cmsis_nn, budget_flash=args.budget_flash,
                                    budget_ram=args.budget_ram, build_memory=args.build_memory)
        limits = matrix.Limits(build_only=args.build_only, job_timeout=args.job_timeout, reply_timeout=args.timeout)
        prepare(args.output)  # before any work: a path that cannot be a folder loses no results
        results = _run_jobs(args, jobs, config, limits) if jobs else []
        if args.retry_failed:  # the retried jobs replace their earlier results; the rest of the grid stays
            results = matrix.merged_with_earlier(args.retry_failed, results)
        report = matrix.document(results)
        write_report_file(args.output / "matrix.json", json.dumps(report, indent=2) + "\n")
        write_report_file(args.output / "matrix.html", matrix.html_grid(results))
        if args.junit:
            write_report_file(args.junit, matrix.junit_xml(results))
        print(json.dumps(report, indent=2) if args.json else matrix.summary_table(results))
        return report["exit_code"]


def _run_jobs(args: argparse.Namespace, jobs: list, config, limits) -> list[dict]:
    from .. import matrix

    cache = matrix.BuildCache(None if args.no_cache else prepare(args.cache or args.output / "cache", "--cache"))
    progress = matrix.Progress(len(jobs))
    if not args.scheduler:
        progress.starting(f"starting a local Dask cluster of {max(args.workers, 1)} worker(s) for {len(jobs)} job(s)...")
    with matrix.dask_client(args.scheduler, args.workers, args.connect_timeout, on_warning=_warn) as client:
        results = matrix.run_matrix(jobs, config, limits, client=client, outroot=args.output, cache=cache,
                                    on_result=progress.finished, on_running=progress.running, on_warning=_warn)
    progress.close()
    return results


def _warn(text: str) -> None:
    print(f"mlfbuild: warning: {printable(text)}", file=sys.stderr, flush=True)


def _matrix_jobs(args: argparse.Namespace) -> list:
    from .. import matrix
    from ..errors import UsageError

    if args.retry_failed and (args.mlf or args.jobs_file):
        raise UsageError("--retry-failed takes its jobs from the earlier result: give no MLFs or --jobs-file with it")
    entries = [matrix.Entry(mlf=os.path.abspath(m)) for m in args.mlf]  # as typed: links not followed
    if args.jobs_file:
        entries += matrix.entries_from_file(args.jobs_file)
    jobs = matrix.jobs_to_retry(args.retry_failed) if args.retry_failed else matrix.cross(entries, args.board)
    jobs = matrix.with_default_samples(jobs, args.samples)
    filters = matrix.Filters(boards=args.filter_board, models=args.filter_model, executors=args.filter_executor,
                             interfaces=args.filter_interface)
    return matrix.apply_filters(jobs, filters)
