"""`mlfbuild run --profile`: instructions, estimated cycles and calls per operator function, per model, in QEMU.

A TCG plugin (templates/profile/opprofile.c, compiled with the host gcc into the build folder) counts
the instructions of every translation block QEMU executes and charges them to the firmware function
they belong to; code outside the model's own functions (runtime, libc, CMSIS-NN) is charged to the
operator that called it. The function map comes from the ELF's symbol table: the model's executor
(its run function: the start of an inference), the functions of the model's generated code
(operators), and main.c's (the application: an inference is over).

Cycles are an estimate, not a measurement: the plugin classifies every instruction (Thumb-2 decoding,
templates/profile/thumbcost.c) and adds up each class's cost from the core's documented timings
(docs/benchmarks.md, "Cycle estimate"). Cores without a model (M0, M3, M7, M33) get none. With
`cycles_for`, a real board's flash read path (its [flash_timing]: wait states behind the flash
accelerator's caches, templates/profile/flashcost.c) is added, as if the firmware ran from that chip's flash.

On a flashed board or the host there are no instruction counts: the profile says so.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from elftools.elf.elffile import ELFFile

from ..boards import FlashTiming, MemoryRegion, list_boards, load_board
from ..errors import RunError
from ..resources import data_dir

PLUGIN_SOURCE = ("profile", "opprofile.c")
PLUGIN_INCLUDES = (("profile", "thumbcost.c"), ("profile", "flashcost.c"))

# The board's core -> (the plugin's cycle model, its label). A core not here gets no cycle estimate:
# the M4's table would be wrong for the M0's 2-stage pipeline, the M7's dual issue and the M33's
# different load timings, and a wrong figure with a plausible label is worse than none.
CYCLE_MODELS = {
    "cortex-m4": ("m4", "Cortex-M4 TRM timings"),
    "cortex-m4f": ("m4", "Cortex-M4 TRM timings"),
    "cortex-m55": ("m55", "Cortex-M55: M4 scalar timings, MVE dual-beat"),
}
PLUGIN_COMPILE_SECONDS = 120


@dataclass
class ProfileRow:
    function: str
    calls: int  # per inference
    instructions: int  # per inference, including what the function calls outside the model's code
    share: float  # of the inference's instructions
    cycles: int | None = None  # estimated, per inference, with what it calls (None: no model for this core)
    folded_into: str | None = None  # the twin the compiler folded this function into (its work is counted there)
    folded: list[str] = field(default_factory=list)  # functions folded into this one (their work is counted here)

    def to_json(self) -> dict:
        return {"function": self.function, "calls": self.calls, "instructions": self.instructions,
                "cycles": self.cycles, "share": round(self.share, 6), "folded_into": self.folded_into,
                "folded": self.folded}


@dataclass
class ModelProfile:
    name: str
    instructions: int | None  # per inference (None: not measured here)
    rows: list[ProfileRow] = field(default_factory=list)
    executor_instructions: int = 0  # the executor's own glue between the operators
    cycles: int | None = None  # estimated per inference (None: no model for this core)
    cycle_model: str | None = None  # the estimate's label, e.g. "Cortex-M4 TRM timings"
    executor_cycles: int = 0
    kernels: str | None = None  # an imported model's --kernels choice (None: not imported by mlfbuild)
    # With --cycles-for: the flash reads per inference the chip's caches missed, {"instruction", "data"}.
    flash_reads: dict | None = None

    def to_json(self) -> dict:
        return {"instructions": self.instructions, "cycles": self.cycles, "cycle_model": self.cycle_model,
                "kernels": self.kernels, "flash_reads": self.flash_reads,
                "profile": [row.to_json() for row in self.rows]}


@dataclass
class Profile:
    available: bool
    reason: str  # why not, when not available
    models: list[ModelProfile] = field(default_factory=list)


@dataclass(frozen=True)
class _Range:
    low: int
    high: int
    kind: str  # E executor, O operator, I application
    model: int
    name: str
    folded_into: str = ""  # a branch-only body: the compiler folded this function into that twin
    aliases: tuple[str, ...] = ()  # other names of the same code (folded onto the same address)


def unavailable(board: str, why: str) -> Profile:
    return Profile(False, f"profile not available on {board}: {why}")


def profiled_transport(build_dir: Path, *, port: str | None = None, baud: int = 115200,
                       cycles_for: str | None = None):
    """(transport, finish) for a profiled run of `build_dir`: QEMU with the plugin attached, else the
    ordinary transport and a profile that says why there is none. finish(result) → Profile.
    `cycles_for` names a board whose flash read path the cycle estimate adds (FlashTiming)."""
    from .. import record as build_folder
    from .transports import make_transport

    record = build_folder.load(Path(build_dir)).data
    chip_flash = flash_timing_of(cycles_for, record)  # checked even where no profile can be taken
    transport = make_transport(Path(build_dir), record, port=port, baud=baud)
    board = record["board"]["name"]
    if port or not hasattr(transport, "extra_args"):
        why = ("cycle counts on a board are not collected by this firmware" if port or record["board"]["kind"] != "host"
               else "instruction counts need QEMU")
        return transport, lambda result: unavailable(board, why)
    return profile_transport(Path(build_dir), record, transport, chip_flash)


@dataclass(frozen=True)
class ChipFlash:
    """A real board's flash read path, added to the estimate of firmware run in QEMU."""

    board: str
    timing: FlashTiming

    def label(self, core_label: str) -> str:
        t = self.timing
        return (f"{core_label} + {self.board} flash: {t.wait_states} wait states at {t.clock_hz / 1e6:g} MHz "
                f"behind {t.instruction_cache_lines}/{t.data_cache_lines}-line caches")


