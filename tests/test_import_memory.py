"""`mlfbuild import --memory min`: convolutions that write their output over their dying input, one
output row at a time through a band (importer/emit.py, lowering/conv.py). Checked against LiteRT's
reference kernels bit for bit on random chains of convolutions (strides, dilations, kernels, both
paddings, depthwise multipliers) and on the MLPerf Tiny models, and the pool claims against the
running code under the sanitizer (test_import_pool_sanitizer.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import tflitecases  # noqa: F401 - registers the cases of every operator family with tflitewriter
from conftest import cli
from mlfbuild.importer import import_tflite
from test_import_operators import check_against_litert
from tflitewriter import ADDERS, KWS_CHAIN, Draw, GraphBuilder, chain_model

_CONVOLUTIONS = ("CONV_2D", "DEPTHWISE_CONV_2D")


_SAME = {"padding": "SAME", "stride_h": 1, "stride_w": 1, "dilation_h": 1, "dilation_w": 1}
# A depthwise-separable stack as kws has it: 3x3 depthwise and pointwise layers of equal sizes.
DS_CHAIN = (("CONV_2D", dict(_SAME, out_channels=8)),
            *[(op, dict(_SAME, kernel_h=k, kernel_w=k, **extra)) for _ in range(3)
              for op, k, extra in (("DEPTHWISE_CONV_2D", 3, {"depth_multiplier": 1}), ("CONV_2D", 1, {"out_channels": 8}))],
            "AVERAGE_POOL_2D")


# A MobileNet's first layers (vww's in small): the pointwise layer's output is the largest tensor.
_STRIDE2 = dict(_SAME, stride_h=2, stride_w=2, kernel_h=3, kernel_w=3)
MOBILENET_HEAD = (("CONV_2D", dict(_STRIDE2, out_channels=4)),
                  ("DEPTHWISE_CONV_2D", dict(_SAME, kernel_h=3, kernel_w=3, depth_multiplier=1)),
                  ("CONV_2D", dict(_SAME, kernel_h=1, kernel_w=1, out_channels=16)),
                  ("DEPTHWISE_CONV_2D", dict(_STRIDE2, depth_multiplier=1)),
                  ("CONV_2D", dict(_SAME, kernel_h=1, kernel_w=1, out_channels=16)),
                  "AVERAGE_POOL_2D")
HEAD_INPUT = (1, 48, 24, 3)
# ...and an image where running the head in stripes pays with the input in the pool (at HEAD_INPUT the
# first layer's row bands over the input do better)
STRIPED_HEAD_INPUT = (1, 96, 48, 3)


# PyTorch's MobileNetV2 as the converter writes it: explicit PADs before VALID depthwise layers.
_VALID = dict(_SAME, padding="VALID")
PADDED_BLOCK = (("CONV_2D", dict(_SAME, kernel_h=1, kernel_w=1, out_channels=4)),
                ("CONV_2D", dict(_SAME, kernel_h=1, kernel_w=1, out_channels=12)),
                ("PAD", {"paddings": [[0, 0], [1, 1], [1, 1], [0, 0]]}),
                ("DEPTHWISE_CONV_2D", dict(_VALID, kernel_h=3, kernel_w=3, stride_h=2, stride_w=2, depth_multiplier=1)),
                ("CONV_2D", dict(_SAME, kernel_h=1, kernel_w=1, out_channels=4)),
                ("PAD", {"paddings": [[0, 0], [2, 0], [0, 1], [0, 0]]}),
                ("DEPTHWISE_CONV_2D", dict(_VALID, kernel_h=3, kernel_w=3, depth_multiplier=1)),
                "AVERAGE_POOL_2D")


def chains_model(rng: np.random.Generator, count: int) -> GraphBuilder:
    """`count` chains of three to five convolutions side by side, each on its own input (rows enough
    for several bands), each a graph output."""
    graph = GraphBuilder()
    for k in range(count):
        shape = (1, int(rng.integers(6, 15)), int(rng.integers(3, 9)), int(rng.integers(1, 5)))
        x = graph.add_input(f"in{k}", "int8", shape, scale=float(rng.uniform(0.02, 0.08)),
                            zero_point=int(rng.integers(-100, 100)))
        for position in range(int(rng.integers(3, 6))):
            op = _CONVOLUTIONS[int(rng.integers(2))]
            draw = Draw(rng, {"kernel_h": int(rng.integers(1, 6))} if graph.tensor(x).shape[1] > 5 else {})
            x = ADDERS[op](graph, draw, x, name=f"chain{k}_{op.lower()}_{position}")
        graph.mark_output(x)
    return graph


def test_min_is_never_bigger_than_floor_and_overlaps_where_it_pays(tmp_path):
    for seed in range(6):
        path = chains_model(np.random.default_rng(seed), 4).write(tmp_path / f"chains{seed}.tflite")
        floor = import_tflite(path, tmp_path / f"floor{seed}.tar")
        least = import_tflite(path, tmp_path / f"min{seed}.tar", memory="min")
        assert least.pool_bytes + least.io_bytes <= floor.pool_bytes + floor.io_bytes
        assert least.io_bytes == 0 and floor.io_bytes > 0  # min's pool holds the inputs and outputs
        assert not any(step.band_order for step in floor.steps)
    kws = chain_model(np.random.default_rng(3), DS_CHAIN, input_shape=(1, 25, 5, 8))
    path = kws.write(tmp_path / "kws.tflite")
    floor, least = import_tflite(path, tmp_path / "f.tar"), import_tflite(path, tmp_path / "m.tar", memory="min")
    assert least.pool_bytes < floor.pool_bytes + floor.io_bytes
    assert sum(1 for step in least.steps if step.band_order) >= 2


@pytest.mark.cross
@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.exhaustive)])
def test_random_convolution_chains_over_their_inputs_equal_litert(seed, cmsis_nn, tmp_path):
    """Every chain's overlaps, in both row orders, computed as LiteRT's reference kernels compute."""
    path = chains_model(np.random.default_rng(100 + seed), 6).write(tmp_path / "chains.tflite")
    orders = {step.band_order for step in import_tflite(path, tmp_path / "m.tar", memory="min").steps}
    assert orders & {"down", "up"}
    mlf = tmp_path / "chains-min.tar"
    assert cli("import", str(path), "-o", str(mlf), "--memory", "min").returncode == 0
    check_against_litert(path, "host", cmsis_nn("v6.0.0"), tmp_path / "host", samples=3)
    run = cli("run", str(mlf), "-b", "host", "--cmsis-nn", str(cmsis_nn("v6.0.0")), "-o", str(tmp_path / "b"),
              "--samples", "3", "--json")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["status"] == "pass"
    assert "not proven" not in run.stderr


@pytest.mark.qemu
@pytest.mark.cross
@pytest.mark.parametrize("chain, shape", [pytest.param(DS_CHAIN, (1, 25, 5, 8), marks=pytest.mark.exhaustive),
                                          (MOBILENET_HEAD, (1, 48, 24, 3))], ids=["row bands", "stripes and bands"])
def test_min_plans_on_the_m55_equal_litert(chain, shape, cmsis_nn, tmp_path):
    model = chain_model(np.random.default_rng(5), chain, input_shape=shape).write(tmp_path / "k.tflite")
    mlf = tmp_path / "k.tar"
    assert cli("import", str(model), "-o", str(mlf), "--memory", "min").returncode == 0
    run = cli("run", str(mlf), "-b", "mps3-an547", "--cmsis-nn", str(cmsis_nn("v6.0.0")), "-o", str(tmp_path / "b"),
              "--samples", "2", "--json")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["status"] == "pass"


def test_the_memory_plan_is_recorded_and_shown(tmp_path):
    model = chain_model(np.random.default_rng(5), KWS_CHAIN, input_shape=(1, 25, 5, 8)).write(tmp_path / "k.tflite")
    mlf = tmp_path / "k.tar"
    done = cli("import", str(model), "-o", str(mlf), "--memory", "min", "--json")
    assert done.returncode == 0, done.stderr
    shown = cli("inspect", str(mlf))
    assert shown.returncode == 0 and "min memory plan" in shown.stdout


def test_an_unknown_memory_plan_is_a_usage_error(tmp_path):
    model = chain_model(np.random.default_rng(5), KWS_CHAIN).write(tmp_path / "k.tflite")
    done = cli("import", str(model), "-o", str(tmp_path / "k.tar"), "--memory", "smallest")
    assert done.returncode == 2 and "--memory" in done.stderr
    assert not (tmp_path / "k.tar").exists()




def test_stripes_cover_every_output_row_once_and_every_row_each_layer_reads():
    from mlfbuild.importer import patches
    from mlfbuild.importer.lowering.rows import ConvRows

    rng = np.random.default_rng(0)
    for _ in range(200):
        height, layers = int(rng.integers(8, 40)), []
        for _ in range(int(rng.integers(2, 5))):
            k, s, d = int(rng.integers(1, 6)), int(rng.integers(1, 3)), int(rng.integers(1, 3))
            pad = int(rng.integers(0, (k - 1) * d + 1))
            out = (height + 2 * pad - (k - 1) * d - 1) // s + 1
            if out < 2:
                break
            layers.append(ConvRows("f", (), (1, k, 1, 1), False, (height, 1, 1), (out, 1, 1), k, s, d, pad, 0))
            height = out
        if len(layers) < 2:
            continue
        for stripes in patches.STRIPE_COUNTS:
            ranges = patches._stripe_ranges(layers, stripes)
            if ranges is None:
                continue
            last_rows = [row for stripe in ranges for row in range(*stripe[-1])]
            assert last_rows == list(range(layers[-1].out_hwc[0]))
            for stripe in ranges:
                for position in range(1, len(layers)):
                    low, rows, _ = layers[position].window(*stripe[position])
                    first, end = stripe[position - 1]
                    assert first <= low and low + rows <= end  # every row read was computed


@pytest.mark.cross
def test_a_mobilenet_head_run_in_stripes_equals_litert(cmsis_nn, tmp_path):
    model = chain_model(np.random.default_rng(8), MOBILENET_HEAD, input_shape=STRIPED_HEAD_INPUT).write(tmp_path / "m.tflite")
    floor = import_tflite(model, tmp_path / "floor.tar")
    least = import_tflite(model, tmp_path / "min.tar", memory="min")
    assert any("stripes of rows" in step.note for step in least.steps)
    assert least.pool_bytes < floor.pool_bytes + floor.io_bytes
    run = cli("run", str(tmp_path / "min.tar"), "-b", "host", "--cmsis-nn", str(cmsis_nn("v6.0.0")),
              "-o", str(tmp_path / "b"), "--samples", "3", "--json")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["status"] == "pass" and "not proven" not in run.stderr


@pytest.mark.cross
def test_a_mobilenet_head_after_a_leading_transpose_runs_in_stripes_and_equals_litert(cmsis_nn, tmp_path):
    """PyTorch's models start by transposing their NCHW image: the stripes start at the first
    convolution, over the transposed image (TFLM's mobilenet_v2: 1,204,224 B of pool → 550,592 B)."""
    channels_first = (STRIPED_HEAD_INPUT[0], STRIPED_HEAD_INPUT[3], *STRIPED_HEAD_INPUT[1:3])
    # its expansion wide, as mobilenet_v2's: a layer's tensors, not the image twice (NCHW and NHWC), at the peak
    wide = tuple((op, dict(draws, out_channels=48)) if draws.get("out_channels") == 16 else (op, draws)
                 for op, draws in MOBILENET_HEAD[:-1])
    ops = (("TRANSPOSE", {"perm": (0, 2, 3, 1)}), *wide, MOBILENET_HEAD[-1])
    model = chain_model(np.random.default_rng(8), ops, input_shape=channels_first).write(tmp_path / "t.tflite")
    least = import_tflite(model, tmp_path / "min.tar", memory="min")
    striped = [step.note for step in least.steps if "stripes of rows" in step.note]
    assert striped and striped[0].startswith("operators 1 (CONV_2D), 2 (DEPTHWISE_CONV_2D)"), striped
    run = cli("run", str(tmp_path / "min.tar"), "-b", "host", "--cmsis-nn", str(cmsis_nn("v6.0.0")),
              "-o", str(tmp_path / "b"), "--samples", "3", "--json")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["status"] == "pass" and "not proven" not in run.stderr


@pytest.mark.exhaustive
@pytest.mark.cross
@pytest.mark.parametrize("seed", range(8))  # seeds 0, 2, 4, 5 and 7 run their first layers in stripes
def test_random_heads_after_a_transpose_equal_litert_under_min(seed, cmsis_nn, tmp_path):
    """Random NCHW images transposed, then a head of random strides, kernels and widths: whatever
    stripe stage the plan picks computes what LiteRT's reference kernels compute, and its pool is proven."""
    rng = np.random.default_rng(300 + seed)
    height, width = int(rng.integers(24, 64)), int(rng.integers(8, 32))
    ops = [("TRANSPOSE", {"perm": (0, 2, 3, 1)})]
    for position in range(int(rng.integers(3, 6))):
        stride = int(rng.integers(1, 3)) if position < 2 else 1
        kernel = int(rng.choice([1, 3]))
        common = dict(_SAME, stride_h=stride, stride_w=stride, kernel_h=kernel, kernel_w=kernel)
        if position % 2:
            ops.append(("DEPTHWISE_CONV_2D", dict(common, depth_multiplier=1)))
        else:
            ops.append(("CONV_2D", dict(common, out_channels=int(rng.integers(4, 40)))))
    model = chain_model(rng, ops, input_shape=(1, 3, height, width)).write(tmp_path / "t.tflite")
    mlf = tmp_path / "min.tar"
    assert cli("import", str(model), "-o", str(mlf), "--memory", "min").returncode == 0
    run = cli("run", str(mlf), "-b", "host", "--cmsis-nn", str(cmsis_nn("v6.0.0")), "-o", str(tmp_path / "b"),
              "--samples", "3", "--json")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["status"] == "pass" and "not proven" not in run.stderr


@pytest.mark.qemu
@pytest.mark.cross
def test_a_tflite_too_big_for_the_board_at_the_floor_is_planned_smallest_and_runs(models_dir, cmsis_nn, tmp_path):
    """MLPerf Tiny's kws needs 16,000 B of pool at the floor, too much beside its io on the micro:bit's
    16 KiB: given as a .tflite, it is imported with the smallest plan, and runs there bit-exact."""
    run = cli("run", str(models_dir / "kws_ref_model.tflite"), "-b", "microbit", "--cmsis-nn", str(cmsis_nn("v6.0.0")),
              "-o", str(tmp_path / "b"), "--samples", "2", "--json")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["status"] == "pass"
    record = json.loads((tmp_path / "b" / "build.json").read_text())
    assert record["models"][0]["imported_from"]["memory"] == "min"
    host = cli("build", str(models_dir / "kws_ref_model.tflite"), "-b", "host", "--cmsis-nn", str(cmsis_nn("v6.0.0")),
               "-o", str(tmp_path / "h"))
    assert host.returncode == 0, host.stderr
    assert json.loads((tmp_path / "h" / "build.json").read_text())["models"][0]["imported_from"]["memory"] == "floor"


@pytest.mark.cross
def test_size_shows_the_memory_over_the_inference_and_the_plan(cmsis_nn, tmp_path):
    model = chain_model(np.random.default_rng(5), DS_CHAIN, input_shape=(1, 25, 5, 8)).write(tmp_path / "k.tflite")
    least = import_tflite(model, tmp_path / "k.tar", memory="min")
    built = cli("build", str(tmp_path / "k.tar"), "-b", "host", "--cmsis-nn", str(cmsis_nn("v6.0.0")), "-o", str(tmp_path / "b"))
    assert built.returncode == 0, built.stderr
    text = cli("size", str(tmp_path / "b")).stdout
    line = next(line for line in text.splitlines() if "live over the inference" in line)
    pool = json.loads(cli("size", str(tmp_path / "b"), "--json").stdout)["modules"][0]["workspace_pool"]
    peak = max(pool["live_bytes"])  # the bytes in use, the pool's 16-byte alignment of each tensor aside
    assert f"peak {peak:,} B" in line and "(memory plan min, generated kernels)" in line
    assert least.pool_bytes - 16 * len(least.steps) < peak <= least.pool_bytes
    # a call per operator, and the copies of the input in and the output out (io in the pool)
    assert len(pool["live_bytes"]) == len(least.steps) + 2
    assert cli("size", str(tmp_path / "b"), "--html", str(tmp_path / "s.html")).returncode == 0
    assert "<svg" in (tmp_path / "s.html").read_text()


def test_a_long_inference_is_shown_in_columns_of_its_calls_most():
    from mlfbuild.size.render import live_columns

    assert live_columns([1, 5, 2]) == [1, 5, 2]
    assert live_columns(list(range(128)), 64) == [2 * i + 1 for i in range(64)]


@pytest.mark.cross
def test_explicit_pads_move_their_rows_over_their_inputs_and_equal_litert(cmsis_nn, tmp_path):
    """A PAD writes its output over its dying input, bottom row first (each row moved before its
    padding is written), uneven paddings included. (Before a SAME layer: one before a VALID layer is
    folded into it, test_import_io_in_pool.py.)"""
    same = ("DEPTHWISE_CONV_2D", dict(_SAME, kernel_h=3, kernel_w=3, depth_multiplier=1))
    block = (PADDED_BLOCK[1], PADDED_BLOCK[5], same, PADDED_BLOCK[2], same, PADDED_BLOCK[4], PADDED_BLOCK[7])
    model = chain_model(np.random.default_rng(6), block, input_shape=(1, 20, 12, 6)).write(tmp_path / "p.tflite")
    least = import_tflite(model, tmp_path / "p.tar", memory="min")
    assert [s.band_order for s in least.steps if s.operator.name == "PAD"] == ["up", "up"]
    floor = import_tflite(model, tmp_path / "f.tar")
    assert least.pool_bytes < floor.pool_bytes + floor.io_bytes
    check_against_litert(model, "host", cmsis_nn("v6.0.0"), tmp_path / "floor", samples=2)
    run = cli("run", str(tmp_path / "p.tar"), "-b", "host", "--cmsis-nn", str(cmsis_nn("v6.0.0")),
              "-o", str(tmp_path / "b"), "--samples", "3", "--json")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["status"] == "pass" and "not proven" not in run.stderr
