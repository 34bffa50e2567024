"""The firmware's host twin: the same MLF, the same sources and memory plan, compiled natively and run
on the same samples (`run --reference host`).

It needs neither TVM nor LiteRT, and it answers one question exactly: does the firmware compute what
its MLF computes? A difference is the firmware's (toolchain, board, runtime, a damaged image), never
the model's, so it is always a failure, whatever tolerance the user gave. CMSIS-NN calls run through
the library's generic C on the host (the paths are bit-exact with the DSP and MVE ones on the
fixtures measured in docs/references.md).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .references import HOST

TWIN_FOLDER = "host-twin"  # under the build folder: the twin's own build
TWIN_MLF = "mlf.tar"  # where a firmware without its unpacked mlf/ (a matrix worker's) finds its MLF


def twin_source(build_dir: Path) -> Path | None:
    """The MLF a build was made from, where the build folder still has it (a matrix worker's has it
    only when a job's reference is the host twin)."""
    unpacked = build_dir / "mlf"
    if unpacked.is_dir():
        return unpacked
    packed = build_dir / TWIN_MLF
    return packed if packed.is_file() else None


def build_twin(build_dir: Path, record: dict) -> Path:
    """Build the twin (incrementally, in BUILD/host-twin) from the firmware's MLF and options; its folder."""
    from ..build import build

    source = twin_source(Path(build_dir))
    twin = build(source if source is not None else Path(build_dir) / TWIN_MLF, HOST, Path(build_dir) / TWIN_FOLDER,
                 options=_options(record))
    return twin.outdir


def save_feeds(feeds: dict[str, dict[str, np.ndarray]], folder: Path) -> Path:
    """The firmware's inputs, every model's, as the twin's --input file (keys MODEL/NAME)."""
    inputs = folder / "inputs.npz"
    np.savez(inputs, **{f"{model}/{name}": value for model, values in feeds.items() for name, value in values.items()})
    return inputs


def twin_outputs(result, record: dict) -> dict[str, list[np.ndarray]]:
    """The twin's run (a RunResult) as each model's outputs, every sample, in the firmware's output order."""
    by_model = {run.name: run for run in result.models}
    return {m["name"]: [by_model[m["name"]].all_outputs[spec["name"]] for spec in m["outputs"]]
            for m in record["models"]}


def _options(record: dict):
    """The firmware's own build options, as far as they apply on the host: the optimisation level, the
    runtime, and the CMSIS-NN tree (compiled there through its generic C)."""
    from ..project import ProjectOptions

    cmsis_nn = record.get("cmsis_nn") or {}
    flags = [flag for flag in record.get("flags", {}).get("cflags", []) if flag.startswith("-O")]
    return ProjectOptions(runtime=record.get("runtime", "builtin"), optimize=flags[0] if flags else "-Os",
                          cmsis_nn=Path(cmsis_nn["path"]) if cmsis_nn.get("path") else None,
                          cmsis_core=Path(cmsis_nn["cmsis_core"]["path"]) if cmsis_nn.get("cmsis_core") else None)