def flash_timing_of(board_name: str | None, record: dict) -> ChipFlash | None:
    """The named board's flash timing, checked against the build's core (None: no board named)."""
    if board_name is None:
        return None
    board = load_board(board_name)
    if board.flash_timing is None:
        raise RunError(f"--cycles-for {board_name}: the board file has no [flash_timing], so there is no flash "
                       f"to model (boards with one: {', '.join(_timed_boards()) or 'none'})")
    model, _ = cycle_model(record)
    theirs, _ = CYCLE_MODELS.get(board.cpu.core.lower(), (None, None))  # [flash_timing]: a hardware board, a cpu
    if model is None or theirs != model:
        built_for = ((record.get("board") or {}).get("cpu") or {}).get("core", "the host")
        twins = [b.name for b in list_boards() if b.is_emulated and b.cpu and b.cpu.core == board.cpu.core]
        raise RunError(f"--cycles-for {board_name}: the build is for {built_for}, not {board_name}'s "
                       f"{board.cpu.core}; build for {' or '.join(twins) or 'a QEMU board with that core'}")
    return ChipFlash(board.name, board.flash_timing)


def _timed_boards() -> list[str]:
    return [b.name for b in list_boards() if b.flash_timing is not None]


def with_profile(run_json: dict, profile: Profile) -> dict:
    """`run --json` with each model's `instructions` and `profile` rows (null and [] where not measured)."""
    by_name = {m.name: m for m in profile.models}
    for model in run_json.get("models", []):
        measured = by_name.get(model["name"])
        model["instructions"] = measured.instructions if measured else None
        model["cycles"] = measured.cycles if measured else None
        model["cycle_model"] = measured.cycle_model if measured else None
        model["flash_reads"] = measured.flash_reads if measured else None
        model["profile"] = [row.to_json() for row in measured.rows] if measured else []
    if not profile.available:
        run_json["profile_note"] = profile.reason
    return run_json


def profile_transport(build_dir: Path, record: dict, transport, chip_flash: ChipFlash | None = None):
    """Attach the plugin to a QEMU transport; returns (transport, finish) where finish(result) reads
    the counts after the run (a Profile)."""
    workdir = Path(build_dir) / "profile"
    workdir.mkdir(exist_ok=True)
    library = _compile_plugin(workdir)
    ranges = function_ranges(Path(build_dir), record)
    if not any(r.kind == "E" for r in ranges):
        raise RunError(f"{build_dir}: no model run function in firmware.elf to profile")
    ranges_path, out_path = workdir / "ranges.txt", workdir / "counts.txt"
    ranges_path.write_text("".join(f"{r.low:x} {r.high:x} {r.kind} {r.model}\n" for r in ranges))
    out_path.unlink(missing_ok=True)
    model, _ = cycle_model(record)
    flash = ""
    if chip_flash is not None:
        region = record["board"]["memory"]["flash"]
        flash = ",flash=" + chip_flash.timing.plugin_spec(MemoryRegion(region["origin"], region["length"]))
    transport.extra_args = tuple(transport.extra_args) + (
        "-plugin", f"{library},ranges={ranges_path},out={out_path},model={model or 'none'}{flash}")

    def finish(result) -> Profile:
        return read_counts(out_path, ranges, record, {m.name: len(m.ticks) for m in result.models}, chip_flash)

    return transport, finish


