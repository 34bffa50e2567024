"""Text and JUnit forms of a RunResult."""

from __future__ import annotations

import math
from xml.etree import ElementTree

from . import MISMATCH, PASS, ModelRun, RunResult


def format_run(result: RunResult) -> str:
    lines = [f"ran {result.target} on {result.board} ({result.seconds:.1f} s)"]
    if result.resends or result.damaged:
        lines.append(f"  console: {result.resends} request(s) sent again, {result.damaged} damaged reply(ies) "
                     "dropped (a lossy line; the results are unaffected)")
    for model in result.models:
        ticks = model.ticks
        spread = "identical" if len(set(ticks)) == 1 else f"min {min(ticks)} max {max(ticks)}"
        stack = "not measured" if model.stack_peak is None else f"{model.stack_peak:,} B"
        lines.append(f"  {model.name}: {_latency(model)} ({ticks[-1]} ticks at {model.timer_hz:,} Hz; "
                     f"{len(ticks)} run(s), {spread}); workspace peak {model.workspace_peak:,} B, stack peak {stack}")
        for c in model.comparisons:
            verdict = "match" if c.ok else f"MISMATCH at {c.mismatches}/{c.size} (first {c.first_mismatches})"
            lines.append(f"    {c.name}: {verdict}; max abs err {c.max_abs_error:.3g}, rmse {c.rmse:.3g}, "
                         f"cosine {c.cosine:.6f}, top-1 {'agrees' if c.top1_agree else 'differs'}")
        if model.unchecked:
            why = "no reference for this model" if not model.comparisons else "no reference for these outputs"
            lines.append(f"    not checked ({why}): {', '.join(model.unchecked)}")
    lines.append(_verdict(result))
    return "\n".join(lines)


def _latency(model: ModelRun) -> str:
    """'0.0800 ms per inference, 12,500 inferences/s': three significant digits, no exponents."""
    rate = model.inferences_per_second
    if rate is None:
        return "under one timer tick per inference"
    ms = model.latency_ms
    per_second = f"{rate:,.0f}" if rate >= 100 else f"{rate:.3g}"
    return f"{ms:,.{max(0, 2 - math.floor(math.log10(ms)))}f} ms per inference, {per_second} inferences/s"


def _verdict(result: RunResult) -> str:
    checked = sum(len(m.comparisons) for m in result.models)
    if result.status == PASS:
        return f"result: pass — all {checked} output(s) of {len(result.models)} model(s) match the reference"
    if result.status == MISMATCH:
        return "result: MISMATCH — outputs differ from the reference"
    return (f"result: not checked — {len(result.unchecked)} output(s) had no reference "
            f"({checked} checked{', all matching' if checked else ''})")


def junit_xml(result: RunResult) -> bytes:
    """One testcase per output: <failure> for a mismatch, <skipped> for an output no reference checked."""
    suite = ElementTree.Element("testsuite", name=f"mlfbuild run {result.board}", time=f"{result.seconds:.3f}")
    failures = skipped = 0
    seconds = f"{result.seconds / max(len(result.models), 1):.3f}"
    for model in result.models:
        for c in model.comparisons:
            case = ElementTree.SubElement(suite, "testcase", classname=f"{result.board}.{model.name}", name=c.name,
                                          time=seconds)
            if not c.ok:
                failures += 1
                ElementTree.SubElement(case, "failure", message=f"{c.mismatches} of {c.size} values differ").text = \
                    f"max abs error {c.max_abs_error}, first mismatches {c.first_mismatches}"
            ElementTree.SubElement(case, "system-out").text = f"ticks={model.ticks} hz={model.timer_hz}"
        for name in model.unchecked:
            skipped += 1
            case = ElementTree.SubElement(suite, "testcase", classname=f"{result.board}.{model.name}", name=name,
                                          time=seconds)
            ElementTree.SubElement(case, "skipped", message="outputs not checked")
            ElementTree.SubElement(case, "system-out").text = f"ticks={model.ticks} hz={model.timer_hz}"
    suite.set("tests", str(len(suite)))
    suite.set("failures", str(failures))
    suite.set("skipped", str(skipped))
    return ElementTree.tostring(suite, encoding="utf-8", xml_declaration=True)
