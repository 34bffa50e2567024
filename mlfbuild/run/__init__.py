"""`mlfbuild run` as a library call: a build folder + a transport + tensors → outputs and metrics.

Knows how to talk to the firmware and compare numbers; does not know how the build was made
(it reads build.json for the model table and the board).
"""

from __future__ import annotations

import importlib.util

import signal
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from .. import record as build_folder
from ..console.client import Client
from ..errors import InvalidInputError, RunError, UsageError
from ..project import templates_hash
from ..schemas import RUN as RUN_SCHEMA
from ..units import tolerance
from .compare import Comparison, compare, is_classifier
from .references import HOST, HostTwinReference, ModelReference, Reference, pick, resolve as resolve_references
from .twin import build_twin, save_feeds, twin_outputs, twin_source
from .samples import as_input_dtype, check_sample_bytes, dequantize as dequantize_values, random_samples, sample_axis
from ..project.runtime import fault_exit_code
from .profile import Profile, profiled_transport, with_profile
from .tensorfile import load_tensors
from .transports import QemuTransport, Transport, make_transport


Progress = Callable[[str, int, int], None]  # (model, inferences done, inferences in all)

# The verdicts of a model and of a run. "pass" is said only when every output of every model was
# compared with a reference and matched; a run with anything unchecked is "not checked".
MATCH, MISMATCH, NOT_CHECKED, PASS = "match", "mismatch", "not checked", "pass"


@dataclass
class ModelRun:
    name: str
    ticks: list[int]
    timer_hz: int
    workspace_peak: int
    stack_peak: int | None  # None: not measured (the host build paints no stack)
    outputs: dict[str, np.ndarray]
    comparisons: list[Comparison] = field(default_factory=list)
    reference: str | None = None
    reference_kind: str | None = None  # what the reference's outputs are (Reference.kind)
    samples: int = 1  # inputs run (each `repeat` times); `outputs` holds the last one's
    model_derived: bool = False  # the reference was computed from the original model (the LSB tolerance)
    quantization: dict[str, tuple[float, int]] = field(default_factory=dict)  # tensor → (scale, zero point)
    all_outputs: dict[str, np.ndarray] = field(default_factory=dict, repr=False)  # every sample's, stacked
    # Against the original model, the chain in two links: the firmware against its MLF (the host twin,
    # exactly) and the MLF (the twin's outputs) against the model, by the same rule as `comparisons`.
    firmware_vs_mlf: list[Comparison] = field(default_factory=list)
    mlf_vs_model: list[Comparison] = field(default_factory=list)
    # Set when QEMU's -icount clock timed the run (one instruction per 2**shift virtual ns): the
    # ticks then count instructions, not the time any chip would take.
    icount_shift: int | None = None
    producer: str = "TVM"  # what made the MLF (producer_of), named where a verdict blames the conversion

    @property
    def latency_ms(self) -> float:
        """The last inference's time in milliseconds (of the firmware's timer; QEMU's virtual time there)."""
        return 1000.0 * self.ticks[-1] / self.timer_hz if self.ticks and self.timer_hz else 0.0

    @property
    def clock(self) -> str:
        """What the ticks measure: 'qemu-icount' (instructions, as QEMU's virtual time) or 'timer' (real time)."""
        return "timer" if self.icount_shift is None else "qemu-icount"

    @property
    def qemu_instructions(self) -> int | None:
        """The last inference's instructions, read from QEMU's -icount clock (None off QEMU), to the
        timer's resolution (one tick is 1e9 / (Hz · 2^shift) instructions)."""
        if self.icount_shift is None or not self.ticks or not self.timer_hz:
            return None
        return round(self.ticks[-1] * 1e9 / self.timer_hz / 2 ** self.icount_shift)

    @property
    def instructions_per_tick(self) -> float | None:
        return None if self.icount_shift is None or not self.timer_hz else 1e9 / self.timer_hz / 2 ** self.icount_shift

    @property
    def inferences_per_second(self) -> float | None:
        """1 / latency; None when an inference took less than one timer tick."""
        return 1000.0 / self.latency_ms if self.latency_ms else None

    @property
    def unchecked(self) -> list[str]:
        """Outputs that no reference checked (all of them when the model had no reference)."""
        checked = {c.name for c in self.comparisons}
        return [name for name in self.outputs if name not in checked]

    @property
    def status(self) -> str:
        """match (every output checked and equal), mismatch, or not checked — never a match by default."""
        if any(not c.ok for c in self.comparisons + self.firmware_vs_mlf):
            return MISMATCH
        return NOT_CHECKED if self.unchecked else MATCH

    def output_values(self, dequantize: bool = False) -> dict[str, np.ndarray]:
        """The last sample's outputs, as real numbers where the scale and zero point are known."""
        return {name: dequantize_values(values, *self.quantization[name])
                if dequantize and name in self.quantization else values for name, values in self.outputs.items()}

    def to_json(self, dequantize: bool = False) -> dict:
        extra = {"dequantized": {name: values.reshape(-1).tolist()
                                 for name, values in self.output_values(dequantize=True).items()}} if dequantize else {}
        return {**extra, "name": self.name, "ticks": self.ticks, "timer_hz": self.timer_hz, "latency_ms": self.latency_ms,
                "inferences_per_second": self.inferences_per_second,
                "clock": self.clock, "qemu_instructions": self.qemu_instructions,
                "workspace_peak": self.workspace_peak, "stack_peak": self.stack_peak,
                "reference": self.reference, "status": self.status, "unchecked": self.unchecked,
                "samples": self.samples, "model_derived": self.model_derived,
                "quantization": {name: {"scale": scale, "zero_point": zero}
                                 for name, (scale, zero) in self.quantization.items()},
                "outputs": [c.to_json() for c in self.comparisons],
                **({"chain": {"firmware_vs_mlf": [c.to_json() for c in self.firmware_vs_mlf],
                              "mlf_vs_model": [c.to_json() for c in self.mlf_vs_model],
                              "verdict": self.chain_verdict}} if self.firmware_vs_mlf else {})}

    @property
    def chain_verdict(self) -> str | None:
        """Which link of original model → MLF → firmware a difference comes from (None: no chain run)."""
        if not self.firmware_vs_mlf:
            return None
        if any(not c.ok for c in self.firmware_vs_mlf):
            return ("the firmware differs from its own MLF (run on the host): a fault of the build, toolchain, "
                    "board or image, not of the model")
        if any(not c.ok for c in self.comparisons):
            return (f"the firmware computes exactly what the MLF computes; the MLF differs from {self.reference} "
                    f"(the model's conversion by {self.producer})")
        return f"the firmware computes exactly what the MLF computes, and the MLF meets {self.reference}"


