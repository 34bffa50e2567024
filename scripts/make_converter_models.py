"""Make tests/converter_models/: small Keras models quantized by TensorFlow's own TFLite converter.

TensorFlow is not a dependency of mlfbuild: this script runs in a venv of its own (docs/converter-models.md).

    python3 -m venv /work/tfvenv && /work/tfvenv/bin/pip install tensorflow-cpu tf-keras
    /work/tfvenv/bin/python scripts/make_converter_models.py [--out tests/converter_models] [--only NAME ...]

Each model is built with fixed seeds (weights, biases and batch-norm statistics drawn from them),
calibrated on a seeded representative dataset and converted with full-integer quantization: int8
weights and activations (int16 activations for the 16x8 model), the interface int8 (or int16) or
left float as the model asks. The manifest records, per model, its file, the Keras layers, the
builtin operators of the .tflite (read back from the flatbuffer), the interface types and the
TensorFlow version; a model the converter cannot make of int8 builtins is recorded with the
converter's reason instead of a file. The bytes need not match between TensorFlow versions.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")  # the same float sums whatever the CPU

import numpy as np
import tensorflow as tf
from tensorflow.lite.python import schema_py_generated as schema

keras = tf.keras
L = keras.layers

REPO = Path(__file__).resolve().parents[1]
CALIBRATION_SAMPLES = 32
IMAGE = (16, 16, 3)
SEQUENCE = (32, 8)


# --- the models ------------------------------------------------------------------------------------
# Each entry: name → (builder, interface[, options]). A builder returns a keras.Model; interface is
# the type of the graph's inputs and outputs: "int8", "float32" (quantized inside) or "int16" (16x8);
# options: {"batch": None} for Keras's default batch instead of 1; {"dense_per_tensor": True} for
# the converter's (private) switch that quantizes Dense weights per tensor; {"like": other} for the
# seed (so the weights) of another entry.

# The batch of every input: 1, as a model for one microcontroller inference is usually exported (a
# `None` batch makes Flatten and Reshape shape arithmetic: SHAPE, STRIDED_SLICE, PACK). The models
# whose MODELS entry says batch None keep Keras's default, to record what that makes.
_batch: list = [1]


def _input(shape, name: str):
    return keras.Input(shape=shape, batch_size=_batch[0], name=name)


def _image(name: str = "image", shape=IMAGE):
    return _input(shape, name)


def conv1d():
    x = _input(SEQUENCE, "sequence")
    y = L.Conv1D(8, 3, activation="relu")(x)
    y = L.Conv1D(8, 3, strides=2, padding="same")(y)
    y = L.GlobalAveragePooling1D()(y)
    return keras.Model(x, L.Dense(4)(y))


def conv2d_strides_padding():
    x = _image()
    y = L.Conv2D(8, 3, padding="same", activation="relu")(x)
    y = L.Conv2D(8, 3, strides=2, padding="valid")(y)
    y = L.Conv2D(12, 5, strides=2, padding="same", activation="relu")(y)
    y = L.Conv2D(6, (1, 3), strides=(1, 2), padding="same")(y)
    return keras.Model(x, y)


def conv2d_dilation():
    x = _image()
    y = L.Conv2D(8, 3, dilation_rate=2, padding="same", activation="relu")(x)
    y = L.Conv2D(8, 3, dilation_rate=(2, 1), padding="valid")(y)
    return keras.Model(x, y)


def depthwise_conv2d():
    x = _image()
    y = L.Conv2D(8, 1)(x)
    y = L.DepthwiseConv2D(3, padding="same", activation="relu")(y)
    y = L.DepthwiseConv2D(3, strides=2, depth_multiplier=2, padding="valid")(y)
    return keras.Model(x, y)


def separable_conv2d():
    x = _image()
    y = L.SeparableConv2D(8, 3, padding="same", activation="relu")(x)
    y = L.SeparableConv2D(12, 3, strides=2, depth_multiplier=2)(y)
    return keras.Model(x, y)


def dense_2d():
    x = _input((32,), "features")
    y = L.Dense(24, activation="relu")(x)
    return keras.Model(x, L.Dense(10)(y))


def dense_3d():
    x = _input(SEQUENCE, "sequence")
    y = L.Dense(12, activation="relu")(x)
    return keras.Model(x, L.Dense(6)(y))


def pooling():
    x = _image()
    y = L.Conv2D(8, 3, padding="same")(x)
    y = L.MaxPooling2D(2)(y)
    y = L.AveragePooling2D(3, strides=1, padding="same")(y)
    y = L.MaxPooling2D(3, strides=2, padding="valid")(y)
    y = L.AveragePooling2D(2)(y)
    return keras.Model(x, y)


def global_average_pooling():
    x = _image()
    y = L.Conv2D(16, 3, strides=2, activation="relu")(x)
    y = L.GlobalAveragePooling2D()(y)
    return keras.Model(x, L.Dense(5, activation="softmax")(y))


def batch_norm_folded():
    x = _image()
    y = L.Conv2D(8, 3, padding="same", use_bias=False)(x)
    y = L.BatchNormalization()(y)
    y = L.ReLU()(y)
    y = L.DepthwiseConv2D(3, padding="same", use_bias=False)(y)
    y = L.BatchNormalization()(y)
    return keras.Model(x, L.ReLU()(y))


def residual_add():
    x = _image()
    a = L.Conv2D(8, 3, padding="same", activation="relu")(x)
    b = L.Conv2D(8, 3, padding="same", activation="relu")(a)
    b = L.Conv2D(8, 3, padding="same")(b)
    y = L.ReLU()(L.Add()([a, b]))
    return keras.Model(x, y)


def squeeze_excite():
    x = _image()
    y = L.Conv2D(16, 3, padding="same", activation="relu")(x)
    s = L.GlobalAveragePooling2D(keepdims=True)(y)
    s = L.Dense(4, activation="relu")(s)
    s = L.Dense(16, activation="sigmoid")(s)
    return keras.Model(x, L.Multiply()([y, s]))


def concatenate():
    x = _image()
    a = L.Conv2D(4, 1, activation="relu")(x)
    b = L.Conv2D(6, 3, padding="same", activation="relu")(x)
    c = L.MaxPooling2D(3, strides=1, padding="same")(x)
    return keras.Model(x, L.Concatenate()([a, b, c]))


def zero_padding():
    x = _image()
    y = L.ZeroPadding2D(((1, 2), (0, 1)))(x)
    y = L.Conv2D(8, 3, strides=2)(y)
    return keras.Model(x, L.ZeroPadding2D(1)(y))


def upsampling_nearest():
    x = _image(shape=(8, 8, 4))
    y = L.Conv2D(4, 3, padding="same")(x)
    return keras.Model(x, L.UpSampling2D(2, interpolation="nearest")(y))


def upsampling_bilinear():
    x = _image(shape=(8, 8, 4))
    y = L.Conv2D(4, 3, padding="same")(x)
    return keras.Model(x, L.UpSampling2D(2, interpolation="bilinear")(y))


def _activation_model(what: str, layer):
    def build():
        x = _image(shape=(8, 8, 4))
        return keras.Model(x, layer()(L.Conv2D(8, 3, padding="same")(x)))
    build.__doc__ = f"A convolution, then {what}."
    return build


def activations_supported():
    """relu, relu6 (as ReLU(6)), sigmoid and softmax, each after a convolution of its own."""
    x = _image(shape=(8, 8, 4))
    outputs = []
    for layer in (L.ReLU, lambda: L.ReLU(6.0), lambda: L.Activation("sigmoid"), L.Softmax):
        outputs.append(layer()(L.Conv2D(4, 3, padding="same")(x)))
    return keras.Model(x, L.Concatenate()(outputs))


def lstm():
    x = _input((16, 8), "sequence")
    y = L.LSTM(8)(x)
    return keras.Model(x, L.Dense(4)(y))


def lstm_fused():
    """Keras 2's LSTM (tf_keras): the converter fuses each layer into one UNIDIRECTIONAL_SEQUENCE_LSTM"""
    import tf_keras  # Keras 3's LSTM becomes a WHILE loop that TF 2.21 crashes quantizing
    x = tf_keras.Input(shape=(6, 8), batch_size=_batch[0], name="sequence")
    # wide recurrent weights: cells that reach past ±1, the cell-state scales LiteRT computes tanh at
    wide = tf_keras.initializers.RandomNormal(stddev=0.6)
    y = tf_keras.layers.LSTM(8, return_sequences=True, recurrent_initializer=wide, kernel_initializer=wide)(x)
    y = tf_keras.layers.LSTM(6, recurrent_initializer=wide, kernel_initializer=wide)(y)
    return tf_keras.Model(x, tf_keras.layers.Dense(4)(y))


