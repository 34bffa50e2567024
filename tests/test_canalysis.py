"""The pool analysis on small programs in TVM's shape: sizes and lives proven from the syntax tree
whatever form the C takes, and every form it cannot follow refused with the reason and the place."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mlfbuild.canalysis.pool import read_usmp_pool

_FRAME = """#include <stdint.h>
static uint8_t global_workspace[4096];
%(globals)s
int32_t tvmgen_t_op(int8_t* p0, int8_t* out, uint8_t* ws) {
%(body)s
  return 0;
}
int32_t tvmgen_t___tvm_main__(int8_t* in, int8_t* out, uint8_t* ws) {
  void* sid_1_let = (&(ws[1024]));
  if (tvmgen_t_op(in, %(argument)s, ws) != 0 ) return -1;
  if (tvmgen_t_op((int8_t*)sid_1_let, out, ws) != 0 ) return -1;
  return 0;
}
int32_t tvmgen_t_run(int8_t* in, int8_t* out) { return tvmgen_t___tvm_main__(in, out, ((uint8_t*)&global_workspace)); }
"""


def _pool(body: str, argument: str = "sid_1_let", globals_: str = ""):
    return read_usmp_pool({"t_lib0.c": _FRAME % {"body": body, "argument": argument, "globals": globals_}}, "t")


def _sizes(pool) -> dict[str, int]:
    assert not pool.problem, pool.problem
    return {r.name: r.size for r in pool.regions}


COPY = "  for (int32_t i = 0; i < 100; ++i) { out[i] = p0[i]; }"
SCRATCH = "  void* tmp_let = (&(ws[0]));\n%s\n  out[0] = ((int32_t*)tmp_let)[0];"


@pytest.mark.parametrize("loop", [
    "for (int32_t i = 0; i < 64; ++i) { ((int32_t*)tmp_let)[i] = 0; }",
    "int32_t i = 0;\n  for (i = 0; i < 64; ++i) { ((int32_t*)tmp_let)[i] = 0; }",
    "int32_t i = 0;\n  while (i < 64) { ((int32_t*)tmp_let)[i] = 0; i = i + 1; }",
    "for (int32_t i = 63; i >= 0; i--) { ((int32_t*)tmp_let)[i] = 0; }",
    "for (int32_t i = 0; 64 > i; i += 1) { ((int32_t*)tmp_let)[i] = 0; }",
    "for (int32_t i = 0; ; ++i) { if (i >= 64) break; ((int32_t*)tmp_let)[i] = 0; }",
    "for (int32_t i = 0; i < 128; ++i) { if (i & 1) continue; if (i < 128) ((int32_t*)tmp_let)[i / 2] = 0; }",
    "for (int32_t i = 0; i < 16; ++i) { int32_t j = i * 4; for (int32_t k = 0; k < 4; ++k) "
    "{ *((int32_t*)tmp_let + j + k) = 0; } }",
    "for (int32_t i = 0; i < 66; ++i) { ((int32_t*)tmp_let)[((1 <= i) && (i < 65)) ? i - 1 : 0] = 0; }",
])
def test_a_region_is_sized_by_its_loops_in_any_form(loop):
    assert _sizes(_pool(SCRATCH % f"  {loop}"))["tvmgen_t_op:tmp_let"] == 256


@pytest.mark.parametrize("argument", ["sid_1_let", "(void*)((int8_t*)sid_1_let + 0)", "((int8_t*)(sid_1_let))",
                                      "&((int8_t*)sid_1_let)[0]", "(int8_t*)sid_1_let + 0"])
def test_a_region_handed_on_in_any_form_is_used_where_it_is_handed(argument):
    pool = _pool(COPY, argument)
    region = next(r for r in pool.regions if r.name == "sid_1_let")
    assert region.size == 100 and region.first < pool.call_spans[1][1] <= region.last


@pytest.mark.parametrize("body, why", [
    ("  for (int32_t i = 0; i < p0[0]; ++i) { out[i] = 0; }", "has no bound"),
    ("  for (int32_t i = 0; i < 10; ++i) { out[i - 1] = 0; }", "may be before its start"),
    ("  if (out == 0) return -1;\n" + COPY, "is compared"),
    ("  extern void f(void*);\n  f(out);", "f is handed a pointer into the pool"),
    ("  static int8_t* keep;\n  keep = out;", "stored in"),
    ("  int8_t** box = &out;", "the address of out"),
    ("  intptr_t n = (intptr_t)out;", "converted to an integer"),
    ("  ws[5] = 1;", "the pool is read or written directly"),
    ("  void* tmp_let = (&(ws[p0[0]]));", "not a literal"),
    ("  back:;\n  goto back;", "`goto back` jumps back"),
    ("  for (int32_t i = 0; i < 4; ++i) { inside:; }\n  goto inside;", "not in the function's outermost block"),
    ("  for (int32_t i = 0; i < 4; ++i) { if (i) goto inside; inside:; }", "not in the function's outermost block"),
    ("  { goto nowhere; }", "`goto nowhere` lands on no label"),
])
def test_what_is_not_followed_keeps_tvms_layout_saying_why_and_where(body, why):
    pool = _pool(body)
    assert why in pool.problem and "(tvmgen_t_op, t_lib0.c:" in pool.problem and not pool.regions


@pytest.mark.parametrize("body, size", [
    # TVM's micro-kernels: `if (...) { ...; goto out; }` skips the general path, and `out:` joins both
    ("  if (p0[0] > 0) goto out_;\n  for (int32_t i = 0; i < 64; ++i) { ((int32_t*)tmp_let)[i] = 0; }\n out_:",
     256),
    ("  if (1 < 2) { ((int32_t*)tmp_let)[0] = 0; goto out_; }\n"
     "  for (int32_t i = 0; i < 100; ++i) { ((int32_t*)tmp_let)[i] = 0; }\n out_:", 4),
    # a switch on a value known to be one case's enters at that case only (falling through still runs on)
    ("  int32_t k = 1;\n  switch (k % 4) {\n  case 1: for (int32_t i = 0; i < 64; ++i) ((int32_t*)tmp_let)[i] = 0;"
     " break;\n  case 3: for (int32_t i = 0; i < 100; ++i) ((int32_t*)tmp_let)[i] = 0; break;\n  }", 256),
    ("  switch (p0[0] % 4) {\n  case 1: for (int32_t i = 0; i < 64; ++i) ((int32_t*)tmp_let)[i] = 0;"
     " break;\n  case 3: for (int32_t i = 0; i < 100; ++i) ((int32_t*)tmp_let)[i] = 0; break;\n  }", 400),
    ("  switch (2) {\n  case 2: ((int32_t*)tmp_let)[3] = 0;\n  case 3: ((int32_t*)tmp_let)[9] = 0; break;\n"
     "  default: ((int32_t*)tmp_let)[99] = 0;\n  }", 40),
    # memcpy's length in sizeof of a type whose size every target agrees on; a long's is 4 or 8 bytes
    ("  memcpy(tmp_let, p0, 64 * sizeof(int32_t));", 256),
    ("  int32_t n = 16;\n  memcpy(tmp_let, p0, n * sizeof(float));", 64),
    ("  memcpy(tmp_let, p0, 16 * sizeof(long));", 128),
])
def test_the_forms_of_tvms_micro_kernels_are_followed(body, size):
    assert _sizes(_pool(SCRATCH % body))["tvmgen_t_op:tmp_let"] == size


def test_a_file_scope_pointer_into_the_pool_is_not_proven():
    pool = _pool("  out[0] = keep[0];", globals_="uint8_t* const keep = &global_workspace[128];")
    assert pool.problem == "global_workspace is used outside tvmgen_t_run (t_lib0.c:3)"


def test_a_buffer_dead_before_another_is_written_shares_its_life_with_nothing_after():
    body = ("  void* a_let = (&(ws[0]));\n  void* b_let = (&(ws[512]));\n"
            "  for (int32_t i = 0; i < 100; ++i) { ((int8_t*)a_let)[i] = p0[i]; }\n"
            "  for (int32_t i = 0; i < 100; ++i) { ((int8_t*)b_let)[i] = ((int8_t*)a_let)[i]; }\n"
            "  for (int32_t i = 0; i < 100; ++i) { out[i] = ((int8_t*)b_let)[i]; }")
    regions = {r.name: r for r in _pool(body).regions}
    a, b = regions["tvmgen_t_op:a_let"], regions["tvmgen_t_op:b_let"]
    assert a.last < b.last and b.first > a.first


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=" ()[]{};,+-*&<>=!?:0123456789ijpoutwsk_\n", max_size=60))
def test_any_text_in_an_operator_is_proven_or_refused_without_crashing(text):
    pool = _pool(text)
    assert pool.problem or all(r.size >= 0 and r.first <= r.last for r in pool.regions)


_RESIDUAL = """#include <stdint.h>
#include <arm_nnfunctions.h>
static uint8_t global_workspace[8192];
int32_t tvmgen_t_copy(int8_t* p0, int8_t* out, uint8_t* ws) {
  for (int32_t i = 0; i < 1024; ++i) { out[i] = p0[i]; }
  return 0;
}
int32_t tvmgen_t_cmsis_nn_main_0(int8_t* a_, int8_t* b_, int8_t* out_, uint8_t* ws) {
  arm_cmsis_nn_status status = arm_elementwise_add_s8(a_, b_, 128, 1073741824, 0, 128, 1073741824, 0, 20, out_,
                                                      -128, 1073741824, -19, -128, 127, %(block)s);
  switch (!status) {
  case ARM_CMSIS_NN_SUCCESS: break;
  case ARM_CMSIS_NN_ARG_ERROR: return -1;
  case ARM_CMSIS_NN_NO_IMPL_ERROR: return -1;
  }
  return 0;
}
int32_t tvmgen_t___tvm_main__(int8_t* in, int8_t* out, uint8_t* ws) {
  void* sid_1_let = (&(ws[0]));
  void* sid_2_let = (&(ws[1024]));
  void* sid_3_let = (&(ws[2048]));
  if (tvmgen_t_copy(in, sid_1_let, ws) != 0 ) return -1;
  if (tvmgen_t_copy(sid_1_let, sid_2_let, ws) != 0 ) return -1;
  if (tvmgen_t_cmsis_nn_main_0(sid_1_let, sid_2_let, sid_3_let, ws) != 0 ) return -1;
  if (tvmgen_t_copy(sid_3_let, out, ws) != 0 ) return -1;
  return 0;
}
int32_t tvmgen_t_run(int8_t* in, int8_t* out) { return tvmgen_t___tvm_main__(in, out, ((uint8_t*)&global_workspace)); }
"""


def test_an_element_wise_add_is_sized_by_its_block_size_from_the_librarys_prototype(third_party_dir):
    """The residual pattern (ic): arm_elementwise_add_s8's operands carry no cmsis_nn_dims; the
    prototype's block_size states their length, so the pool is re-planned (it was kept: "not stated")."""
    from conftest import THIRD_PARTY_ENV, required_folder
    from mlfbuild.project.pool_plan import plan_usmp_pool

    include = (required_folder(third_party_dir / "cmsis-nn-v6.0.0", "CMSIS-NN v6.0.0", THIRD_PARTY_ENV) / "Include",)
    pool = read_usmp_pool({"t_lib0.c": _RESIDUAL % {"block": "1024"}}, "t", include)
    regions = {r.name: r for r in pool.regions}
    assert not pool.problem and {regions[n].size for n in ("sid_1_let", "sid_2_let", "sid_3_let")} == {1024}
    assert regions["sid_1_let"].last >= regions["sid_3_let"].first  # the skip connection lives until the add
    plan = plan_usmp_pool({"t_lib0.c": _RESIDUAL % {"block": "1024"}}, "t", include_dirs=include)
    assert plan.replanned and (plan.tvm_bytes, plan.bytes, plan.floor_bytes) == (8192, 3072, 3072)
    unbounded = read_usmp_pool({"t_lib0.c": _RESIDUAL % {"block": "(int32_t)a_[0]"}}, "t", include)
    assert "may be negative or unbounded" in unbounded.problem and "arm_elementwise_add_s8" in unbounded.problem