@dataclass
class RunResult:
    target: str
    board: str
    models: list[ModelRun]
    exit_code: int | None
    seconds: float
    resends: int = 0  # requests sent again because their reply did not come (a lossy console)
    damaged: int = 0  # replies that failed their checksum
    warnings: list[str] = field(default_factory=list)  # said on stderr; not part of the verdict
    profile: Profile | None = None  # with `profile=True`: per-operator counts, or why there are none

    @property
    def unchecked(self) -> list[str]:
        """`model/output` for every output no reference checked."""
        return [f"{m.name}/{name}" for m in self.models for name in m.unchecked]

    @property
    def status(self) -> str:
        """pass, mismatch, or not checked (nothing differed, but not every output was compared)."""
        statuses = {m.status for m in self.models}
        if MISMATCH in statuses:
            return MISMATCH
        return NOT_CHECKED if NOT_CHECKED in statuses or not self.models else PASS

    def to_json(self, dequantize: bool = False) -> dict:
        document = {"schema": RUN_SCHEMA, "target": self.target, "board": self.board, "exit_code": self.exit_code,
                    "seconds": self.seconds, "status": self.status, "unchecked": self.unchecked,
                    "models": [m.to_json(dequantize) for m in self.models],
                    "console": {"resends": self.resends, "damaged_frames": self.damaged}}
        return with_profile(document, self.profile) if self.profile is not None else document