def lstm_unrolled():
    x = _input((6, 8), "sequence")
    y = L.LSTM(8, unroll=True)(x)
    return keras.Model(x, L.Dense(4)(y))


def gru():
    x = _input((16, 8), "sequence")
    y = L.GRU(8)(x)
    return keras.Model(x, L.Dense(4)(y))


def gru_unrolled():
    x = _input((6, 8), "sequence")
    y = L.GRU(8, unroll=True)(x)
    return keras.Model(x, L.Dense(4)(y))


def two_inputs():
    image = _image()
    features = _input((6,), "features")
    y = L.Conv2D(8, 3, strides=2, activation="relu")(image)
    y = L.GlobalAveragePooling2D()(y)
    y = L.Concatenate()([y, L.Dense(8, activation="relu")(features)])
    return keras.Model([image, features], L.Dense(3)(y))


def two_outputs():
    x = _image()
    y = L.Conv2D(8, 3, strides=2, activation="relu")(x)
    y = L.GlobalAveragePooling2D()(y)
    return keras.Model(x, [L.Dense(4, activation="softmax", name="classes")(y), L.Dense(2, name="box")(y)])


def small_cnn():
    """A small classifier: convolutions, pooling, flatten, dense, softmax (made twice: int8 and float interface)."""
    x = _image()
    y = L.Conv2D(8, 3, padding="same", activation="relu")(x)
    y = L.MaxPooling2D(2)(y)
    y = L.Conv2D(8, 3, padding="same", activation="relu")(y)
    y = L.MaxPooling2D(2)(y)
    y = L.Flatten()(y)
    return keras.Model(x, L.Dense(4, activation="softmax")(y))


