"""A matrix's results in every form: the job result dict, the exit code, a summary table, versioned
JSON, JUnit (through the project's one JUnit writer) and an offline HTML grid."""

from __future__ import annotations

import html
import json
import sys
from pathlib import Path

from ..errors import (EXIT_BUILD, EXIT_FLASH, EXIT_INFRASTRUCTURE, EXIT_INTERNAL, EXIT_INVALID_INPUT, EXIT_MISMATCH,
                      EXIT_OVER_BUDGET, EXIT_RUN, EXIT_USAGE, InvalidInputError)
from ..run.report import ERROR, FAILURE, PASSED, SKIPPED, JUnitCase, junit_suite
from ..outfolder import write_file
from ..style import printable
from ..untrusted import MAX_TEXT_BYTES, read_regular
from .jobs import Job
from .layout import file_in, job_folder
from .stage import (BUILD_ERROR, INFRASTRUCTURE, INVALID_INPUT, MISMATCH, NOT_CHECKED, NOT_RUN, OVER_BUDGET, PASS,
                    RUN_ERROR)

FORMAT, VERSION = "mlfbuild-matrix", 1

# What each status means to CI: a failure is a verdict on the model; an error kept the verdict from
# being reached; skipped means nobody checked the outputs.
OUTCOMES = {PASS: PASSED, MISMATCH: FAILURE, OVER_BUDGET: FAILURE, NOT_CHECKED: SKIPPED, NOT_RUN: SKIPPED,
            BUILD_ERROR: ERROR, RUN_ERROR: ERROR, INVALID_INPUT: ERROR, INFRASTRUCTURE: ERROR}

# Which job's exit code the matrix exits with: invalid input first (the matrix itself is wrong),
# then errors (build 4, run 6, flash 8, infrastructure 9, internal 1), then failures (over budget 5,
# mismatch 7). Jobs that passed or were skipped give 0.
EXIT_PRECEDENCE = (EXIT_INVALID_INPUT, EXIT_USAGE, EXIT_BUILD, EXIT_RUN, EXIT_FLASH, EXIT_INFRASTRUCTURE, EXIT_INTERNAL,
                   EXIT_OVER_BUDGET, EXIT_MISMATCH)


def job_result(job: Job, outcome: dict, cache: str, outroot: Path) -> dict:
    """The reported result of a job; its files (if any) are written to OUTROOT/jobs/<id>/ (layout.py
    says which paths may be written) and named by path."""
    folder = job_folder(outroot, job.id)
    files = outcome.get("files", {})
    paths = {name: file_in(folder, name) for name in files}  # every name checked before anything is written
    for name, content in files.items():
        write_file(paths[name], content)
    if "firmware.elf" in paths:
        paths["firmware.elf"].chmod(0o755)  # runnable again with mlfbuild run, host builds too
    status = outcome["status"]
    return {"id": job.id, "job": job.to_json(), "model": job.model, "board": job.board, "status": status,
            "outcome": OUTCOMES[status], "exit_code": outcome["exit_code"], "message": outcome["message"],
            "flash": outcome.get("flash"), "ram": outcome.get("ram"), "ticks": outcome.get("ticks"),
            "ms": outcome.get("ms"), "instructions": outcome.get("instructions"), "clock": outcome.get("clock"),
            "unchecked": outcome.get("unchecked", []),
            "seconds": round(outcome.get("build_seconds", 0.0) + outcome.get("run_seconds", 0.0), 3),
            "build_seconds": outcome.get("build_seconds"), "run_seconds": outcome.get("run_seconds"),
            "cache": cache, "worker": outcome.get("worker"), "build_worker": outcome.get("build_worker"),
            "folder": str(folder), "files": sorted(outcome.get("files", {}))}


def matrix_exit_code(results: list[dict]) -> int:
    codes = {r["exit_code"] for r in results} - {0}
    return min(codes, key=lambda c: EXIT_PRECEDENCE.index(c) if c in EXIT_PRECEDENCE else len(EXIT_PRECEDENCE),
               default=0)


def counts(results: list[dict]) -> dict[str, int]:
    return {outcome: sum(r["outcome"] == outcome for r in results) for outcome in (PASSED, FAILURE, ERROR, SKIPPED)}


def document(results: list[dict]) -> dict:
    """The versioned JSON of a matrix (what --json prints and --retry-failed reads)."""
    return {"format": FORMAT, "version": VERSION, "exit_code": matrix_exit_code(results), "total": len(results),
            "counts": counts(results), "jobs": results}