def _sample_inputs(model: dict, given: dict[str, np.ndarray], inputs_path, reference: Reference | None,
                   samples: int | None, seed: int, warnings: list[str]) -> dict[str, np.ndarray]:
    """Input name → [samples, *shape] in the input's dtype: from --input, else the reference's tensors,
    else seeded random values. A file's samples are all used (the first `samples` of them, when given)."""
    brought = reference.inputs(model) if reference else {}
    chosen: dict[str, np.ndarray] = {}
    for spec in model["inputs"]:
        value = pick(given, model, spec)
        if value is not None:
            quantization = reference.quantization_of(model).get(spec["name"]) if reference else None
            value = as_input_dtype(sample_axis(value, spec["shape"], str(inputs_path), spec["name"]),
                                   spec["dtype"], quantization, str(inputs_path), spec["name"])
        elif spec["name"] in brought:
            value = as_input_dtype(brought[spec["name"]], spec["dtype"], None, reference.path, spec["name"])
        if value is not None:
            chosen[spec["name"]] = value[:samples] if samples else value
    counts = {len(v) for v in chosen.values()}
    if len(counts) > 1:
        raise InvalidInputError(f"the inputs of model {model['name']} hold different numbers of samples: "
                                f"{', '.join(f'{k} {len(v)}' for k, v in chosen.items())}")
    count = counts.pop() if counts else samples or 1
    if samples and count < samples:
        warnings.append(f"--samples {samples}: the inputs of model {model['name']} come from a file holding "
                        f"{count} sample(s); ran those")
    check_sample_bytes(count, sum(spec["size_bytes"] for spec in model["inputs"]), model["name"])
    return {spec["name"]: chosen[spec["name"]] if spec["name"] in chosen else
            random_samples(spec["name"], spec["dtype"], spec["shape"], count, seed) for spec in model["inputs"]}


def _check_inputs_match(given: dict[str, np.ndarray], path, models: list[dict]) -> None:
    """A tensor file none of whose keys names an input would be ignored and random inputs run instead,
    passing a check it never made: refused, naming what the models take."""
    if not given or any(pick(given, model, spec) is not None for model in models for spec in model["inputs"]):
        return
    expected = ", ".join(f"{spec['name']}" if len(models) == 1 else f"{model['name']}/{spec['name']}"
                         for model in models for spec in model["inputs"])
    raise InvalidInputError(f"{path}: no key names an input of the firmware ({', '.join(sorted(given)) or 'none'}); "
                            f"it takes {expected}")


def _check_tolerances(**given: float | None) -> None:
    """Tolerances follow units.tolerance (finite, ≥ 0) whoever passes them: an infinite one passes anything."""
    for name, value in given.items():
        if value is not None:
            try:
                tolerance(value)
            except ValueError as exc:
                raise UsageError(f"--{name}: {exc}") from None


def _compiled_exactly(reference: Reference, model: dict) -> bool:
    """An MLF imported from this very .tflite is held to it bit for bit (docs/import.md)."""
    return isinstance(reference, ModelReference) and reference.compiled_exactly(model)


def _imported_models(build_dir: Path, models: list[dict], warnings: list[str]) -> list[str]:
    """An MLF made by `mlfbuild import` carries its .tflite: without --reference, the run is checked
    against it (with LiteRT, where installed)."""
    model = build_dir / "mlf" / "src" / "model.tflite"
    if len(models) != 1 or not model.is_file():
        return []
    if importlib.util.find_spec("ai_edge_litert") is None:
        warnings.append(f"outputs not checked against the imported model ({model}): LiteRT is not installed "
                        "(pip install 'mlfbuild[reference]')")
        return []
    refused = unrunnable_model_note(model)
    if refused:
        warnings.append(refused)
        return [HOST]
    return [str(model)]


def _twin_outputs(build_dir: Path, record: dict, feeds: dict[str, dict[str, np.ndarray]],
                  timeout: float) -> dict[str, list[np.ndarray]]:
    """Build the host twin (run/twin.py) and run it on `feeds`: each model's outputs, every sample."""
    twin_dir = build_twin(build_dir, record)
    with tempfile.TemporaryDirectory(prefix="mlfbuild-twin-") as scratch:
        result = run_build(twin_dir, inputs=save_feeds(feeds, Path(scratch)), timeout=timeout)
    return twin_outputs(result, record)


def unrunnable_model_note(model: Path) -> str | None:
    """For a model LiteRT cannot run: what a run checks instead (the firmware against its host twin)."""
    from ..reference.litert import cannot_run

    why = cannot_run(model)
    return None if why is None else (f"outputs not checked against {model}: {why}; the firmware is checked "
                                     "against its own MLF compiled for the host (its host twin) only")