def conv2d_16x8():
    x = _image()
    y = L.Conv2D(8, 3, padding="same", activation="relu")(x)
    y = L.Conv2D(8, 3, strides=2)(y)
    return keras.Model(x, y)


def conv2d_transpose():
    x = _image(shape=(8, 8, 4))
    y = L.Conv2DTranspose(6, 3, strides=2, padding="same", activation="relu")(x)
    return keras.Model(x, L.Conv2DTranspose(4, 2, strides=1, padding="valid")(y))


def reshape_flatten():
    x = _input((64,), "features")
    y = L.Reshape((8, 8, 1))(x)
    y = L.Conv2D(4, 3, activation="relu")(y)
    y = L.Flatten()(y)
    y = L.Dense(16)(y)
    return keras.Model(x, L.Reshape((4, 4))(y))


def mobilenet_v3_block():
    """Expand 1x1, depthwise 3x3, squeeze-excite with hard sigmoid, project 1x1, residual; hard swish."""
    x = _image()
    stem = L.Conv2D(8, 3, strides=2, padding="same", use_bias=False)(x)
    stem = L.BatchNormalization()(stem)
    stem = L.Activation("hard_swish")(stem)
    y = L.Conv2D(16, 1, use_bias=False)(stem)
    y = L.BatchNormalization()(y)
    y = L.Activation("hard_swish")(y)
    y = L.DepthwiseConv2D(3, padding="same", use_bias=False)(y)
    y = L.BatchNormalization()(y)
    y = L.Activation("hard_swish")(y)
    s = L.GlobalAveragePooling2D(keepdims=True)(y)
    s = L.Conv2D(4, 1, activation="relu")(s)
    s = L.Conv2D(16, 1, activation="hard_sigmoid")(s)
    y = L.Multiply()([y, s])
    y = L.Conv2D(8, 1, use_bias=False)(y)
    y = L.BatchNormalization()(y)
    y = L.Add()([stem, y])
    y = L.GlobalAveragePooling2D()(y)
    return keras.Model(x, L.Dense(4)(y))


