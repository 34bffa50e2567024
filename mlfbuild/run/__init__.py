"""`mlfbuild run` as a library call: a build folder + a transport + tensors → outputs and metrics.

Knows how to talk to the firmware and compare numbers; does not know how the build was made
(it reads build.json for the model table and the board).
"""

from __future__ import annotations

import signal
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
from ..suggest import did_you_mean
from ..units import tolerance
from .compare import Comparison, compare
from ..project.runtime import fault_exit_code
from .profile import Profile, profiled_transport, with_profile
from .tensorfile import load_tensors
from .transports import HostTransport, QemuTransport, SerialTransport, Transport


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

    @property
    def latency_ms(self) -> float:
        """The last inference's time in milliseconds (of the firmware's timer)."""
        return 1000.0 * self.ticks[-1] / self.timer_hz if self.ticks and self.timer_hz else 0.0

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
        if any(not c.ok for c in self.comparisons):
            return MISMATCH
        return NOT_CHECKED if self.unchecked else MATCH

    def to_json(self) -> dict:
        return {"name": self.name, "ticks": self.ticks, "timer_hz": self.timer_hz, "latency_ms": self.latency_ms,
                "inferences_per_second": self.inferences_per_second,
                "workspace_peak": self.workspace_peak, "stack_peak": self.stack_peak,
                "reference": self.reference, "status": self.status, "unchecked": self.unchecked,
                "outputs": [c.to_json() for c in self.comparisons]}


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

    def to_json(self) -> dict:
        document = {"schema": RUN_SCHEMA, "target": self.target, "board": self.board, "exit_code": self.exit_code,
                    "seconds": self.seconds, "status": self.status, "unchecked": self.unchecked,
                    "models": [m.to_json() for m in self.models],
                    "console": {"resends": self.resends, "damaged_frames": self.damaged}}
        return with_profile(document, self.profile) if self.profile is not None else document


def make_transport(build_dir: Path, record: dict, *, port: str | None = None, baud: int = 115200,
                   icount_shift: int = 0) -> Transport:
    board = record["board"]
    elf = build_dir / "firmware.elf"
    if port:
        return SerialTransport(port, baud)
    if board["kind"] == "host":
        return HostTransport(elf)
    if board.get("qemu"):
        return QemuTransport(elf, board["qemu"]["machine"], icount_shift=icount_shift,
                             extra_args=tuple(board["qemu"].get("extra_args", ())))
    raise InvalidInputError(f"board {board['name']} is real hardware: flash it (mlfbuild flash) and run with --port")


def _pick(tensors: dict[str, np.ndarray], model: dict, spec: dict, single: bool) -> np.ndarray | None:
    for key in (f"{model['name']}/{spec['name']}", spec["name"], spec["c_name"]):
        if key in tensors:
            return tensors[key]
    if "" in tensors and single:
        return tensors[""]
    return None


def _as_input(value: np.ndarray, spec: dict, source: str) -> bytes:
    dtype = np.dtype(spec["dtype"] if spec["dtype"] != "bool" else "bool")
    if value.size * dtype.itemsize != spec["size_bytes"]:
        raise InvalidInputError(f"{source}: input '{spec['name']}' has {value.size} elements of {value.dtype}, "
                                f"the model expects shape {spec['shape']} of {spec['dtype']}")
    return np.ascontiguousarray(value.astype(dtype, copy=False)).astype(dtype.newbyteorder("<")).tobytes()


def _random_input(spec: dict, rng: np.random.Generator) -> bytes:
    dtype = np.dtype(spec["dtype"])
    shape = tuple(spec["shape"])
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        value = rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    elif dtype == np.bool_:
        value = rng.integers(0, 2, size=shape).astype(bool)
    else:
        value = rng.standard_normal(shape).astype(dtype)
    return value.astype(dtype.newbyteorder("<")).tobytes()


def _references(references: list[str], models: list[dict]) -> dict[str, tuple[str, dict[str, np.ndarray]]]:
    """`--reference PATH` (every model whose inputs it names) or `--reference MODEL=PATH`."""
    chosen: dict[str, tuple[str, dict[str, np.ndarray]]] = {}
    names = [m["name"] for m in models]
    for item in references:
        name, _, path = item.rpartition("=") if "=" in item and not Path(item).exists() else ("", "", item)
        if name and name not in names:
            raise InvalidInputError(f"--reference {item}: this firmware has no model '{name}'"
                                    f"{did_you_mean(name, names)}; its models: {', '.join(names)}")
        tensors = load_tensors(Path(path))
        targets = [m for m in models if (m["name"] == name if name else
                   all(_pick(tensors, m, s, len(m["inputs"]) == 1) is not None for s in m["inputs"]))]
        if not targets:
            raise InvalidInputError(f"{path}: its inputs match no model of this firmware "
                                    f"(models: {', '.join(names)}; use MODEL=PATH)")
        for model in targets:
            chosen[model["name"]] = (path, tensors)
    return chosen