def run_build(build_dir: Path, *, port: str | None = None, baud: int = 115200, inputs: Path | None = None,
              references: list[str] = (), atol: float | None = None, rtol: float | None = None, repeat: int = 1,
              timeout: float = 60.0, seed: int = 0, icount_shift: int = 0,
              transport: Transport | None = None, progress: Progress | None = None,
              profile: bool = False, samples: int | None = None, cycles_for: str | None = None) -> RunResult:
    """Run every sample of every model `repeat` times in one session and compare its outputs;
    `progress(model, done, total)` is called after each inference. `samples`: how many seeded random
    inputs (or the first of a file's). With `profile`, count instructions per operator (QEMU) into
    `result.profile` (which says why, where there are none)."""
    _check_tolerances(atol=atol, rtol=rtol)
    record = build_folder.load(build_dir).data
    models = record["models"]
    given = load_tensors(inputs)
    _check_inputs_match(given, inputs, models)
    warnings: list[str] = []
    refs = resolve_references(list(references) or _imported_models(Path(build_dir), models, warnings), models)
    # Every input and reference is ready, and checked against its model, before the firmware starts.
    feeds = {m["name"]: _sample_inputs(m, given, inputs, refs.get(m["name"]), samples, seed, warnings)
             for m in models}
    twins = {id(ref): ref for ref in refs.values() if isinstance(ref, HostTwinReference)}.values()
    # The original model: which link differs? (needs the MLF beside the firmware, to build its twin)
    chain = any(ref.model_derived for ref in refs.values()) and twin_source(Path(build_dir)) is not None
    twin_out = _twin_outputs(Path(build_dir), record, feeds, timeout) if twins or chain else {}
    for twin in twins:  # one twin run serves every model it is the reference of
        twin.outputs = twin_out
    expected = {m["name"]: refs[m["name"]].expected(m, feeds[m["name"]]) for m in models if m["name"] in refs}
    for model in models:
        _check_sample_counts(model, refs.get(model["name"]), feeds[model["name"]], expected.get(model["name"]))
    finish_profile = None
    if profile:
        transport, finish_profile = profiled_transport(build_dir, port=port, baud=baud, cycles_for=cycles_for)
    transport = transport or make_transport(build_dir, record, port=port, baud=baud, icount_shift=icount_shift)
    started = time.monotonic()
    transport.start()
    client = Client(transport.port, timeout=timeout, is_alive=transport.is_alive)
    results: list[ModelRun] = []
    try:
        try:
            if transport.boots_fresh:
                client.wait_for_banner()
            hello = client.hello()
        except RunError as error:
            raise RunError(f"{error}{_stale_firmware_hint(record)}") from None
        if hello.models != len(models):
            raise RunError(f"the firmware has {hello.models} model(s), build.json lists {len(models)}: "
                           "is this the firmware of this build?")
        for model in models:
            reference = refs.get(model["name"])
            exact = isinstance(reference, HostTwinReference)  # the firmware against its own MLF: no tolerance
            results.append(_run_model(client, model, feeds[model["name"]], reference,
                                      expected.get(model["name"]), repeat, 0.0 if exact else atol,
                                      0.0 if exact else rtol, hello.timer_hz,
                                      stack_measured=record["board"]["kind"] != "host", progress=progress))
        if isinstance(transport, QemuTransport):  # QEMU's clock counts instructions: say so wherever time is shown
            for run in results:
                run.icount_shift = transport.icount_shift
        if transport.boots_fresh:  # a flashed board keeps serving: the next run finds it ready
            client.quit(0)
        for model, run in zip(models, results):
            if chain and refs.get(model["name"]) is not None and refs[model["name"]].model_derived:
                _compare_chain(run, model, twin_out[model["name"]], expected[model["name"]], atol, rtol)
    except RunError as error:
        raise _explain_end(error, transport, transport.close(timeout=2.0), client.text) from None
    except BaseException:  # bad input found mid-run, Ctrl-C, a bug: the emulator must not outlive the run
        transport.close(timeout=2.0)
        raise
    ending = transport.close(timeout=min(timeout, 10.0))
    if ending.exit_code not in (0, None):
        raise RunError(f"the firmware exited with status {ending.exit_code} on {transport.describe()}")
    result = RunResult(target=str(build_dir), board=record["board"]["name"], models=results,
                       exit_code=ending.exit_code, seconds=time.monotonic() - started,
                       resends=client.resends, damaged=client.damaged, warnings=warnings)
    if finish_profile is not None:
        result.profile = finish_profile(result)
    result.warnings += _stack_overflow_warnings(results, (record.get("stack") or {}).get("reserve"))
    result.warnings += _cmsis_nn_rounding_hints(results, record)
    warning = build_folder.write_run(Path(build_dir), result.to_json())
    if warning:
        result.warnings.append(warning)
    return result


