"""SOFTMAX's kinds (lowering/softmax.py) and the int16 requantizations after it (QUANTIZE int16 → int8 /
int32 of any zero point) in the cases random draws rarely reach — betas, scales that flatten or
saturate the exps, long rows, ranks 1 to 4, sums of exps where CMSIS-NN's arm_softmax_s16 would part
from TFLite, the tail of TFLM's keyword_scrambled — compared bit for bit with LiteRT's reference
kernels; and what stays refused, in one line."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tflitecases  # noqa: F401 - registers the cases
from conftest import cli
from test_import_operators import _assert_refused, check_against_litert
from tflitecases.softmax import add_softmax_int16
from tflitewriter import Draw, GraphBuilder, bundle_model, chain_model

from mlfbuild.importer import quantization as q
from mlfbuild.importer.lowering.softmax import softmax_int16_tables
from mlfbuild.reference import litert

KINDS = ("SOFTMAX", "SOFTMAX/int8_int16", "SOFTMAX/int16", "QUANTIZE/int16_to_int32")

# int16 inputs get input_scale / 256
_RARE = [
    *[("SOFTMAX/int16", {"beta": beta, "input_shape": (2, 40)}) for beta in (0.25, 1.0, 4.0)],
    ("SOFTMAX/int16", {"input_scale": 1e-5, "input_shape": (3, 16)}),  # every exp about 1: a flat row
    ("SOFTMAX/int16", {"input_scale": 2.0, "input_shape": (2, 50)}),  # most exps below e^-10: one-hot
    ("SOFTMAX/int16", {"input_scale": 1024.0, "beta": 1.0, "input_shape": (1, 30)}),  # 4 per step: the largest 16-bit rescale
    ("SOFTMAX/int16", {"input_shape": (1, 300)}),  # sums past 2^18
    ("SOFTMAX/int16", {"input_shape": (5,)}), ("SOFTMAX/int16", {"input_shape": (2, 3, 2, 7)}),
    ("SOFTMAX/int16", {"input_shape": (4, 1)}),
    ("SOFTMAX/int8_int16", {"output_scale": 1 / 65535}),  # keyword_scrambled's, within TFLite's tolerance
    *[("SOFTMAX/int8_int16", {"beta": beta, "input_shape": (2, 40)}) for beta in (0.1, 1.0, 10.0)],
    ("SOFTMAX/int8_int16", {"input_scale": 1.0, "input_zero_point": 127}),
    ("SOFTMAX/int8_int16", {"input_scale": 1e-4, "input_shape": (1, 200)}),
    ("SOFTMAX/int8_int16", {"input_shape": (3, 1)}), ("SOFTMAX/int8_int16", {"input_shape": (1, 2, 3, 5)}),
    ("QUANTIZE/int16_to_int32", {"output_scale_ratio": 1.0, "output_zero_point": 0}),
    ("QUANTIZE/int16_to_int32", {"output_scale_ratio": 1 / 4096, "output_zero_point": -5}),
    ("QUANTIZE/int16_to_int32", {"output_scale_ratio": 3000.0, "output_zero_point": 1000}),
]


@pytest.mark.cross
def test_every_softmax_case_on_the_host_equals_litert(cmsis_nn, tmp_path):
    """Several random cases of every softmax kind and of the int16 → int32 requantization."""
    model = bundle_model(np.random.default_rng(31), [kind for kind in KINDS for _ in range(4)])
    check_against_litert(model.write(tmp_path / "softmax.tflite"), "host", cmsis_nn("v6.0.0"), tmp_path / "host")


@pytest.mark.cross
def test_rare_softmax_parameters_on_the_host_equal_litert(cmsis_nn, tmp_path):
    model = bundle_model(np.random.default_rng(32), _RARE).write(tmp_path / "rare.tflite")
    check_against_litert(model, "host", cmsis_nn("v6.0.0"), tmp_path / "host", samples=6)


@pytest.mark.cross
@pytest.mark.parametrize("after", [("QUANTIZE/int16_to_int32", {"output_scale": 1 / 32768, "output_zero_point": 0}),
                                   ("QUANTIZE/int16_to_int32", {"output_scale": 1e-6}),
                                   ("QUANTIZE/int16_to_int8", {"output_dtype": "int8"})])
def test_an_int16_of_zero_point_minus_32768_requantized_equals_litert(after, cmsis_nn, tmp_path):
    """keyword_scrambled's tail: an int8 → int16 softmax (zero point -32768) requantized to int32 (as
    the model does) or to int8."""
    model = chain_model(np.random.default_rng(33), [("SOFTMAX/int8_int16", {}), after], input_shape=(4, 12),
                        input_scale=0.2).write(tmp_path / "tail.tflite")
    check_against_litert(model, "host", cmsis_nn("v6.0.0"), tmp_path / "host", samples=6)


def _lookup(value: int, table: np.ndarray) -> int:
    """TFLite's LUTLookup on int16: the high 9 bits index, the low 7 interpolate."""
    index, offset = 256 + (value >> 7), value & 0x7F
    slope = int(np.int16(int(table[index + 1]) - int(table[index])))
    return int(np.int16(int(table[index]) + ((slope * offset + 64) >> 7)))


