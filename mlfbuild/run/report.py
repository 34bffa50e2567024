"""Text and JUnit forms of a RunResult."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from xml.etree import ElementTree

from ..style import printable
from . import MISMATCH, PASS, ModelRun, RunResult
from .compare import TOP1, TOP1_SHARE, WITHIN


def format_run(result: RunResult, dequantize: bool = False) -> str:
    lines = [f"ran {result.target} on {result.board} ({result.seconds:.1f} s)"]
    if result.resends or result.damaged:
        lines.append(f"  console: {result.resends} request(s) sent again, {result.damaged} damaged reply(ies) "
                     "dropped (a lossy line; the results are unaffected)")
    for model in result.models:
        lines += _model_lines(model, dequantize)
    lines.append(_verdict(result))
    return "\n".join(lines)


def _model_lines(model: ModelRun, dequantize: bool) -> list[str]:
    ticks = model.ticks
    spread = "identical" if len(set(ticks)) == 1 else f"min {min(ticks)} max {max(ticks)}"
    stack = "not measured" if model.stack_peak is None else f"{model.stack_peak:,} B"
    runs = f"{ticks[-1]:,} ticks at {model.timer_hz:,} Hz; {len(ticks)} run(s), {spread}"
    lines = [f"  {model.name}: {_speed(model, runs)}; workspace peak {model.workspace_peak:,} B, stack peak {stack}"]
    if model.reference:
        lines.append(f"    reference: {model.reference} ({model.reference_kind}); {model.samples} sample(s)")
    if model.quantization:
        lines.append("    quantization: " + ", ".join(f"{name} scale {scale:.7g} zero point {zero}"
                                                     for name, (scale, zero) in model.quantization.items()))
    lines += [f"    {c.name}: {_comparison(c)}" for c in model.comparisons]
    if model.firmware_vs_mlf:
        lines += [f"    firmware vs its MLF (host twin), {c.name}: {_comparison(c)}" for c in model.firmware_vs_mlf]
        lines += [f"    MLF vs {model.reference}, {c.name}: {_comparison(c)}" for c in model.mlf_vs_model]
        lines.append(f"    verdict: {model.chain_verdict}")
    if model.unchecked:
        why = "no reference for this model" if not model.comparisons else "no reference for these outputs"
        lines.append(f"    not checked ({why}): {', '.join(model.unchecked)}")
    if dequantize:
        lines += [f"    {name} (last sample, {_what(model, name)}): {_values(values)}"
                  for name, values in model.output_values(dequantize=True).items()]
    return lines


def _rule(c) -> str:
    if c.rule == TOP1:
        return f"top-1 on {TOP1_SHARE:.0%} of samples, near-ties within {c.atol:g} LSB"
    if c.rule == WITHIN:
        return f"within {c.atol:g}{' LSB' if c.integer else ''}" + (f" + {c.rtol:g}·|ref|" if c.rtol else "")
    return "exact"


def _comparison(c) -> str:
    if c.ok:
        head = "match" if c.samples == 1 else f"match over {c.samples} samples"
    else:
        head = f"MISMATCH: {c.failure()}" + ("" if c.rule == TOP1 else f" (first {c.first_mismatches})")
    top1 = "" if c.top1_agreement is None else f", top-1 agrees {c.top1_agreement}/{c.samples}"
    unit = " LSB" if c.integer else ""
    return (f"{head} (rule: {_rule(c)}); {c.exact_samples}/{c.samples} exact, max |diff| "
            f"{c.max_abs_error:.6g}{unit}{top1}; rmse {c.rmse:.3g}, cosine {c.cosine:.6f}")


def _what(model: ModelRun, name: str) -> str:
    return "dequantized" if name in model.quantization else "raw: no scale and zero point known"


def _values(values) -> str:
    shown = ", ".join(f"{v:.6g}" for v in values.reshape(-1)[:16].tolist())
    return f"[{shown}{', ...' if values.size > 16 else ''}]"


def _speed(model: ModelRun, runs: str) -> str:
    """Off QEMU, the measured time; under QEMU's -icount the virtual clock counts instructions, so
    those lead and its time is said to be QEMU's, not the speed of any chip."""
    instructions = model.qemu_instructions
    if instructions is None:
        return f"{_latency(model)} ({runs})"
    if instructions == 0:
        return (f"under one timer tick (fewer than {model.instructions_per_tick:,.0f} instructions) per inference "
                f"in QEMU ({runs})")
    return (f"{instructions:,} instructions per inference in QEMU ({runs}: {qemu_time(model)} of QEMU's "
            f"-icount clock, not the speed of any chip)")


def qemu_time(model: ModelRun) -> str:
    """'23.4 ms': QEMU's virtual time for an inference, three significant digits."""
    ms = model.latency_ms
    return f"{ms:,.{max(0, 2 - math.floor(math.log10(ms)))}f} ms" if ms else "0 ms"


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
        verdicts = [m.chain_verdict for m in result.models if m.status == MISMATCH and m.chain_verdict]
        return "result: MISMATCH — " + (verdicts[0] if verdicts else "outputs differ from the reference")
    return (f"result: not checked — {len(result.unchecked)} output(s) had no reference "
            f"({checked} checked{', all matching' if checked else ''})")


