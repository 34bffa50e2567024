"""Property tests for the matrix's untrusted files — jobs files, earlier results (--retry-failed),
cache entries (result.json) — and the project file (mlfbuild.toml): each either gives checked
values or fails with its one-line error, and nothing read from them names a path outside the
output folder. Past failures are kept as examples."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from mlfbuild.errors import InvalidInputError
from mlfbuild.matrix import cross, entries_from_file, jobs_to_retry
from mlfbuild.matrix.cache import BuildCache, DamagedEntry
from mlfbuild.matrix.layout import is_plain_name
from mlfbuild.projectfile import load_project_file

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
DEEP = "[" * 50_000 + "]" * 50_000

_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=True),
                     st.sampled_from(["", "..", "../../x", "/tmp/x", "a/b", "host", "\x1b[2J", "x.tar", "0.1"]),
                     st.text(max_size=12))
_JSON = st.recursive(_SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.text(max_size=8), inner, max_size=4)),
                     max_leaves=20)
_JOB_KEYS = st.sampled_from(["mlf", "references", "boards", "atol", "rtol", "id", "board", "other"])


def _job(draw_value) -> st.SearchStrategy:
    return st.dictionaries(_JOB_KEYS, draw_value, max_size=6)


def _dump(value) -> str:
    return json.dumps(value, allow_nan=True)


@SETTINGS
@given(text=st.one_of(_JSON.map(_dump), st.lists(_job(_JSON), max_size=4).map(_dump), st.text(max_size=100)))
@example(text=DEEP)
@example(text='[{"mlf": "a.tar", "atol": 1e999}]')
@example(text='[{"mlf": "a.tar", "rtol": NaN}]')
@example(text='[{"mlf": "a.tar", "atol": -1}]')
@example(text='[{"mlf": "a.tar", "boards": ["../../../tmp/x"]}]')
@example(text='[{"mlf": "a.tar", "boards": "host"}]')
@example(text='[{"mlf": ""}]')
def test_jobs_files_give_plain_job_ids_or_one_line(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("jobs") / "jobs.json"
    path.write_text(text, errors="surrogatepass")
    try:
        entries = entries_from_file(path)
    except InvalidInputError as exc:
        assert "\n" not in str(exc) and str(exc).startswith(f"{path}: ")
        return
    for job in cross(entries, ["host"]):
        assert is_plain_name(job.id)
        assert all(t is None or 0 <= t < float("inf") for t in (job.atol, job.rtol))


@SETTINGS
@given(jobs=st.one_of(_JSON, st.lists(st.fixed_dictionaries({"outcome": st.sampled_from(["error", "failure", "passed"]),
                                                             "job": st.one_of(_job(_JSON), _JSON)}), max_size=4)))
@example(jobs=[{"outcome": "error", "job": {"id": "/tmp/x", "mlf": "a.tar", "board": "host"}}])
@example(jobs=[{"outcome": "error", "job": {"id": "../../x", "mlf": "a.tar", "board": "host"}}])
@example(jobs=[{"outcome": "error", "job": {"id": "a", "mlf": "a.tar", "board": "host", "atol": float("inf")}}])
@example(jobs=[{"outcome": "error", "job": {"id": "a", "mlf": "a.tar", "board": "host"}}] * 2)
@example(jobs=[{"outcome": "error", "job": {"id": "a", "mlf": "a.tar", "board": "host", "references": "r.npz"}}])
@example(jobs=["x"])
def test_retry_files_give_plain_job_ids_or_one_line(tmp_path_factory, jobs):
    path = tmp_path_factory.mktemp("retry") / "previous.json"
    path.write_text(_dump({"format": "mlfbuild-matrix", "version": 1, "jobs": jobs}))
    try:
        retried = jobs_to_retry(path)
    except InvalidInputError as exc:
        assert "\n" not in str(exc)
        return
    assert all(is_plain_name(job.id) for job in retried) and len({j.id for j in retried}) == len(retried)


_RESULT = {"status": "built", "exit_code": 0, "message": "", "flash": 1, "ram": 1, "runnable": True, "seconds": 1.0,
           "worker": None, "file_names": ["build.json", "firmware.elf"]}
_RECORD = {"mlf": {"sha256": "a" * 64}, "board": {"name": "host"},
           "outputs": {"firmware.elf": hashlib.sha256(b"x").hexdigest()}}


@SETTINGS
@given(changes=st.dictionaries(st.sampled_from(sorted(_RESULT) + ["other"]), _JSON, max_size=3),
       text=st.one_of(st.none(), st.text(max_size=60)))
@example(changes={"file_names": ["../../outside", "build.json", "firmware.elf"]}, text=None)
@example(changes={"file_names": ["/etc/passwd", "build.json", "firmware.elf"]}, text=None)
@example(changes={"status": None}, text=None)
@example(changes={}, text=DEEP)
@example(changes={}, text='{"status": "built"}')
def test_cache_records_are_a_checked_hit_or_a_damaged_entry(tmp_path_factory, changes, text):
    root = tmp_path_factory.mktemp("cache")
    entry = root / ("k" * 64)
    entry.mkdir()
    (entry / "firmware.elf").write_bytes(b"x")
    (entry / "build.json").write_text(json.dumps(_RECORD))
    (root / "outside").write_text("secret")
    result = {**_RESULT, **changes}
    (entry / "result.json").write_text(text if text is not None else _dump(result), errors="surrogatepass")
    try:
        hit = BuildCache(root).get("k" * 64, "a" * 64, "host")
    except DamagedEntry as exc:
        assert "\n" not in str(exc)
        return
    assert hit is not None and set(hit["files"]) == {"build.json", "firmware.elf"}
    assert hit["files"]["firmware.elf"] == b"x" and hit["status"] == "built"


_TOML_LINES = st.sampled_from(['mlf = "a.tar"', 'board = "host"', 'opt = "-O2"', 'runtime = "tvm"', "atol = inf",
                               "atol = nan", "rtol = -1", "atol = 0.5", "rtol = 1e400", 'atol = "0.1"',
                               'references = ["a.npz"]', "[budgets]", 'flash = "64K"', "ram = -1", "x = 1",
                               "a = " + "[" * 3000 + "]" * 3000])


@SETTINGS
@given(lines=st.lists(st.one_of(_TOML_LINES, st.text(max_size=30)), max_size=6))
@example(lines=["a = " + "[" * 100_000 + "]" * 100_000])
@example(lines=["atol = inf"])
@example(lines=["rtol = nan"])
def test_project_files_give_checked_values_or_one_line(tmp_path_factory, lines):
    path = tmp_path_factory.mktemp("project") / "mlfbuild.toml"
    path.write_text("\n".join(lines), errors="surrogatepass")
    try:
        project = load_project_file(path)
    except InvalidInputError as exc:
        assert "\n" not in str(exc) and str(exc).startswith(f"{path}: ")
        return
    assert all(t is None or 0 <= t < float("inf") for t in (project.atol, project.rtol))
    assert isinstance(project.path, Path)