def cycle_model(record: dict) -> tuple[str | None, str | None]:
    """(the plugin's model name, its label) for the build's core; (None, None) where there is none."""
    core = str(((record.get("board") or {}).get("cpu") or {}).get("core", "")).lower()
    return CYCLE_MODELS.get(core, (None, None))


def _compile_plugin(workdir: Path) -> Path:
    templates = data_dir("templates")
    source = templates.joinpath(*PLUGIN_SOURCE)
    library = workdir / "libopprofile.so"
    newest = max(templates.joinpath(*part).stat().st_mtime for part in (PLUGIN_SOURCE, *PLUGIN_INCLUDES))
    if library.is_file() and library.stat().st_mtime >= newest:
        return library
    if shutil.which("gcc") is None:
        raise RunError("--profile needs the host gcc to compile its QEMU plugin (Debian package gcc)")
    try:
        done = subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", str(library), str(source)],
                              capture_output=True, text=True, errors="replace", stdin=subprocess.DEVNULL,
                              timeout=PLUGIN_COMPILE_SECONDS)
    except OSError as exc:
        raise RunError(f"could not run the host gcc to compile the profiling plugin: {exc.strerror or exc}") from None
    except subprocess.TimeoutExpired:
        raise RunError(f"the host gcc did not compile the profiling plugin {source} within "
                       f"{PLUGIN_COMPILE_SECONDS} s") from None
    if done.returncode != 0:
        raise RunError(f"could not compile the profiling plugin {source}: {_first_error(done)}")
    return library


def _first_error(done: subprocess.CompletedProcess) -> str:
    """The compiler's first error line (the last is only 'compilation terminated.')."""
    lines = [line.strip() for line in f"{done.stderr}\n{done.stdout}".splitlines() if line.strip()]
    line = next((line for line in lines if "error" in line.lower()), lines[0] if lines else None)
    return line[:300] if line else f"gcc exited with status {done.returncode} and said nothing"


def function_ranges(build_dir: Path, record: dict) -> list[_Range]:
    """Every sized function of firmware.elf with its role, sorted and disjoint."""
    models = [m["name"] for m in record["models"]]
    objects = build_dir / "project" / "build"
    app = _defined_functions(objects / "src" / "main.o")
    model_code = set()
    for obj in sorted((objects / "model").rglob("*.o")) + sorted((build_dir / "project" / "model").rglob("*.o")):
        model_code |= _defined_functions(obj)
    executors = {}
    for index, name in enumerate(models):
        for pattern in (rf"tvmgen_{re.escape(name)}_run(_model|_tvm|_packed)?",
                        rf"tvmgen_{re.escape(name)}___tvm_main__"):
            executors[pattern] = index
    found: dict[int, _Range] = {}
    aliases: dict[int, list[str]] = {}
    with open(build_dir / "firmware.elf", "rb") as stream:
        elf = ELFFile(stream)
        symtab = elf.get_section_by_name(".symtab")
        for symbol in symtab.iter_symbols() if symtab else ():
            if symbol["st_info"]["type"] != "STT_FUNC" or not symbol["st_size"]:
                continue
            low = symbol["st_value"] & ~1
            kind, model = _role(symbol.name, executors, model_code, app)
            if not kind:
                continue
            if low in found:  # identical code folded onto one address: one range, several names
                aliases.setdefault(low, []).append(symbol.name)
                continue
            found[low] = _Range(low, low + symbol["st_size"], kind, model, symbol.name)
        starts = {r.low: r.name for r in found.values() if r.kind == "O"}
        ranges = []
        for low, r in sorted(found.items()):
            twin = starts.get(_branch_target(elf, low, r.high - low)) if r.kind == "O" else None
            ranges.append(dataclasses.replace(r, folded_into=twin or "", aliases=tuple(sorted(aliases.get(low, ())))))
    return ranges


