"""Run a .tflite model with LiteRT (`ai-edge-litert`, the extra `mlfbuild[reference]`) on the host.

LiteRT runs in a child process: its loader and kernels are native code that can crash or hang on a
hostile model, and neither may take mlfbuild down with it. The child reads the inputs (.npz, one
array per graph input with a leading sample axis), runs every sample and writes `output_0..N` the
same way; the parent gives it a deadline and turns every way it can end into one line.

`kernels="reference"` runs LiteRT's reference kernels (its BuiltinRefOpResolver, no delegates): the
plain statement of each operator's semantics, slower than the default optimized kernels.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from ..errors import BuildError, InvalidInputError, RunError

EXTRA_HINT = "install it with `pip install 'mlfbuild[reference]'` (or `pip install ai-edge-litert`)"
_NOT_INSTALLED, _REFUSED = 10, 11  # the child's exit codes besides 0
DEFAULT_TIMEOUT = 300.0
KERNELS = ("optimized", "reference")


def run_model(model: Path, inputs: dict[str, np.ndarray], timeout: float = DEFAULT_TIMEOUT,
              kernels: str = "optimized") -> list[np.ndarray]:
    """Every output of `model` for every sample of `inputs` (name → [samples, *shape]), in graph order,
    computed by LiteRT's `kernels` (one of KERNELS)."""
    if kernels not in KERNELS:
        raise ValueError(f"kernels must be one of {KERNELS}, not {kernels!r}")
    with tempfile.TemporaryDirectory(prefix="mlfbuild-litert-") as work:
        np.savez(Path(work) / "inputs.npz", **inputs)
        child = subprocess.Popen([sys.executable, "-m", "mlfbuild.reference.litert", str(Path(model).resolve()), work,
                                  kernels],
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                 start_new_session=True)
        try:
            _, err = child.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.communicate()
            raise RunError(f"{model}: LiteRT did not finish within {timeout:.0f} s") from None
        said = _last_line(err)
        if child.returncode == _NOT_INSTALLED:
            raise BuildError(f"LiteRT is not installed, needed to run {model}: {EXTRA_HINT}")
        if child.returncode == _REFUSED:
            raise InvalidInputError(f"{model}: LiteRT cannot run this model ({said})")
        if child.returncode < 0:
            raise InvalidInputError(f"{model}: LiteRT crashed on this model "
                                    f"({signal.Signals(-child.returncode).name})")
        if child.returncode != 0:
            raise InvalidInputError(f"{model}: LiteRT failed on this model (status {child.returncode}: {said})")
        with np.load(Path(work) / "outputs.npz", allow_pickle=False) as data:
            return [data[f"output_{i}"] for i in range(len(data.files))]


def cannot_run(model: Path, timeout: float = 60.0) -> str | None:
    """Why LiteRT's reference kernels refuse to load `model` (it holds what they reject, such as
    person_detect's bias quantized along dimension 3), or None when they load it."""
    from .tflite import read_tflite

    empty = {t.name: np.zeros((0, *t.shape), dtype=t.dtype) for t in read_tflite(Path(model)).inputs}
    try:
        run_model(Path(model), empty, timeout=timeout, kernels="reference")
    except InvalidInputError as refused:
        why = str(refused).removeprefix(f"{model}: ")
        return why if len(why) <= 160 else f"{why[:160]}…"
    return None


def _last_line(err: bytes) -> str:
    lines = [line for line in err.decode(errors="replace").splitlines() if line.strip() and "INFO:" not in line]
    return lines[-1].strip()[:300] if lines else "no message"


def _child(model: str, work: Path, kernels: str) -> int:
    try:
        from ai_edge_litert.interpreter import Interpreter, OpResolverType
    except ImportError as exc:
        print(exc, file=sys.stderr)
        return _NOT_INSTALLED
    resolver = OpResolverType.BUILTIN_REF if kernels == "reference" else OpResolverType.AUTO
    try:
        interpreter = Interpreter(model_path=model, experimental_op_resolver_type=resolver)
        interpreter.allocate_tensors()
        inputs, outputs = interpreter.get_input_details(), interpreter.get_output_details()
        with np.load(work / "inputs.npz", allow_pickle=False) as data:
            # a nameless tensor is named as mlfbuild's readers name it, by its index
            samples = [data[detail["name"] or f"tensor{detail['index']}"] for detail in inputs]
        results: list[list[np.ndarray]] = [[] for _ in outputs]
        for index in range(len(samples[0])):
            for detail, values in zip(inputs, samples):
                interpreter.set_tensor(detail["index"], values[index].reshape(detail["shape"]))
            interpreter.invoke()
            for result, detail in zip(results, outputs):
                result.append(interpreter.get_tensor(detail["index"]).copy())
    except (ValueError, RuntimeError, KeyError) as exc:
        print(str(exc).replace("\n", " "), file=sys.stderr)
        return _REFUSED
    np.savez(work / "outputs.npz", **{f"output_{i}": np.stack(r) for i, r in enumerate(results) if r})
    return 0


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1], Path(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else "optimized"))