def _expected(tensors: dict[str, np.ndarray], model: dict, index: int, spec: dict, path: str) -> np.ndarray:
    for key in (f"output_{index}", f"{model['name']}/output_{index}", spec["name"], spec["c_name"]):
        if key in tensors:
            expected = tensors[key]
            if expected.size != int(np.prod(spec["shape"], dtype=np.int64)):
                raise InvalidInputError(f"{path}: reference '{key}' has shape {list(expected.shape)}, the model's "
                                        f"output '{spec['name']}' has shape {spec['shape']}")
            return expected
    raise InvalidInputError(f"{path}: no reference for output {index} ('{spec['name']}'); "
                            f"expected key output_{index} or {spec['name']}")


def _expected_outputs(reference: tuple[str, dict[str, np.ndarray]], model: dict) -> list[np.ndarray]:
    """The reference tensor of every output of `model`, checked: one per output, of its size, and no
    more outputs than the model has (a reference with more was made for another model)."""
    path, tensors = reference
    count = len(model["outputs"])
    for key in tensors:
        name = key.removeprefix(f"{model['name']}/")
        if name.startswith("output_") and name[7:].isdigit() and int(name[7:]) >= count:
            raise InvalidInputError(f"{path}: reference '{key}' has no output to check: model {model['name']} "
                                    f"has {count} output(s)")
    return [_expected(tensors, model, i, spec, path) for i, spec in enumerate(model["outputs"])]


def _check_tolerances(**given: float | None) -> None:
    """Tolerances follow units.tolerance (finite, ≥ 0) whoever passes them: an infinite one passes anything."""
    for name, value in given.items():
        if value is not None:
            try:
                tolerance(value)
            except ValueError as exc:
                raise UsageError(f"--{name}: {exc}") from None


def run_build(build_dir: Path, *, port: str | None = None, baud: int = 115200, inputs: Path | None = None,
              references: list[str] = (), atol: float | None = None, rtol: float | None = None, repeat: int = 1,
              timeout: float = 60.0, seed: int = 0, icount_shift: int = 0,
              transport: Transport | None = None, progress: Progress | None = None,
              profile: bool = False) -> RunResult:
    """Run every model `repeat` times and compare its outputs; `progress(model, done, total)` is
    called after each inference. With `profile`, count instructions per operator (QEMU) into
    `result.profile` (which says why, where there are none)."""
    _check_tolerances(atol=atol, rtol=rtol)
    record = build_folder.load(build_dir).data
    models = record["models"]
    given = load_tensors(inputs)
    refs = _references(list(references), models)
    # Every reference is checked against its model before anything starts.
    expected = {m["name"]: _expected_outputs(refs[m["name"]], m) for m in models if m["name"] in refs}
    rng = np.random.default_rng(seed)
    finish_profile = None
    if profile:
        transport, finish_profile = profiled_transport(build_dir, port=port, baud=baud)
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
            results.append(_run_model(client, model, given, refs.get(model["name"]), expected.get(model["name"]),
                                      rng, repeat, atol, rtol, hello.timer_hz, inputs,
                                      stack_measured=record["board"]["kind"] != "host", progress=progress))
        if transport.boots_fresh:  # a flashed board keeps serving: the next run finds it ready
            client.quit(0)
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
                       resends=client.resends, damaged=client.damaged)
    if finish_profile is not None:
        result.profile = finish_profile(result)
    result.warnings += _stack_overflow_warnings(results, (record.get("stack") or {}).get("reserve"))
    warning = build_folder.write_run(Path(build_dir), result.to_json())
    if warning:
        result.warnings.append(warning)
    return result


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


def _run_model(client: Client, model: dict, given, reference, expected, rng, repeat, atol, rtol, timer_hz,
               inputs_path, *, stack_measured: bool = True, progress: Progress | None = None) -> ModelRun:
    index = model["index"]
    ref_path, ref_tensors = reference if reference else (None, {})
    payloads = []
    for i, spec in enumerate(model["inputs"]):
        value = _pick(given, model, spec, len(model["inputs"]) == 1)
        source = str(inputs_path)
        if value is None and ref_tensors:
            value, source = _pick(ref_tensors, model, spec, len(model["inputs"]) == 1), str(ref_path)
        payloads.append(_as_input(value, spec, source) if value is not None else _random_input(spec, rng))
    ticks, outputs, workspace, stack = [], {}, 0, 0
    total = max(repeat, 1)
    for done in range(1, total + 1):
        for i, payload in enumerate(payloads):
            client.write_input(index, i, payload)
        reply = client.run(index)
        if reply.status != 0:
            said = f": {reply.message}" if reply.message else " (an operator failed; a workspace too small shows this way)"
            raise RunError(f"model {model['name']} returned status {reply.status}{said}")
        ticks.append(reply.ticks)
        workspace, stack = max(workspace, reply.workspace_peak), max(stack, reply.stack_peak)
        if progress:
            progress(model["name"], done, total)
    for i, spec in enumerate(model["outputs"]):
        raw = client.read_output(index, i, spec["size_bytes"])
        dtype = np.dtype(spec["dtype"]).newbyteorder("<")
        outputs[spec["name"]] = np.frombuffer(raw, dtype=dtype).reshape(spec["shape"])
    run = ModelRun(name=model["name"], ticks=ticks, timer_hz=timer_hz, workspace_peak=workspace,
                   stack_peak=stack if stack_measured else None, outputs=outputs, reference=ref_path)
    for spec, wanted in zip(model["outputs"], expected or ()):
        run.comparisons.append(compare(spec["name"], outputs[spec["name"]], wanted, atol, rtol))
    return run