def test_a_source_the_preprocessor_refuses_names_the_file_and_the_compiler_s_error():
    from mlfbuild.canalysis.cfront import CFrontError, parse_sources

    with pytest.raises(CFrontError) as caught:
        parse_sources({"codegen/host/src/lib0.c": '#include "no_such_header.h"\nint x;\n'})
    message = str(caught.value)
    assert message.startswith("codegen/host/src/lib0.c: cannot preprocess: ")
    assert "no_such_header.h" in message and "error" in message and "\n" not in message


def test_an_argument_set_from_a_variable_named_like_a_parameter_of_the_callee_is_followed():
    """`x = a + 1; helper(x, a)` with helper(int32_t a, int32_t x): the caller's expression for x names
    the caller's a, not the callee's (re-evaluated in the callee it recursed without end)."""
    globals_ = "static inline int32_t helper(int32_t a, int32_t x) { return a + x; }"
    body = ("  int32_t a = 3;\n  int32_t x = a + 1;\n  int32_t y = helper(x, a);\n"
            "  for (int32_t i = 0; i < 10; ++i) { out[i] = (int8_t)(p0[i] + y); }")
    assert not _pool(body, globals_=globals_).problem


_SEALED_HELPERS = """static inline int32_t scaled(int32_t value, int32_t shift) {
  int32_t sum = 0;
  for (int32_t k = 0; k < 4; ++k) { sum += (value << k) >> shift; }
  return sum;
}
static inline int32_t twice_scaled(int32_t value) { return scaled(value, 1) + scaled(value, 2); }
static inline int32_t through(int8_t* data, int32_t index) {
  int32_t sum = 0;
  for (int32_t k = 0; k < 4; ++k) { sum += data[index + k]; }
  return sum;
}"""


def _calls(helper: str, sites: int) -> str:
    lines = [f"  out[{i}] = (int8_t){helper % {'i': i}};" for i in range(sites)]
    return "\n".join(lines) + "\n" + COPY


def test_a_sealed_helper_is_followed_once_per_argument_ranges_and_one_that_takes_a_pointer_every_time(monkeypatch):
    """A helper of integers alone that names neither the pool nor the allocator does the same whatever
    the call: 60 calls with the same ranges cost one. A helper handed a pointer is followed at every
    call, its reads of the pool each counted."""
    from mlfbuild.canalysis import interpreter

    monkeypatch.setattr(interpreter, "WORK_LIMIT", 4_000)
    sealed = _pool(_calls("twice_scaled(p0[%(i)s])", 60), globals_=_SEALED_HELPERS)
    assert _sizes(sealed)["sid_1_let"] == 100
    followed = _pool(_calls("through(p0, %(i)s)", 60), globals_=_SEALED_HELPERS)
    assert "more than 4,000 expressions" in followed.problem
