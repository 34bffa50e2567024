"""TVM's identity copy loops run as memcpy (canalysis/copies.py): found from the syntax tree, held to
the model's reference on the host, and the same bytes as TVM's loop for every overlap of the buffers."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from conftest import cli
from mlfbuild.canalysis.copies import identity_copies, rewrite
from mlfwriter import ReshapeModel, tar_tree


def _write(tmp_path: Path, index: str) -> tuple[Path, Path]:
    model = ReshapeModel(index=index)
    inputs = np.random.default_rng(30).integers(-128, 128, size=(3, 1, 16), dtype=np.int8)
    npz = tmp_path / f"{index}.npz"
    np.savez(npz, input=inputs, output_0=np.stack([model.reference(x) for x in inputs]))
    return tar_tree(model.files(), tmp_path / f"{index}.tar"), npz


@pytest.mark.parametrize("index", ["identity", "transpose"])
def test_only_an_identity_copy_becomes_memcpy_and_outputs_match_the_reference(tmp_path, index):
    mlf, npz = _write(tmp_path, index)
    out = tmp_path / "out"
    built = cli("build", str(mlf), "-b", "host", "-o", str(out))
    assert built.returncode == 0, built.stdout + built.stderr
    replaced = json.loads((out / "build.json").read_text())["models"][0].get("replaced_loops")
    code = (out / "project" / "model" / "codegen" / "host" / "src" / "reshape_lib1.c").read_text()
    if index == "identity":
        assert replaced == [{"function": "tvmgen_reshape_fused_reshape", "kind": "identity_copy", "replacement": "memcpy",
                             "destination": "T_reshape", "source": "p0", "element": "int8_t", "elements": 16,
                             "bytes": 16, "reason": "T_reshape[i] = p0[i] for every i < 16, each once (int8_t, 16 B)"}]
        assert "memcpy(T_reshape, p0, 16u)" in code
        assert "tvmgen_reshape_fused_reshape: identity copy -> memcpy" in built.stdout + built.stderr
        sized = cli("size", str(out)).stdout
        assert "TVM's loops replaced at build time (1)" in sized and "16 B per call" in sized, sized
    else:
        assert replaced is None and "memcpy" not in code
    ran = cli("run", str(out), "--reference", str(npz))
    assert ran.returncode == 0 and "3/3 exact" in ran.stdout, ran.stdout + ran.stderr


_LOOP = """int32_t {name}({dst_type}* dst, {src_type}* src, uint8_t* pool) {{
  for (int32_t o = 0; o < 4; ++o) {{
    for (int32_t i = 0; i {cond}; ++i) {{
      int32_t k = ((o * 4) + i);
      dst[{written}] = src[{read}];
    }}
  }}
  return 0;
}}
"""


def _case(name: str, written: str = "k", read: str = "k", cond: str = "< 4", dst_type: str = "int8_t",
          src_type: str = "int8_t") -> str:
    return _LOOP.format(name=name, written=written, read=read, cond=cond, dst_type=dst_type, src_type=src_type)


def test_only_index_maps_that_are_the_identity_are_copies():
    """Each variant differs from an identity copy in one thing the criterion must catch."""
    source = "#include <stdint.h>\n" + "".join([
        _case("copy"), _case("copy_inclusive_bound", cond="<= 3"),
        _case("rotated", read="((k + 1) % 16)"), _case("shifted", written="(k + 1)", read="(k + 1)"),
        _case("halved", written="(k / 2)", read="(k / 2)"), _case("transposed", written="((i * 4) + o)"),
        _case("widened", dst_type="int16_t"), _case("same_buffer").replace("dst[", "src["),
        _case("unknown_bound", cond="< pool[0]"), _case("wrapping", written="(k * 1073741824)", read="(k * 1073741824)"),
        _case("negative_division", written="((k - 8) / 2 + 4)", read="((k - 8) / 2 + 4)"),
        "#define FOUR 4\n" + _case("macro", cond="< FOUR")])
    found = {copy.function: copy.count for copy in identity_copies({"ops.c": source})}
    assert found == {"copy": 16, "copy_inclusive_bound": 16}


def test_two_functions_with_the_same_loop_are_each_replaced():
    source = "#include <stdint.h>\n" + _case("copy") + _case("copy_1")
    copies = identity_copies({"ops.c": source})
    replaced, done = rewrite(source, copies)
    assert done == copies and len(copies) == 2 and replaced.count("memcpy(dst, src, 16u)") == 2


def test_the_replacement_does_what_tvms_loop_does_for_every_overlap(tmp_path):
    """Disjoint buffers take memcpy; overlapping ones (where memcpy, and memmove too, would differ from
    the forward loop) keep TVM's loop: the same bytes as the loop at every relative position."""
    source = "#include <stdint.h>\n" + _case("copy")
    (copy,) = identity_copies({"ops.c": source})
    replaced, done = rewrite(source, [copy])
    assert done == [copy] and "memcpy(dst, src, 16u)" in replaced
    (tmp_path / "replaced.c").write_text(replaced)
    (tmp_path / "original.c").write_text("#define copy original_copy\n" + source)
    (tmp_path / "main.c").write_text("""#include <stdint.h>
#include <stdio.h>
#include <string.h>
int32_t copy(int8_t*, int8_t*, uint8_t*);
int32_t original_copy(int8_t*, int8_t*, uint8_t*);
int main(void) {
  int8_t a[64], b[64], c[64];
  int differ = 0, memmove_differs = 0;
  for (int shift = -20; shift <= 20; shift++) {
    for (int k = 0; k < 64; k++) a[k] = b[k] = c[k] = (int8_t)(k * 37 + 11);
    original_copy(a + 24 + shift, a + 24, 0);
    copy(b + 24 + shift, b + 24, 0);
    memmove(c + 24 + shift, c + 24, 16);
    differ += memcmp(a, b, 64) != 0;
    memmove_differs += memcmp(a, c, 64) != 0;
  }
  printf("%d %d\\n", differ, memmove_differs);
  return 0;
}
""")
    subprocess.run(["gcc", "-std=gnu11", "-O2", "-Wall", "-Werror", *(str(tmp_path / f) for f in ("main.c", "original.c",
                    "replaced.c")), "-o", str(tmp_path / "compare")], check=True)
    ran = subprocess.run([str(tmp_path / "compare")], capture_output=True, text=True, timeout=30)
    differ, memmove_differs = map(int, ran.stdout.split())
    assert ran.returncode == 0 and differ == 0 and memmove_differs == 15, ran.stdout  # shifts 1..15: the loop repeats