def _compare_chain(run: ModelRun, model: dict, twin: list[np.ndarray], wanted: list[np.ndarray],
                   atol: float | None, rtol: float | None) -> None:
    """The firmware against its MLF (exact, always) and the MLF against the original model (the rule
    the user's reference is held to), output by output."""
    input_elements = sum(int(np.prod(spec["shape"], dtype=np.int64)) for spec in model["inputs"])
    for spec, mlf, expected in zip(model["outputs"], twin, wanted):
        run.firmware_vs_mlf.append(compare(spec["name"], run.all_outputs[spec["name"]], mlf, 0.0, 0.0))
        run.mlf_vs_model.append(compare(spec["name"], mlf, expected, atol, rtol, model_derived=run.model_derived,
                                        classifier=is_classifier(spec["shape"], input_elements)))


def _cmsis_nn_rounding_hints(models: list[ModelRun], record: dict) -> list[str]:
    """A CMSIS-NN model held bit for bit to TVM's own outputs: its kernels round some requantisations
    differently (1 LSB on kws and vww, 2 on ad), so a near miss is said to be that, with what to pass."""
    calls = {m.get("name") for m in (record.get("library") or {}).get("modules", []) if m.get("cmsis_nn")}
    hints = []
    for model in models:
        near = [c for c in model.comparisons if not c.ok and c.integer and c.max_abs_error <= 2]
        if model.name in calls and near and not model.model_derived and not model.firmware_vs_mlf:
            hints.append(f"model {model.name} calls CMSIS-NN, whose kernels round some requantisations differently "
                         f"from TVM's reference (max |diff| {max(c.max_abs_error for c in near):g} LSB here; see "
                         "docs/cmsis-nn.md): pass --atol 2 to allow that, or --reference host to check the firmware "
                         "exactly against its own MLF")
    return hints


def _stack_overflow_warnings(models: list[ModelRun], reserve: int | None) -> list[str]:
    """The painted stack measures at most its reserve: a peak that reaches it means the stack went
    further, over whatever RAM lies below it."""
    if not reserve:
        return []
    return [f"model {m.name}: the stack peak reached the whole .stack reserve ({reserve:,} B): the stack may have "
            "overflowed into other RAM, and this run's results cannot be trusted (rebuild with a larger "
            "--stack-bytes, or without it)" for m in models if m.stack_peak is not None and m.stack_peak >= reserve]


def _stale_firmware_hint(record: dict) -> str:
    """A firmware built from other templates may speak another protocol version: say so."""
    if record.get("templates") in (None, templates_hash()):
        return ""
    return " (this firmware was built by another version of mlfbuild's templates: rebuild it with mlfbuild build)"


# QEMU's fatal errors that the guest causes: a fault the core cannot escalate to HardFault (ARMv7-M
# ARM B1.5.15: the core locks up; QEMU aborts instead), code fetched from where no memory is.
_FIRMWARE_FATAL = ("Lockup:", "Trying to execute code outside RAM or ROM")


def _explain_end(error: RunError, transport: Transport, ending, console: bytes) -> RunError:
    """Say what happened to a run that stopped: a firmware fault, the emulator dying by a signal,
    the firmware exiting early, or (still running) the protocol error itself."""
    code = ending.exit_code
    if code == fault_exit_code():
        fault = next((line for line in (console.decode(errors="replace") + "\n" + ending.console).splitlines()
                      if "FAULT" in line), "fault")
        return RunError(f"the firmware crashed on {transport.describe()}: {fault.strip()}")
    said = [line.strip() for line in ending.console.splitlines() if line.strip()]
    # QEMU's cpu_abort() prints "qemu: fatal: <why>" and then the registers: the why is the story.
    fatal = next((line for line in said if line.startswith("qemu: fatal:")), None)
    if fatal and any(cause in fatal for cause in _FIRMWARE_FATAL):
        return RunError(f"the firmware locked up on {transport.describe()} (a fault it could not take, the "
                        f"emulator stopped it): {fatal[:200]}")
    last = f"; its last words: {(fatal or said[-1])[:200]}" if said else ""
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        who = "the emulator itself failed, not the firmware" if name == "SIGABRT" else "not by mlfbuild"
        return RunError(f"{transport.describe()} was killed by {name} ({who}){last}")
    if code not in (0, None) and said:  # e.g. QEMU refusing its command line
        return RunError(f"{transport.describe()} exited with status {code}: {said[-1][:200]}")
    if code not in (0, None):
        return RunError(f"the firmware exited with status {code} on {transport.describe()} before the run "
                        f"was over (while mlfbuild waited: {error})")
    return error