def _branch_target(elf: ELFFile, address: int, size: int) -> int | None:
    """Where a function whose whole body is one Thumb branch (B, or B.W) jumps — gcc's identical code
    folding (-fipa-icf) leaves such a body where it cannot make the twin an alias. ARMv7-M ARM A7.7.12:
    T2 `11100 imm11` jumps to PC+4+imm11*2; T4 `11110 S imm10`, `10 J1 1 J2 imm11` to
    PC+4+SignExtend(S:I1:I2:imm10:imm11:0) with I1 = NOT(J1 XOR S), I2 = NOT(J2 XOR S)."""
    code = _read(elf, address, size) if size in (2, 4) else None
    return thumb_branch_target(code, address) if code else None


def thumb_branch_target(code: bytes, address: int) -> int | None:
    """The target of the one Thumb B / B.W instruction `code` holds at `address` (None: not one)."""
    size = len(code)
    first = int.from_bytes(code[:2], "little")
    if size == 2 and first >> 11 == 0b11100:
        offset = (first & 0x7FF) << 1
        return address + 4 + (offset - (1 << 12) if offset & (1 << 11) else offset)
    if size == 4 and first >> 11 == 0b11110:
        second = int.from_bytes(code[2:], "little")
        if second & 0xD000 != 0x9000:
            return None
        s_bit, j1, j2 = (first >> 10) & 1, (second >> 13) & 1, (second >> 11) & 1
        i1, i2 = 1 - (j1 ^ s_bit), 1 - (j2 ^ s_bit)
        offset = (s_bit << 24) | (i1 << 23) | (i2 << 22) | ((first & 0x3FF) << 12) | ((second & 0x7FF) << 1)
        return address + 4 + (offset - (1 << 25) if s_bit else offset)
    return None


def _read(elf: ELFFile, address: int, size: int) -> bytes | None:
    for section in elf.iter_sections():
        start = section["sh_addr"]
        if section["sh_type"] == "SHT_PROGBITS" and start <= address and address + size <= start + section["sh_size"]:
            return section.data()[address - start:address - start + size]
    return None


def _role(name: str, executors: dict[str, int], model_code: set[str], app: set[str]) -> tuple[str, int]:
    for pattern, index in executors.items():
        if re.fullmatch(pattern, name):
            return "E", index
    if name in model_code:
        return "O", 0
    if name in app:
        return "I", 0
    return "", 0


def _defined_functions(path: Path) -> set[str]:
    if not path.is_file():
        return set()
    with open(path, "rb") as stream:
        symtab = ELFFile(stream).get_section_by_name(".symtab")
        return {s.name for s in (symtab.iter_symbols() if symtab else ())
                if s["st_info"]["type"] == "STT_FUNC" and s["st_shndx"] != "SHN_UNDEF"}


def imported_kernels(model: dict) -> str | None:
    """An imported model's layer kernels (`mlfbuild import --kernels`; MLFs from before the option: cmsis-nn)."""
    imported = model.get("imported_from")
    return imported.get("kernels", "cmsis-nn") if imported else None


def read_counts(path: Path, ranges: list[_Range], record: dict, runs: dict[str, int],
                chip_flash: ChipFlash | None = None) -> Profile:
    if not path.is_file():
        raise RunError("the profiling plugin wrote no counts (did QEMU exit normally?)")
    counts, model_totals, model_cycles, flash_reads = {}, {}, {}, {}
    for line in path.read_text().splitlines():
        parts = line.split()
        if parts[0] == "model":
            model_totals[int(parts[1])], model_cycles[int(parts[1])] = int(parts[3]), int(parts[4])
        elif parts[0] == "flash":
            flash_reads[int(parts[1])] = {"instruction": int(parts[2]), "data": int(parts[3])}
        else:
            counts[int(parts[0])] = (int(parts[1]), int(parts[2]), int(parts[3]), int(parts[4]))
    _, label = cycle_model(record)
    if label and chip_flash is not None:
        label = chip_flash.label(label)
    profile = Profile(True, "")
    for index, model in enumerate(record["models"]):
        n = max(runs.get(model["name"], 1), 1)
        total = model_totals.get(index, 0) // n
        mine = _model_functions(ranges, counts, index)
        result = ModelProfile(model["name"], total, cycles=model_cycles.get(index, 0) // n if label else None,
                              cycle_model=label, kernels=imported_kernels(model),
                              flash_reads=_per_inference(flash_reads.get(index), n))
        for i in sorted(mine, key=lambda i: counts[i][2]):
            calls, insns, _, cycles = counts[i]
            if ranges[i].kind == "E":
                result.executor_instructions += insns // n
                result.executor_cycles += cycles // n
                continue
            result.rows.append(ProfileRow(ranges[i].name, calls // n, insns // n, (insns / n) / total if total else 0.0,
                                          cycles=cycles // n if label else None,
                                          folded_into=ranges[i].folded_into or None, folded=list(ranges[i].aliases)))
        _name_twins(result.rows)
        profile.models.append(result)
    return profile