def load_results(path: Path) -> dict:
    text = read_regular(path, "matrix result", MAX_TEXT_BYTES)
    try:
        data = json.loads(text)
    except RecursionError:
        raise InvalidInputError(f"{path}: not a readable matrix result (nested too deeply)") from None
    except ValueError as exc:
        raise InvalidInputError(f"{path}: not a readable matrix result ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("version") != VERSION \
            or not isinstance(data.get("jobs"), list):
        raise InvalidInputError(f"{path}: not a {FORMAT} v{VERSION} result (write one with mlfbuild matrix --json)")
    return data


def _rows(results: list[dict]) -> dict[str, str]:
    """Row name of each job: its model, with the jobs-file entry when one MLF is there more than once."""
    entries: dict[str, set[str]] = {}
    for r in results:
        entries.setdefault(r["model"], set()).add(r["id"].split("-")[0])
    named = {r["id"]: r["model"] if len(entries[r["model"]]) == 1 else f"{r['model']} #{r['id'].split('-')[0]}"
             for r in results}
    return {job: printable(name) for job, name in named.items()}  # MLF names are untrusted text


def _cell(r: dict) -> str:
    """Status and flash, in bytes as the HTML grid and the size report write them."""
    text = r["status"]
    if r["flash"] is not None:
        text += f" {r['flash']:,} B"
    return text


def summary_table(results: list[dict]) -> str:
    boards = sorted({printable(r["board"]) for r in results})  # names from a jobs file are untrusted text
    rows = _rows(results)
    models = list(dict.fromkeys(rows.values()))
    cell = {(rows[r["id"]], printable(r["board"])): _cell(r) for r in results}
    width = max(len(m) for m in models + ["model"])
    widths = {b: max([len(b)] + [len(cell.get((m, b), "-")) for m in models]) for b in boards}
    lines = [f"{'model':<{width}}  " + "  ".join(f"{b:<{widths[b]}}" for b in boards)]
    lines += [f"{m:<{width}}  " + "  ".join(f"{cell.get((m, b), '-'):<{widths[b]}}" for b in boards) for m in models]
    n = counts(results)
    lines.append(f"{n[PASSED]}/{len(results)} passed, {n[FAILURE]} failed, {n[ERROR]} errors, {n[SKIPPED]} not checked "
                 f"(not run, or no reference); exit {matrix_exit_code(results)}")
    return "\n".join(lines)


def junit_xml(results: list[dict]) -> bytes:
    """One test case per job: classname the board, name the model."""
    cases, rows = [], _rows(results)
    for r in results:
        timed = r["ms"] or {}
        properties = {"flash": r["flash"], "ram": r["ram"], "cache": r["cache"]}
        for name in timed:
            suffix = "" if len(timed) == 1 else f".{name}"  # one model: plain names
            properties[f"ms{suffix}"] = r["ms"][name]
            properties[f"ticks{suffix}"] = r["ticks"][name]
            if r["instructions"] and name in r["instructions"]:
                properties[f"instructions{suffix}"] = r["instructions"][name]
            if r.get("clock") and name in r["clock"]:
                properties[f"clock{suffix}"] = r["clock"][name]
        outcome = r["outcome"]
        message = "outputs not checked" if outcome == SKIPPED else r["message"]
        cases.append(JUnitCase(classname=r["board"], name=rows[r["id"]], seconds=r["seconds"], outcome=outcome,
                               message=message, detail=r["message"] if outcome == SKIPPED else "",
                               kind=f"{r['status']} (exit {r['exit_code']})", properties=properties,
                               output=f"files in {r['folder']}"))
    return junit_suite("mlfbuild matrix", cases)


_STYLE = """body{font:14px sans-serif;margin:1.5em}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:.35em .6em;vertical-align:top}th{background:#f4f4f4;text-align:left}
.passed{background:#dff3df}.failure{background:#fde0c8}.error{background:#f8d0d0}.skipped{background:#eee}
small{color:#555;display:block}"""


def html_grid(results: list[dict]) -> str:
    """One offline page: models × boards; status, flash, RAM and latency; links to each size report."""
    boards = sorted({r["board"] for r in results})
    rows = _rows(results)
    models = list(dict.fromkeys(rows.values()))
    by_cell = {(rows[r["id"]], r["board"]): r for r in results}
    n = counts(results)
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8"><title>mlfbuild matrix</title>',
           f"<style>{_STYLE}</style></head><body><h1>mlfbuild matrix</h1>",
           f"<p>{n[PASSED]} passed, {n[FAILURE]} failed, {n[ERROR]} errors, {n[SKIPPED]} skipped of {len(results)}; "
           f"exit code {matrix_exit_code(results)}</p>",
           "<table><tr><th>model</th>" + "".join(f"<th>{html.escape(printable(b))}</th>" for b in boards) + "</tr>"]
    for model in models:
        row = [f"<tr><th>{html.escape(model)}</th>"]
        for board in boards:
            r = by_cell.get((model, board))
            row.append("<td></td>" if r is None else _html_cell(r))
        out.append("".join(row) + "</tr>")
    out.append("</table></body></html>")
    return "\n".join(out)