# The outcomes a JUnit test case can have, in the meaning CI systems give them: a failure is a
# verdict on the model (outputs differ, over budget), an error is something that kept the verdict
# from being reached (build, run, infrastructure), skipped is a job whose outputs nobody checked.
PASSED, FAILURE, ERROR, SKIPPED = "passed", "failure", "error", "skipped"


@dataclass
class JUnitCase:
    classname: str
    name: str
    seconds: float
    outcome: str = PASSED
    message: str = ""
    detail: str = ""  # the element's text: a log tail, the first mismatching values
    kind: str = ""  # the type attribute of <failure>/<error>, e.g. "exit 4"
    properties: dict[str, object] = field(default_factory=dict)
    output: str = ""  # <system-out>


def junit_suite(name: str, cases: list[JUnitCase], seconds: float | None = None) -> bytes:
    """The one JUnit writer of mlfbuild: `run` and `matrix` both describe their results as cases.
    Names and messages may come from untrusted input: control characters are escaped (XML 1.0 has
    no way to hold them)."""
    counts = {outcome: sum(c.outcome == outcome for c in cases) for outcome in (FAILURE, ERROR, SKIPPED)}
    total = sum(c.seconds for c in cases) if seconds is None else seconds
    suite = ElementTree.Element("testsuite", name=name, tests=str(len(cases)), failures=str(counts[FAILURE]),
                                errors=str(counts[ERROR]), skipped=str(counts[SKIPPED]), time=f"{total:.3f}")
    for case in cases:
        element = ElementTree.SubElement(suite, "testcase", classname=printable(case.classname), name=printable(case.name),
                                         time=f"{case.seconds:.3f}")
        if case.properties:
            properties = ElementTree.SubElement(element, "properties")
            for key, value in case.properties.items():
                if value is not None:
                    ElementTree.SubElement(properties, "property", name=printable(key), value=printable(str(value)))
        if case.outcome != PASSED:
            verdict = ElementTree.SubElement(element, case.outcome, message=printable(case.message))
            if case.kind and case.outcome != SKIPPED:
                verdict.set("type", printable(case.kind))
            if case.detail:
                verdict.text = printable(case.detail, keep="\n\t")
        if case.output:
            ElementTree.SubElement(element, "system-out").text = printable(case.output, keep="\n\t")
    return ElementTree.tostring(suite, encoding="utf-8", xml_declaration=True)


def model_properties(model: ModelRun) -> dict[str, object]:
    """Timing of a model's last inference as JUnit properties: ticks, milliseconds and the clock that
    measured them; under QEMU's -icount the instructions, and the milliseconds are QEMU's virtual time
    (`clock` says so), not a chip's."""
    ticks = model.ticks[-1]
    properties: dict[str, object] = {"ticks": ticks, "timer_hz": model.timer_hz,
                                     "ms": float(f"{model.latency_ms:.6g}"),  # 6 digits: a host inference takes µs
                                     "clock": model.clock}
    if model.qemu_instructions is not None:
        properties["instructions"] = model.qemu_instructions
    return properties


def _figures(c) -> dict[str, object]:
    """A comparison's figures as JUnit properties."""
    return {"samples": c.samples, "exact_samples": c.exact_samples, "max_abs_diff": f"{c.max_abs_error:g}",
            "top1_agreement": c.top1_agreement, "rule": c.rule}


def junit_xml(result: RunResult) -> bytes:
    """One testcase per output: <failure> for a mismatch, <skipped> for an output no reference checked."""
    seconds = result.seconds / max(len(result.models), 1)
    cases = []
    for model in result.models:
        properties = model_properties(model)
        for c in model.comparisons:
            case = JUnitCase(f"{result.board}.{model.name}", c.name, seconds, properties={**properties, **_figures(c)},
                             output=f"ticks={model.ticks} hz={model.timer_hz}")
            if not c.ok:
                case.outcome, case.message = FAILURE, c.failure()
                case.detail = f"max abs error {c.max_abs_error}, first mismatches {c.first_mismatches}"
                if model.chain_verdict:
                    case.message = f"{c.failure()}; {model.chain_verdict}"
            cases.append(case)
        for c in model.firmware_vs_mlf:  # a firmware that differs from its own MLF fails whatever the tolerance
            case = JUnitCase(f"{result.board}.{model.name}", f"{c.name} (firmware vs its MLF)", seconds,
                             properties=properties)
            if not c.ok:
                case.outcome, case.message = FAILURE, f"{c.failure()}; {model.chain_verdict}"
            cases.append(case)
        cases += [JUnitCase(f"{result.board}.{model.name}", name, seconds, SKIPPED, "outputs not checked",
                            properties=properties, output=f"ticks={model.ticks} hz={model.timer_hz}")
                  for name in model.unchecked]
    return junit_suite(f"mlfbuild run {result.board}", cases, result.seconds)