def _per_inference(reads: dict | None, n: int) -> dict | None:
    return {kind: count // n for kind, count in reads.items()} if reads is not None else None


def _name_twins(rows: list[ProfileRow]) -> None:
    """Each function that others were folded into names them: its calls and instructions include theirs."""
    by_name = {row.function: row for row in rows}
    for row in rows:
        if row.folded_into in by_name:
            by_name[row.folded_into].folded.append(row.function)


def _model_functions(ranges: list[_Range], counts: dict, model: int) -> list[int]:
    """Ranges this model ran: its executors and the operators called in its inferences (an operator
    shared by two models in one firmware is charged to whichever ran it)."""
    chosen = []
    for i, r in enumerate(ranges):
        calls = counts.get(i, (0, 0, 0, 0))[0]
        if r.kind == "E" and r.model == model and calls:
            chosen.append(i)
        elif r.kind == "O" and calls and model == _owner(r.name, ranges, model):
            chosen.append(i)
    return chosen


def _owner(name: str, ranges: list[_Range], default: int) -> int:
    """The model an operator belongs to by TVM's name prefix (tvmgen_<model>_...); else `default`."""
    executors = {r.name: r.model for r in ranges if r.kind == "E"}
    for executor, model in executors.items():
        prefix = re.match(r"(?:mlf|tvmgen)_(.+?)_(?:run|_)", executor)
        if prefix and name.startswith(f"tvmgen_{prefix.group(1)}_"):
            return model
    return default


def _cycles_cell(cycles: int | None, estimated: bool) -> str:
    return f" {cycles:>14,}" if estimated and cycles is not None else (f" {'':>14}" if estimated else "")


def _row_line(row: ProfileRow, estimated: bool) -> str:
    if row.folded_into:
        return (f"  {row.calls:>6} {'—':>14}{_cycles_cell(None, estimated)} {'':>7}  {row.function}: folded into "
                f"{row.folded_into} by the compiler (identical code; its work is counted there)")
    twins = f"  (with {', '.join(row.folded)}: identical code folded into this one)" if row.folded else ""
    return (f"  {row.calls:>6} {row.instructions:>14,}{_cycles_cell(row.cycles, estimated)} {100 * row.share:>6.2f}%  "
            f"{row.function}{twins}")


def format_profile(profile: Profile) -> str:
    if not profile.available:
        return profile.reason
    lines = []
    for model in profile.models:
        estimated = model.cycles is not None
        estimate = (f", {model.cycles:,} cycles (estimate: {model.cycle_model})" if estimated
                    else ", no cycle estimate for this core")
        kernels = f", {model.kernels} kernels" if model.kernels else ""
        lines.append(f"profile of {model.name}: {model.instructions:,} instructions per inference (QEMU){estimate}"
                     f"{kernels}")
        header = f" {'cycles (est.)':>14}" if estimated else ""
        lines.append(f"  {'calls':>6} {'instructions':>14}{header} {'share':>7}  function")
        for row in model.rows:
            lines.append(_row_line(row, estimated))
        covered = sum(r.instructions for r in model.rows)
        if model.instructions:
            lines.append(f"  {'':>6} {model.executor_instructions:>14,}{_cycles_cell(model.executor_cycles, estimated)} "
                         f"{100 * model.executor_instructions / model.instructions:>6.2f}%  (executor between operators)")
            lines.append(f"  operators: {100 * covered / model.instructions:.2f} % of the inference")
            if estimated and model.instructions:
                lines.append(f"  cycles per instruction (estimate): {model.cycles / model.instructions:.2f}")
        if model.flash_reads is not None:
            lines.append(f"  flash reads the chip's caches missed, per inference: "
                         f"{model.flash_reads['instruction']:,} of instructions, {model.flash_reads['data']:,} of data")
    return "\n".join(lines)