MODELS = {
    "conv1d": (conv1d, "int8"),
    "conv2d_strides_padding": (conv2d_strides_padding, "int8"),
    "conv2d_dilation": (conv2d_dilation, "int8"),
    "depthwise_conv2d": (depthwise_conv2d, "int8"),
    "separable_conv2d": (separable_conv2d, "int8"),
    "dense_2d": (dense_2d, "int8"),
    "dense_3d": (dense_3d, "int8"),
    "pooling": (pooling, "int8"),
    "global_average_pooling": (global_average_pooling, "int8"),
    "batch_norm_folded": (batch_norm_folded, "int8"),
    "residual_add": (residual_add, "int8"),
    "squeeze_excite": (squeeze_excite, "int8"),
    "concatenate": (concatenate, "int8"),
    "zero_padding": (zero_padding, "int8"),
    "upsampling_nearest": (upsampling_nearest, "int8"),
    "upsampling_bilinear": (upsampling_bilinear, "int8"),
    "activations_supported": (activations_supported, "int8"),
    "activation_tanh": (_activation_model("tanh", lambda: L.Activation("tanh")), "int8"),
    "activation_hard_swish": (_activation_model("hard_swish", lambda: L.Activation("hard_swish")), "int8"),
    "activation_hard_sigmoid": (_activation_model("hard_sigmoid", lambda: L.Activation("hard_sigmoid")), "int8"),
    "activation_leaky_relu": (_activation_model("LeakyReLU(0.2)", lambda: L.LeakyReLU(0.2)), "int8"),
    "activation_elu": (_activation_model("elu", lambda: L.Activation("elu")), "int8"),
    "lstm": (lstm, "int8"),
    "lstm_fused": (lstm_fused, "int8"),
    "lstm_unrolled": (lstm_unrolled, "int8"),
    "gru": (gru, "int8"),
    "gru_unrolled": (gru_unrolled, "int8"),
    "two_inputs": (two_inputs, "int8"),
    "two_outputs": (two_outputs, "int8"),
    "small_cnn_int8": (small_cnn, "int8"),
    "small_cnn_float": (small_cnn, "float32"),
    "small_cnn_dynamic_batch": (small_cnn, "int8", {"batch": None}),
    "dense_3d_dynamic_batch": (dense_3d, "int8", {"batch": None}),
    "conv2d_16x8": (conv2d_16x8, "int16"),
    "conv2d_transpose": (conv2d_transpose, "int8"),
    "reshape_flatten": (reshape_flatten, "int8"),
    "mobilenet_v3_block": (mobilenet_v3_block, "int8"),
    # The converter quantizes Dense weights per channel unless told otherwise (TF 2.21); the same
    # models with them per tensor, as older converters made them (the MLPerf Tiny models).
    **{f"{name}_dense_per_tensor": (builder, interface, {"dense_per_tensor": True, "like": name})
       for name, builder, interface in (
        ("conv1d", conv1d, "int8"), ("dense_2d", dense_2d, "int8"), ("dense_3d", dense_3d, "int8"),
        ("global_average_pooling", global_average_pooling, "int8"), ("squeeze_excite", squeeze_excite, "int8"),
        ("two_inputs", two_inputs, "int8"), ("two_outputs", two_outputs, "int8"),
        ("small_cnn_int8", small_cnn, "int8"), ("small_cnn_float", small_cnn, "float32"),
        ("reshape_flatten", reshape_flatten, "int8"))},
}


# --- building, converting, reading back -----------------------------------------------------------

def seed_of(name: str) -> int:
    """A seed per model that does not depend on the order of MODELS (its name's bytes, weighted)."""
    options = MODELS[name][2] if len(MODELS[name]) > 2 else {}
    name = options.get("like", name)
    return sum((i + 1) * b for i, b in enumerate(name.encode())) % (2 ** 31)