def _html_cell(r: dict) -> str:
    facts = [f"<b>{html.escape(r['status'])}</b>"]
    if r["flash"] is not None:
        facts.append(f"<small>flash {r['flash']:,} B · RAM {r['ram']:,} B</small>")
    if r["ms"]:
        facts.append("<small>" + ", ".join(_html_timing(r, name) for name in r["ms"]) + "</small>")
    if "size.html" in r["files"]:
        facts.append(f'<small><a href="jobs/{html.escape(r["id"])}/size.html">size report</a></small>')
    if r["outcome"] != PASSED and r["message"]:
        facts.append(f"<small>{html.escape(printable(r['message']))}</small>")
    return f'<td class="{r["outcome"]}" title="{html.escape(r["id"])}">' + "".join(facts) + "</td>"


def _html_timing(r: dict, name: str) -> str:
    """Under QEMU the instructions lead and the time is QEMU's virtual time; elsewhere the time measured."""
    instructions = (r.get("instructions") or {}).get(name)
    if instructions is None:
        return f"{html.escape(name)} {r['ms'][name]:g} ms"
    return (f"{html.escape(name)} {instructions:,} instructions per inference "
            f"(QEMU: {r['ms'][name]:g} ms of its -icount clock, not a chip's time)")


class Progress:
    """Live progress: on a TTY one line rewritten in place (done/total, counts, jobs under way); else
    one plain line per finished job, for CI logs."""

    def __init__(self, total: int, stream=sys.stderr):
        self.total, self.stream, self.done = total, stream, []
        self.tty = stream.isatty()

    def finished(self, result: dict) -> None:
        self.done.append(result)
        detail = f": {result['message']}" if result["message"] else ""
        line = (f"[{len(self.done)}/{self.total}] {result['model']} on {result['board']}: {result['status']} "
                f"({result['seconds']:.1f} s){detail}")
        if self.tty:
            self.stream.write("\r\x1b[K")
        self.stream.write(printable(line) + "\n")
        self.stream.flush()

    def starting(self, what: str) -> None:
        """One line before the first result: a local cluster takes seconds to start, silent otherwise."""
        self.stream.write(printable(what) + "\n")
        self.stream.flush()

    def running(self, labels: list[str]) -> None:
        if not self.tty:
            return
        n = counts(self.done)
        now = ", ".join(labels[:3]) + (f" +{len(labels) - 3}" if len(labels) > 3 else "")
        status = (f"{len(self.done)}/{self.total} done · {n[PASSED]} pass {n[FAILURE]} fail {n[ERROR]} error "
                  f"{n[SKIPPED]} skipped · under way: {now or '-'}")
        self.stream.write("\r\x1b[K" + printable(status[:200]))
        self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


def merged_with_earlier(path: Path, retried: list[dict]) -> list[dict]:
    """The earlier matrix's results (read again, as jobs_to_retry read them) with each retried job's
    new result in its place: a retry completes the grid, it does not replace it."""
    new = {r["id"]: r for r in retried}
    return [new.pop(r.get("id"), r) if isinstance(r, dict) else r for r in load_results(path)["jobs"]] + \
        list(new.values())


def jobs_to_retry(path: Path) -> list[Job]:
    """The jobs of an earlier matrix's JSON that failed or errored (passed and skipped ones stay done)."""
    document = load_results(path)
    try:
        jobs = [Job.from_json(r["job"]) for r in document["jobs"] if r["outcome"] in ("failure", "error")]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InvalidInputError(f"{path}: not a {FORMAT} v{VERSION} result ({exc})") from None
    ids = [job.id for job in jobs]
    if len(set(ids)) != len(ids):
        twice = next(i for i in ids if ids.count(i) > 1)
        raise InvalidInputError(f"{path}: not a {FORMAT} v{VERSION} result (job id {twice!r} is there twice)")
    return jobs