def _check_sample_counts(model: dict, reference: Reference | None, feed: dict[str, np.ndarray],
                         expected: list[np.ndarray] | None) -> None:
    count = len(next(iter(feed.values()))) if feed else 1
    for spec, wanted in zip(model["outputs"], expected or ()):
        if len(wanted) != count:
            raise InvalidInputError(f"{reference.path}: holds {len(wanted)} sample(s) of output '{spec['name']}', "
                                    f"the run feeds model {model['name']} {count}")


def _run_model(client: Client, model: dict, feed: dict[str, np.ndarray], reference: Reference | None, expected,
               repeat, atol, rtol, timer_hz, *, stack_measured: bool = True,
               progress: Progress | None = None) -> ModelRun:
    index = model["index"]
    count = len(next(iter(feed.values()))) if feed else 1
    ticks, workspace, stack = [], 0, 0
    outputs: dict[str, list[np.ndarray]] = {spec["name"]: [] for spec in model["outputs"]}
    total, done = count * max(repeat, 1), 0
    for sample in range(count):
        for i, spec in enumerate(model["inputs"]):
            value = feed[spec["name"]][sample]
            client.write_input(index, i, np.ascontiguousarray(value).astype(value.dtype.newbyteorder("<")).tobytes())
        for _ in range(max(repeat, 1)):
            reply = client.run(index)
            if reply.status != 0:
                said = f": {reply.message}" if reply.message else " (an operator failed; a workspace too small shows this way)"
                raise RunError(f"model {model['name']} returned status {reply.status}{said}")
            ticks.append(reply.ticks)
            workspace, stack = max(workspace, reply.workspace_peak), max(stack, reply.stack_peak)
            done += 1
            if progress:
                progress(model["name"], done, total)
        for i, spec in enumerate(model["outputs"]):
            raw = client.read_output(index, i, spec["size_bytes"])
            dtype = np.dtype(spec["dtype"]).newbyteorder("<")
            outputs[spec["name"]].append(np.frombuffer(raw, dtype=dtype).reshape(spec["shape"]))
    stacked = {name: np.stack(values) for name, values in outputs.items()}
    run = ModelRun(name=model["name"], ticks=ticks, timer_hz=timer_hz, workspace_peak=workspace,
                   stack_peak=stack if stack_measured else None,
                   outputs={name: values[-1] for name, values in stacked.items()}, all_outputs=stacked, samples=count,
                   reference=reference.path if reference else None,
                   reference_kind=reference.kind if reference else None,
                   model_derived=bool(reference and reference.model_derived and not _compiled_exactly(reference, model)),
                   quantization=reference.quantization_of(model) if reference else {},
                   producer=producer_of(model))
    input_elements = sum(int(np.prod(spec["shape"], dtype=np.int64)) for spec in model["inputs"])
    for spec, wanted in zip(model["outputs"], expected or ()):
        run.comparisons.append(compare(spec["name"], stacked[spec["name"]], wanted, atol, rtol,
                                       model_derived=run.model_derived,
                                       classifier=is_classifier(spec["shape"], input_elements)))
    return run


def producer_of(model: dict) -> str:
    """What made the model's MLF, as a verdict names it: mlfbuild's importer or TVM."""
    imported = model.get("imported_from")
    return f"{imported.get('tool', 'mlfbuild')}'s importer" if imported else "TVM"


def run_app_build(build_dir: Path, *, timeout: float = 60.0, port: str | None = None, baud: int = 115200,
                  echo=None):
    """Run a build of the user's application (build --app): its console streamed to `echo`, its exit
    status the verdict (run/app.py)."""
    from .app import run_app

    record = build_folder.load(build_dir).data
    transport = make_transport(build_dir, record, port=port, baud=baud)
    return run_app(transport, target=str(build_dir), board=record["board"]["name"], timeout=timeout, echo=echo)