def randomize_statistics(model, rng: np.random.Generator) -> None:
    """Kernels keep Keras's seeded initialisers; biases and batch-norm parameters, which Keras
    initialises to 0 and 1, are drawn instead, so the converter's folding and the zero points have
    something to do."""
    for layer in model.layers:
        weights = layer.get_weights()
        if not weights:
            continue
        names = [getattr(w, "path", w.name).rsplit("/", 1)[-1].split(":")[0] for w in layer.weights]  # Keras 3, 2
        drawn = []
        for name, value in zip(names, weights):
            if name == "bias":
                value = rng.normal(0.0, 0.1, value.shape)
            elif name == "gamma":
                value = rng.uniform(0.5, 1.5, value.shape)
            elif name in ("beta", "moving_mean"):
                value = rng.normal(0.0, 0.2, value.shape)
            elif name == "moving_variance":
                value = rng.uniform(0.5, 2.0, value.shape)
            drawn.append(np.asarray(value, dtype=np.float32))
        layer.set_weights(drawn)


def representative_dataset(model, seed: int):
    """Samples keyed by input name (the converter's signature orders the inputs its own way)."""
    rng = np.random.default_rng(seed)
    shapes = {t.name: tuple(1 if d is None else d for d in t.shape) for t in model.inputs}
    samples = [{name: rng.normal(0.0, 1.0, shape).astype(np.float32) for name, shape in shapes.items()}
               for _ in range(CALIBRATION_SAMPLES)]

    def generate():
        yield from samples
    return generate


def convert(model, interface: str, seed: int, dense_per_tensor: bool = False) -> bytes:
    converter = tf.lite.TFLiteConverter.from_keras_model(model)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    if dense_per_tensor:
        converter._experimental_disable_per_channel_quantization_for_dense_layers = True
    converter.representative_dataset = representative_dataset(model, seed + 1)
    if interface == "int16":
        int16 = tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8
        converter.target_spec.supported_ops = [int16]
        converter.inference_input_type = converter.inference_output_type = tf.int16
    else:
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        if interface == "int8":
            converter.inference_input_type = converter.inference_output_type = tf.int8
    return converter.convert()


_BUILTIN_NAMES = {value: name for name, value in vars(schema.BuiltinOperator).items() if not name.startswith("_")}
_TYPE_NAMES = {value: name.lower() for name, value in vars(schema.TensorType).items() if not name.startswith("_")}


def read_back(data: bytes) -> dict:
    """The builtin operators (TFLite's names, in order of first use, every subgraph) and the types of
    the main graph's inputs and outputs, from the flatbuffer itself."""
    model = schema.Model.GetRootAsModel(data, 0)
    codes = []
    for i in range(model.OperatorCodesLength()):
        code = model.OperatorCodes(i)
        builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
        name = _BUILTIN_NAMES.get(builtin, f"BUILTIN_{builtin}")
        codes.append(f"CUSTOM:{code.CustomCode().decode()}" if name == "CUSTOM" else name)
    operators, subgraphs = [], model.SubgraphsLength()
    for s in range(subgraphs):
        graph = model.Subgraphs(s)
        for o in range(graph.OperatorsLength()):
            name = codes[graph.Operators(o).OpcodeIndex()]
            if name not in operators:
                operators.append(name)
    main = model.Subgraphs(0)

    def types(count, index):
        return [_TYPE_NAMES[main.Tensors(index(i)).Type()] for i in range(count)]
    return {"operators": operators, "subgraphs": subgraphs,
            "input_types": types(main.InputsLength(), main.Inputs),
            "output_types": types(main.OutputsLength(), main.Outputs)}


def keras_layers(model) -> list[str]:
    names = []
    for layer in model.layers:
        name = type(layer).__name__
        if name != "InputLayer" and name not in names:
            names.append(name)
    return names


def build(name: str):
    """The Keras model of MODELS[name], its weights drawn from the model's seed."""
    builder, _, *options = MODELS[name]
    options = options[0] if options else {}
    keras.utils.set_random_seed(seed_of(name))
    _batch[0] = options.get("batch", 1)
    model = builder()
    randomize_statistics(model, np.random.default_rng(seed_of(name)))
    return model


