"""The project's one JUnit writer, shared by `mlfbuild run --junit` and `mlfbuild matrix --junit`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

from mlfbuild.run.report import JUnitCase, junit_suite

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "tiny_aot.tar"


def test_each_outcome_has_its_element_and_count():
    cases = [JUnitCase("b", "ok", 1.0, properties={"flash": 10, "ram": None}),
             JUnitCase("b", "differs", 1.0, "failure", "outputs differ", detail="first 3", kind="mismatch (exit 7)"),
             JUnitCase("b", "broke", 1.0, "error", "compiler error", kind="build error (exit 4)"),
             JUnitCase("b", "unchecked", 1.0, "skipped", "outputs not checked", detail="no reference")]
    suite = ElementTree.fromstring(junit_suite("s", cases))
    assert [suite.get(k) for k in ("tests", "failures", "errors", "skipped", "time")] == ["4", "1", "1", "1", "4.000"]
    ok, differs, broke, unchecked = suite
    assert list(ok) == [ok.find("properties")] and [(p.get("name"), p.get("value")) for p in ok.find("properties")] \
        == [("flash", "10")]  # an unknown value is left out, not written as "None"
    assert differs.find("failure").get("type") == "mismatch (exit 7)" and differs.find("failure").text == "first 3"
    assert broke.find("error").get("message") == "compiler error" and broke.find("failure") is None
    assert unchecked.find("skipped").get("message") == "outputs not checked" and unchecked.find("skipped").get("type") is None


def test_run_junit_has_timing_properties(tmp_path):
    junit = tmp_path / "run.xml"
    result = subprocess.run([sys.executable, "-m", "mlfbuild", "run", str(EXAMPLE), "--board", "host",
                             "--reference", str(EXAMPLE.with_suffix(".npz")), "--junit", str(junit)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    case = ElementTree.parse(junit).getroot().find("testcase")
    properties = {p.get("name"): p.get("value") for p in case.find("properties")}
    assert int(properties["ticks"]) > 0 and float(properties["ms"]) > 0
    assert "instructions" not in properties  # counted only under QEMU's -icount, not on the host
    assert properties["clock"] == "timer"    # the host's time is measured