def _exp_of(diff: int, multiplier: int, shift: int, table: np.ndarray) -> int:
    """SoftmaxInt16's exp of one difference from the row's largest value (diff ≤ 0)."""
    value = diff * (1 << max(shift, 0)) * multiplier
    high = (value + (1 << 30) if value >= 0 else value + 1 - (1 << 30))
    high = high >> 31 if high >= 0 else -((-high) >> 31)
    right = max(-shift, 0)
    mask = (1 << right) - 1
    rounded = (high >> right) + (1 if (high & mask) > (mask >> 1) + (high < 0) else 0)
    return _lookup(max(-32768, min(32767, rounded + 32767)), table)


@pytest.mark.cross
def test_an_int16_softmax_whose_sum_of_exps_is_just_under_a_power_of_two_equals_litert(cmsis_nn, tmp_path):
    """A sum of exps in [2^n − 2^(n−18), 2^n) normalises to 2^17, one past int16 once recentred:
    TFLite saturates it, CMSIS-NN's arm_softmax_s16 wraps it (and halves the row's reciprocal's
    index into the table's other end), so the kernel is ours. Rows of 8 or 16 equal largest values
    and one smaller one whose exp brings the sum to 2^18 − 1 and 2^19 − 2; random rows besides."""
    scale, depth = 1e-3, 17
    multiplier, shift = q.quantize_multiplier(float(np.float32(scale)) / (10.0 / 65535))
    exp_table, _ = softmax_int16_tables()
    top = _exp_of(0, multiplier, shift, exp_table)
    rows = []
    for largest, target in ((8, (1 << 18) - 1), (16, (1 << 19) - 2)):
        rest = depth - largest - 1  # far below the largest: exps at the table's floor
        missing = target - largest * top - rest * _exp_of(-30000, multiplier, shift, exp_table)
        diff = next(d for d in range(-1, -65536, -1) if _exp_of(d, multiplier, shift, exp_table) == missing)
        rows.append([1000] * largest + [1000 + diff] + [1000 - 30000] * rest)
    graph = GraphBuilder()
    x = graph.add_input("in", "int16", (4, depth), scale=scale, zero_point=0)
    graph.mark_output(add_softmax_int16(graph, Draw(np.random.default_rng(0), {"beta": 1.0}), x))
    model = graph.write(tmp_path / "band.tflite")
    random_rows = np.random.default_rng(34).integers(-3000, 3000, size=(2, depth))
    inputs = {"in": np.array([rows + random_rows.tolist()] * 2, dtype=np.int16)}
    (expected,) = litert.run_model(model, inputs, kernels="reference")
    reference = tmp_path / "band.npz"
    np.savez(reference, **inputs, output_0=expected)
    run = cli("run", str(model), "-b", "host", "--cmsis-nn", str(cmsis_nn("v6.0.0")), "-o", str(tmp_path / "host"),
              "--reference", str(reference), "--atol", "0", "--json")
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout)
    assert result["status"] == "pass" and all(o["max_abs_error"] == 0 for m in result["models"] for o in m["outputs"])


@pytest.mark.parametrize("case, said", [
    (("SOFTMAX/int16", {"output_zero_point": 5}), "has zero point 5"),
    (("SOFTMAX/int16", {"output_scale": 1 / 65536}), "scale 1/32768"),
    (("SOFTMAX/int16", {"input_scale": 2048.0}), "overflows TFLite's 32-bit int16 softmax"),
    (("SOFTMAX/int8_int16", {"output_zero_point": 0}), "scale 1/65536 and zero point -32768"),
    (("SOFTMAX/int8_int16", {"output_scale": 1 / 32768}), "scale 1/65536 and zero point -32768"),
    (("SOFTMAX/int8_int16", {"output_dtype": "int32"}), "a softmax from int8 to int32 is not supported"),
    (("QUANTIZE/int16_to_int32", {"output_scale_ratio": 1.0, "output_zero_point": 2147480000}), "past int32"),
    (("QUANTIZE/int16_to_int32", {"output_scale_ratio": 1e-6}), "overflows TFLite's 32-bit arithmetic"),
])
def test_softmax_and_requantizations_outside_tflite_s_arithmetic_are_refused(case, said, tmp_path):
    model = bundle_model(np.random.default_rng(35), [case]).write(tmp_path / "refused.tflite")
    _assert_refused(model, said, tmp_path)


@pytest.mark.exhaustive
@pytest.mark.qemu
@pytest.mark.cross
@pytest.mark.parametrize("board", ["host", "mps2-an386", "mps3-an547"])
@pytest.mark.parametrize("version", ["v4.1.0", "v6.0.0"])
@pytest.mark.parametrize("seed", [36, 37])
def test_softmax_cases_over_many_seeds(board, version, seed, cmsis_nn, tmp_path):
    cases = [kind for kind in KINDS for _ in range(3)] + _RARE
    model = bundle_model(np.random.default_rng(seed), cases).write(tmp_path / "softmax.tflite")
    check_against_litert(model, board, cmsis_nn(version), tmp_path / board, seed=seed, samples=2)