def make(name: str, out: Path) -> dict:
    builder, interface, *options = MODELS[name]
    seed = seed_of(name)
    model = build(name)
    options = options[0] if options else {}
    entry = {"name": name, "keras_layers": keras_layers(model), "interface": interface, "seed": seed,
             "batch": _batch[0], "tensorflow": tf.__version__}
    if options.get("dense_per_tensor"):
        entry["dense_weights"] = "per tensor"
    if type(model).__module__.startswith("tf_keras"):
        import tf_keras
        entry["keras"] = f"tf_keras {tf_keras.__version__}"
    if builder.__doc__:
        entry["note"] = builder.__doc__.strip().splitlines()[0]
    try:
        data = convert(model, interface, seed, options.get("dense_per_tensor", False))
    except Exception as exc:  # noqa: BLE001 - the converter's refusal is what the manifest records
        entry["file"] = None
        entry["conversion_error"] = " ".join(str(exc).split())[:500]
        return entry
    entry["file"] = f"{name}.tflite"
    entry["bytes"] = len(data)
    entry.update(read_back(data))
    (out / entry["file"]).write_bytes(data)
    return entry


def manifest_text(manifest: dict) -> str:
    """JSON, one field per line, lists on the field's line: readable in a diff."""
    def fields(entry: dict, indent: str) -> str:
        return ",\n".join(f"{indent}{json.dumps(k)}: {json.dumps(v)}" for k, v in entry.items())
    head = fields({k: v for k, v in manifest.items() if k != "models"}, " ")
    models = ",\n".join(f"  {{\n{fields(m, '   ')}\n  }}" for m in manifest["models"])
    return f"{{\n{head},\n \"models\": [\n{models}\n ]\n}}\n"


def make_in_a_process(name: str, out: Path) -> dict:
    """make(name) in a child process: the converter crashes on some graphs (LSTM in TF 2.21), and a
    crash is recorded as the model's conversion error rather than ending the run."""
    child = subprocess.run([sys.executable, __file__, "--out", str(out), "--child", name],
                           capture_output=True, text=True, check=False)
    if child.returncode == 0:
        return json.loads(child.stdout.strip().splitlines()[-1])
    model = build(name)
    interface = MODELS[name][1]
    how = f"signal {-child.returncode}" if child.returncode < 0 else f"exit code {child.returncode}"
    entry = {"name": name, "keras_layers": keras_layers(model), "interface": interface, "seed": seed_of(name),
             "batch": _batch[0], "tensorflow": tf.__version__, "file": None,
             "conversion_error": f"the converter crashed ({how}) quantizing the model"}
    try:  # what the same model is made of without quantization, for the record
        entry["float_conversion"] = read_back(tf.lite.TFLiteConverter.from_keras_model(model).convert())
    except Exception as exc:  # noqa: BLE001
        entry["float_conversion"] = {"error": " ".join(str(exc).split())[:300]}
    return entry


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "tests" / "converter_models")
    parser.add_argument("--only", nargs="*", choices=sorted(MODELS),
                        help="remake only these (the manifest keeps the rest)")
    parser.add_argument("--child", choices=sorted(MODELS), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    tf.config.experimental.enable_op_determinism()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.child:
        print(json.dumps(make(args.child, args.out)))
        return 0
    manifest_path = args.out / "manifest.json"
    previous = {}
    if args.only and manifest_path.exists():
        previous = {m["name"]: m for m in json.loads(manifest_path.read_text())["models"]}
    entries = dict(previous)
    for name in args.only or MODELS:
        entry = make_in_a_process(name, args.out)
        if not entry["file"]:
            (args.out / f"{name}.tflite").unlink(missing_ok=True)
        entries[name] = entry
        made = f"{entry['bytes']:,} B, {' '.join(entry['operators'])}" if entry["file"] else \
            f"not converted: {entry['conversion_error'][:200]}"
        print(f"{name}: {made}", file=sys.stderr)
    manifest = {
        "made_by": "scripts/make_converter_models.py",
        "tensorflow": tf.__version__,
        "keras": keras.__version__,
        "converter": "tf.lite.TFLiteConverter.from_keras_model, Optimize.DEFAULT, representative dataset of "
                     f"{CALIBRATION_SAMPLES} N(0, 1) samples; TFLITE_BUILTINS_INT8 (int16 interface: "
                     "EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8)",
        "models": [entries[n] for n in MODELS if n in entries],
    }
    manifest_path.write_text(manifest_text(manifest))
    return 0


if __name__ == "__main__":
    sys.exit(main())
