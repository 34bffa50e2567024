"""TVM's USMP workspace pool re-planned at the liveness floor: regions read from the generated C of
every shared AOT USMP fixture, the rewritten code replayed call by call (independently of the
planner), TVM's layout kept with a reason wherever a size or lifetime is not certain."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from conftest import THIRD_PARTY_ENV, buildable, entry_id, manifest_entries, references_for, required_folder
from mlfbuild.canalysis.cfront import HeaderSearch, Preprocessor
from mlfbuild.canalysis.pool import read_usmp_pool
from mlfbuild.mlf.reader import read_mlf
from mlfbuild.project.lowering.base import module_sources
from mlfbuild.project.pool_plan import header_dirs, plan_usmp_pool
from mlfbuild.size import format_html, format_markdown, format_text, size_report

USMP_AOT = [item for item in manifest_entries() if item[1].get("executor") == "aot" and item[1].get("usmp")]
KWS_CMSIS_NN = ("tvm-0.13/kws_aot_cmsisnn", "tvm-0.18/kws_aot_cmsisnn", "tvm-0.18/kws_aot_cmsisnn_m4")
CARVE = re.compile(r"void\*\s*(\w+)\s*=\s*\(&\(global_workspace_\d+_var\[(\d+)\]\)\);")


def cmsis_nn_tree(third_party_dir):
    return required_folder(third_party_dir / "cmsis-nn-v6.0.0", "CMSIS-NN v6.0.0", THIRD_PARTY_ENV)


def _module_sources(fixtures_dir, tmp_path, name: str, module: str | None = None, third_party_dir=None):
    """The module's name, its sources, and where its headers are (CMSIS-NN's from the shared tree)."""
    lib = read_mlf(fixtures_dir / f"{name}.tar", tmp_path / "mlf")
    chosen = lib.modules[0] if module is None else lib.module(module)
    tree = cmsis_nn_tree(third_party_dir) if chosen.cmsis_nn and third_party_dir else None
    return chosen.name, module_sources(chosen, lib.root), header_dirs(lib.root, tree)


def _replay(sources: dict[str, str], module: str, sizes: dict[str, int]) -> tuple[int, list[str]]:
    """The pool's declared length, and every pair of the main's regions that share bytes while both
    are live, found from the rewritten main alone: a region is live from the first call line that
    names it to the last."""
    text = "\n".join(sources.values())
    length = int(re.search(r"static uint8_t global_workspace\[(\d+)\];", text).group(1))
    main = re.search(rf"int32_t tvmgen_{module}___tvm_main__\([^)]*\) \{{(.*?)\n\}}", text, re.S).group(1)
    offsets = {name: int(offset) for name, offset in CARVE.findall(main)}
    calls = [line for line in main.split("\n") if line.strip().startswith("if (tvmgen_")]
    live = {name: [i for i, line in enumerate(calls) if re.search(rf"\b{name}\b", line)] for name in offsets}
    clashes = []
    for a in offsets:
        for b in offsets:
            together = a < b and set(range(live[a][0], live[a][-1] + 1)) & set(range(live[b][0], live[b][-1] + 1))
            if together and offsets[a] < offsets[b] + sizes[b] and offsets[b] < offsets[a] + sizes[a]:
                clashes.append(f"{a}/{b}")
    assert all(offsets[name] + sizes[name] <= length for name in offsets)
    return length, clashes


@pytest.mark.parametrize("name", KWS_CMSIS_NN)
def test_kws_cmsis_nn_pool_is_replanned_at_the_floor(fixtures_dir, third_party_dir, tmp_path, name):
    module, sources, headers = _module_sources(fixtures_dir, tmp_path, name, third_party_dir=third_party_dir)
    pool = plan_usmp_pool(sources, module, include_dirs=headers)
    # TVM placed the nine 8,000-byte activations end to end; at most two are live at any call.
    assert (pool.tvm_bytes, pool.bytes, pool.floor_bytes, pool.replanned) == (72_000, 16_000, 16_000, True)
    sizes = {r.name: r.size for r in read_usmp_pool(sources, module, headers).regions}
    assert sorted(sizes.values()) == [12, 64] + [8_000] * 9  # cmsis_nn_dims of each call's output
    length, clashes = _replay({**sources, **pool.sources}, module, sizes)
    assert length == 16_000 and clashes == []
    # Only offsets and the pool's length change: the code is otherwise TVM's, byte for byte.
    for path, text in pool.sources.items():
        assert re.sub(r"\d+", "N", text) == re.sub(r"\d+", "N", sources[path])


def test_cmsis_nn_scratch_buffers_are_regions_of_the_pool_live_during_their_call(fixtures_dir, third_party_dir,
                                                                                  tmp_path):
    module, sources, headers = _module_sources(fixtures_dir, tmp_path, "tvm-0.18/kws_aot_cmsisnn_m4",
                                               third_party_dir=third_party_dir)
    pool = plan_usmp_pool(sources, module, {"tvmgen_kws_cmsis_nn_main_9": 256, "not_an_operator": 64}, headers)
    assert (pool.bytes, pool.floor_bytes) == (16_000, 16_000)  # the pooling runs while only 8,064 B are live
    scratch = next(b for b in pool.plan.buffers if b.name == "tvmgen_kws_cmsis_nn_main_9:scratch")
    offset = pool.plan.offsets[scratch.name]
    assert pool.scratch == {"tvmgen_kws_cmsis_nn_main_9": f"(void*)(&(global_workspace_21_var[{offset}]))"}
    assert scratch.size == 256 and pool.plan.conflicts() == []
    live = [b for b in pool.plan.buffers if b is not scratch and b.first <= scratch.last and scratch.first <= b.last]
    assert {b.name for b in live} == {"sid_63_let", "sid_64_let"}  # the call's input and output


@pytest.mark.parametrize("item", USMP_AOT, ids=entry_id)
def test_every_usmp_fixture_is_replanned_or_says_why_and_never_grows(fixtures_dir, third_party_dir, tmp_path, item):
    fixture_set, entry = item
    lib = read_mlf(fixtures_dir / fixture_set / entry["file"], tmp_path / "mlf")
    for module in lib.modules:
        tree = cmsis_nn_tree(third_party_dir) if module.cmsis_nn else None
        pool = plan_usmp_pool(module_sources(module, lib.root), module.name, include_dirs=header_dirs(lib.root, tree),
                              tvm_bytes=module.workspace_bytes())
        assert pool is not None and pool.bytes <= pool.tvm_bytes
        if pool.replanned:
            assert pool.floor_bytes <= pool.bytes < pool.tvm_bytes and not pool.reason
            assert pool.plan.conflicts() == []
        else:
            assert pool.reason and pool.bytes == pool.tvm_bytes and not pool.sources
        json.dumps(pool.to_json())


def test_vww_keeps_its_one_scratch_buffer_at_the_size_tvm_stated(fixtures_dir, third_party_dir, tmp_path):
    module, sources, headers = _module_sources(fixtures_dir, tmp_path, "tvm-0.18/vww_aot_cmsisnn_m4",
                                               third_party_dir=third_party_dir)
    read = read_usmp_pool(sources, module, headers)
    regions = {r.name: r for r in read.regions}
    scratch = regions["tvmgen_vww_cmsis_nn_main_0:context_buffer_0_let"]
    _, first_call_starts, first_call_ends = read.operators["tvmgen_vww_cmsis_nn_main_0"]
    assert scratch.size == 108 and first_call_starts <= scratch.first <= scratch.last <= first_call_ends
    assert scratch.last < min(r.first for r in regions.values() if r.name.startswith("sid_") and r.first > first_call_ends)
    pool = plan_usmp_pool(sources, module, include_dirs=headers)
    assert pool.replanned and pool.bytes < pool.tvm_bytes == 64_512
    _, clashes = _replay({**sources, **pool.sources}, module, {r.name: r.size for r in regions.values()})
    assert clashes == []


def test_a_pool_declared_too_small_is_kept_and_its_producer_named(fixtures_dir, tmp_path):
    """A region past the pool's declared end: the layout is kept, and the reason names what laid it out
    (an imported MLF's is mlfbuild's importer's, never TVM's)."""
    module, sources, headers = _module_sources(fixtures_dir, tmp_path, "tvm-0.13/kws_aot_c_unpacked_usmp")
    path = next(p for p, text in sources.items() if "global_workspace[104192]" in text)
    edited = {**sources, path: sources[path].replace("global_workspace[104192]", "global_workspace[64]")}
    for producer in ("TVM", "mlfbuild's importer"):
        pool = plan_usmp_pool(edited, module, include_dirs=headers, producer=producer)
        assert not pool.replanned and pool.reason.endswith(f"reaches beyond {producer}'s pool as read"), pool.reason


def test_a_region_without_a_stated_size_keeps_tvms_layout(fixtures_dir, third_party_dir, tmp_path):
    module, sources, headers = _module_sources(fixtures_dir, tmp_path, "tvm-0.18/kws_aot_cmsisnn_m4",
                                               third_party_dir=third_party_dir)
    path = next(p for p, text in sources.items() if "tvmgen_kws_cmsis_nn_main_0(int8_t* input_" in text and "{" in text)
    edited = {**sources, path: sources[path].replace("cmsis_nn_dims output_dims = {1,25,5,64};",
                                                     "cmsis_nn_dims output_dims; output_dims.n = 1;", 1)}
    pool = plan_usmp_pool(edited, module, include_dirs=headers)
    assert not pool.replanned and pool.bytes == 72_000 and pool.sources == {}
    assert "not proven" in pool.reason and "arm_depthwise_conv_wrapper_s8" in pool.reason
    assert "tvmgen_kws_cmsis_nn_main_0" in pool.reason and f"{path}:" in pool.reason


@pytest.mark.parametrize("name", ["tvm-0.13/kws_aot_c_unpacked_usmp", "tvm-0.18/kws_aot_c_unpacked_usmp"])
def test_plain_c_operators_are_sized_from_their_loops_and_replanned_at_the_floor(fixtures_dir, tmp_path, name):
    """TVM placed kws's plain C regions in 104,192 B; their loops bound every index, and the statements
    that touch each region give lifetimes inside an operator (an input copied into a padded buffer is
    dead before the output is written), so 56,192 B — the floor — holds them."""
    module, sources, headers = _module_sources(fixtures_dir, tmp_path, name)
    regions = {r.name: r for r in read_usmp_pool(sources, module, headers).regions}
    assert regions["sid_1_let"].size == 490 * 2  # the int16 input after the first cast: 49 x 10
    assert regions["sid_10_let"].size == 125 * 64 * 4  # the int32 output of the last convolution
    assert regions["tvmgen_kws_fused_nn_avg_pool2d_cast:pool_sum_let"].size == 64 * 4
    pool = plan_usmp_pool(sources, module, include_dirs=headers)
    assert (pool.tvm_bytes, pool.bytes, pool.floor_bytes, pool.replanned) == (104_192, 56_192, 56_192, True)
    assert pool.plan.conflicts() == []


def test_code_that_cannot_be_read_keeps_tvms_layout_and_says_why(fixtures_dir, tmp_path):
    """kws's arm_cpu schedule includes the toolchain's <arm_acle.h>, which the host preprocessor does
    not have: read as host code, nothing is read, so TVM's layout stays, with the reason."""
    module, sources, headers = _module_sources(fixtures_dir, tmp_path, "tvm-0.18/kws_aot_c_cm4_usmp")
    pool = plan_usmp_pool(sources, module, include_dirs=headers, tvm_bytes=65_920)
    assert not pool.replanned and pool.bytes == pool.tvm_bytes == 65_920
    assert "cannot be read" in pool.reason and "arm_acle.h" in pool.reason


@pytest.mark.cross
def test_tvms_dsp_schedule_read_by_the_cross_compiler_is_replanned(fixtures_dir, tmp_path):
    """Read as the build compiles it (arm-none-eabi-gcc with the M4F's flags: its <arm_acle.h>), kws's
    arm_cpu schedule is proven from its syntax tree: the micro-kernels' memcpy lengths (sizeof), their
    `goto out` and the `switch (K % 4)` on a known K are followed."""
    module, sources, headers = _module_sources(fixtures_dir, tmp_path, "tvm-0.18/kws_aot_c_cm4_usmp")
    m4f = HeaderSearch(headers, Preprocessor(
        "arm-none-eabi-gcc", ("-mcpu=cortex-m4", "-mthumb", "-mfpu=fpv4-sp-d16", "-mfloat-abi=hard")))
    pool = plan_usmp_pool(sources, module, include_dirs=m4f)
    assert (pool.tvm_bytes, pool.bytes, pool.floor_bytes, pool.replanned) == (65_920, 48_384, 48_384, True)
    assert pool.plan.conflicts() == []
    regions = {r.name: r.size for r in read_usmp_pool(sources, module, m4f).regions}
    assert regions["sid_15_let"] == 64  # the dense layer's K % 4 == 1 path reads one byte per step


def test_a_tvm_layout_that_disagrees_with_the_reading_is_kept(fixtures_dir, third_party_dir, tmp_path):
    """sid_7 and sid_14 are both live at the second call; if TVM had placed them on the same bytes
    it would know something this reading does not, so nothing is re-planned."""
    module, sources, headers = _module_sources(fixtures_dir, tmp_path, "tvm-0.18/kws_aot_cmsisnn_m4",
                                               third_party_dir=third_party_dir)
    path = next(p for p, text in sources.items() if "sid_14_let = (&(global_workspace_1_var[56000]))" in text)
    edited = {**sources, path: sources[path].replace("sid_14_let = (&(global_workspace_1_var[56000]))",
                                                     "sid_14_let = (&(global_workspace_1_var[64000]))")}
    pool = plan_usmp_pool(edited, module, include_dirs=headers)
    assert not pool.replanned and "overlaps" in pool.reason and "sid_14_let" in pool.reason


def test_the_packed_interface_keeps_tvms_layout_and_says_why(fixtures_dir, tmp_path):
    module, sources, headers = _module_sources(fixtures_dir, tmp_path, "tvm-0.13/cnn_aot_packed_usmp")
    pool = plan_usmp_pool(sources, module, include_dirs=headers)
    assert not pool.replanned and pool.bytes == 31_360
    assert "a pointer into the pool is stored in" in pool.reason and "tvmgen_default_run" in pool.reason


@pytest.mark.cross
@pytest.mark.qemu
def test_kws_on_cmsis_nn_fits_in_20000_bytes_of_ram_and_the_report_shows_the_pool(fixtures_dir, third_party_dir,
                                                                                 build_firmware):
    tree = required_folder(third_party_dir / "cmsis-nn-v6.0.0", "CMSIS-NN v6.0.0", THIRD_PARTY_ENV)
    out = build_firmware(fixtures_dir / "tvm-0.18" / "kws_aot_cmsisnn_m4.tar", "mps2-an386", cmsis_nn=tree)
    record = json.loads((out / "build.json").read_text())
    report = size_report(out / "firmware.elf", record)
    assert report.ram.used <= 20_000  # 74,448 B with TVM's pool
    pool = report.to_json()["modules"][0]["workspace_pool"]
    live = pool.pop("live_bytes")  # the bytes live during each operator call: the peak is the pool's
    assert pool == {"kind": "usmp", "tvm_bytes": 72_000, "bytes": 16_000, "floor_bytes": 16_000, "replanned": True,
                    "reason": None}
    assert len(live) >= 9 and max(live) == 16_000  # kws: a convolution, four separable blocks, pool, FC, softmax
    assert "live over the inference:" in format_text(report)
    assert "TVM 72,000 B · mlfbuild 16,000 B · floor 16,000 B" in format_text(report)
    assert "| kws | USMP global_workspace | 72,000 | 16,000 | 16,000 |" in format_markdown(report)
    assert "<h2>Workspace pools</h2>" in format_html(report)
    assert any("re-planned: 72,000 B -> 16,000 B" in note for note in record["notes"])
    # The 256 B the DSP average pooling needs is a region of the pool, live during its call only; so is
    # the buffer of the first layer's convolution (TVM's depthwise call, replaced at build time).
    assert record["cmsis_nn"]["scratch"]["in_workspace_pool"] == ["tvmgen_kws_cmsis_nn_main_0",
                                                                  "tvmgen_kws_cmsis_nn_main_9"]
    assert record["cmsis_nn"]["scratch"]["region_bytes"] == 0


# --- TVMBackendAllocWorkspace without USMP: a stack-like pool at the peak the code reaches ---------

def test_a_callee_peak_counts_on_top_of_what_is_held_where_it_is_called():
    from mlfbuild.canalysis.allocator import allocation_peaks

    code = ("#include <tvm/runtime/c_backend_api.h>\n"
            "int32_t g(void* p) { void* x = TVMBackendAllocWorkspace(1, 0, (uint64_t)48, 0, 8); "
            "TVMBackendFreeWorkspace(1, 0, x); return 0; }\n"
            "int32_t h(void) { void* y = TVMBackendAllocWorkspace(1, 0, (uint64_t)100, 0, 8); "
            "TVMBackendFreeWorkspace(1, 0, y); return 0; }\n"
            "int32_t f(void) { void* a = TVMBackendAllocWorkspace(1, 0, (uint64_t)10, 0, 8);\n  g(a);\n"
            "  TVMBackendFreeWorkspace(1, 0, a);\n  h();\n  return 0; }\n")
    peaks, _ = allocation_peaks({"lib.c": code})
    assert peaks["f"] == max(16 + 48, 112)


@pytest.mark.parametrize("name, tvm, peak", [("tvm-0.18/kws_aot_cmsisnn_nousmp", 16_080, 16_080),
                                             ("tvm-0.13/kws_aot_c_unpacked_nousmp", 105_360, 105_360),
                                             ("tvm-0.13/mlp_aot_c_unpacked_nousmp", 464, 384)])
def test_the_allocator_pool_is_the_peak_of_the_code(fixtures_dir, third_party_dir, tmp_path, name, tvm, peak):
    from mlfbuild.project import template_environment
    from mlfbuild.project.lowering import lowering_for

    lib = read_mlf(fixtures_dir / f"{name}.tar", tmp_path / "mlf")
    module = lib.modules[0]
    headers = header_dirs(lib.root, cmsis_nn_tree(third_party_dir) if module.cmsis_nn else None)
    lowered = lowering_for(module).lower(module, lib.root, template_environment(), headers)
    assert lowered.workspace_bytes == peak  # was TVM's figure + 16 B per allocation site
    assert lowered.pool.to_json() == {"kind": "allocator", "producer": "TVM", "tvm_bytes": tvm, "bytes": peak, "floor_bytes": peak,
                                      "replanned": False, "reason": None, "regions": []}


@pytest.mark.qemu
def test_kws_without_usmp_runs_at_its_floor(fixtures_dir, third_party_dir, build_firmware):
    tree = required_folder(third_party_dir / "cmsis-nn-v6.0.0", "CMSIS-NN v6.0.0", THIRD_PARTY_ENV)
    out = build_firmware(fixtures_dir / "tvm-0.18" / "kws_aot_cmsisnn_nousmp.tar", "mps2-an386", cmsis_nn=tree)
    from mlfbuild.run import run_build

    result = run_build(out, references=[str(fixtures_dir / "tvm-0.18" / "kws.npz")], atol=1, timeout=60)
    assert result.status == "pass"
    assert result.models[0].workspace_peak == 16_080 == json.loads((out / "build.json").read_text())["workspace_bytes"]


@pytest.mark.qemu
def test_kws_replanned_fits_the_64k_board_and_still_matches_bit_for_bit(fixtures_dir, build_firmware):
    """TVM's 104,192 B pool did not fit lm3s6965evb's 64 KiB of RAM; at the floor the model runs there."""
    from mlfbuild.run import run_build

    out = build_firmware(fixtures_dir / "tvm-0.13" / "kws_aot_c_unpacked_usmp.tar", "lm3s6965evb")
    result = run_build(out, references=[str(fixtures_dir / "tvm-0.13" / "kws.npz")], timeout=60)
    assert result.status == "pass" and result.models[0].comparisons[0].max_abs_error == 0


@pytest.mark.cross
@pytest.mark.qemu
def test_tvms_dsp_schedule_runs_in_its_replanned_pool_bit_for_bit(fixtures_dir, build_firmware):
    """kws on TVM's arm_cpu DSP schedule, in the pool re-planned from the cross compiler's reading
    (48,384 B instead of TVM's 65,920 B), computes TVM's reference exactly on the M4F."""
    from mlfbuild.run import run_build

    out = build_firmware(fixtures_dir / "tvm-0.18" / "kws_aot_c_cm4_usmp.tar", "mps2-an386")
    pool = json.loads((out / "build.json").read_text())["models"][0]["workspace_pool"]
    assert (pool["tvm_bytes"], pool["bytes"], pool["replanned"]) == (65_920, 48_384, True)
    result = run_build(out, references=[str(fixtures_dir / "tvm-0.18" / "kws.npz")], timeout=60)
    assert result.status == "pass" and result.models[0].comparisons[0].max_abs_error == 0


@pytest.mark.cross
def test_the_build_says_what_became_of_the_pool_and_why(fixtures_dir, tmp_path):
    from conftest import cli

    mlf = fixtures_dir / "tvm-0.18" / "kws_aot_c_cm4_usmp.tar"
    result = cli("build", str(mlf), "-b", "mps2-an386", "-o", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    output = result.stdout + result.stderr
    assert "kws: USMP workspace pool re-planned: 65,920 B -> 48,384 B (floor 48,384 B" in output
    sized = cli("size", str(tmp_path / "out"))
    assert "TVM 65,920 B · mlfbuild 48,384 B" in sized.stdout


@pytest.mark.cross
def test_a_workspace_pool_full_at_its_peak_is_not_a_warning(fixtures_dir, build_firmware):
    """The allocator's pool is sized at the peak the code reaches: a run that fills it is the plan."""
    out = build_firmware(fixtures_dir / "tvm-0.13" / "mlp_aot_c_unpacked_nousmp.tar", "mps2-an386")
    report = size_report(out / "firmware.elf", json.loads((out / "build.json").read_text()),
                         measured={"workspace_peak": 384})
    assert report.measured[0]["percent"] == 100.0 and not report.warnings
    over = size_report(out / "firmware.elf", json.loads((out / "build.json").read_text()),
                       measured={"workspace_peak": 400})
    assert any("exceeds" in warning for warning in over.warnings)


_KWS_M4 = {}


def _kws_m4_sources(fixtures_dir, third_party_dir, tmp_path_factory):
    if not _KWS_M4:
        lib = read_mlf(fixtures_dir / "tvm-0.18" / "kws_aot_cmsisnn_m4.tar", tmp_path_factory.mktemp("mlf"))
        _KWS_M4["sources"] = module_sources(lib.modules[0], lib.root)
        _KWS_M4["headers"] = header_dirs(lib.root, cmsis_nn_tree(third_party_dir))
    return dict(_KWS_M4["sources"]), _KWS_M4["headers"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from([0, 1, 2]), st.integers(0, 10**6), st.integers(0, 40),
                          st.sampled_from(["", "0", "{", "}", ";", "global_workspace_1_var", "(", "\n", "sid_7_let"])),
                min_size=1, max_size=4))
@example([(1, 0, 0, "}")])
@example([(2, 50869, 10, "(")])  # a "(" for a parameter's name once went into a pattern
def test_mangled_generated_code_is_replanned_soundly_or_kept(fixtures_dir, third_party_dir, tmp_path_factory, edits):
    """TVM's code is input: cut or spliced anywhere, the reader keeps TVM's layout with a reason, or
    re-plans into a pool whose replay shows no overlap — it never crashes."""
    sources, headers = _kws_m4_sources(fixtures_dir, third_party_dir, tmp_path_factory)
    paths = sorted(sources)
    for file_index, position, length, text in edits:
        path = paths[file_index % len(paths)]
        at = position % (len(sources[path]) + 1)
        sources[path] = sources[path][:at] + text + sources[path][at + length:]
    pool = plan_usmp_pool(sources, "kws", include_dirs=headers)
    if pool is None:
        return
    assert pool.bytes <= pool.tvm_bytes
    if pool.replanned:
        assert pool.plan.conflicts() == [] and not pool.reason
    else:
        assert pool.reason and not pool.sources


_ALLOCATING = [item for item in manifest_entries() if item[1].get("executor") == "aot" and not item[1].get("usmp")
               and buildable(item[1], "mps2-an386")]


@pytest.mark.qemu
@pytest.mark.exhaustive
@pytest.mark.parametrize("item", _ALLOCATING, ids=entry_id)
def test_every_allocator_pool_holds_what_the_running_code_allocates(fixtures_dir, build_firmware, item):
    """The dynamic check of the allocator's plan: crt/src/backend.c refuses an allocation past its pool
    (the run fails) and measures the peak the code reaches; sized at the proven peak, each fixture runs,
    matches TVM's reference and fills its pool exactly."""
    from mlfbuild.run import run_build

    fixture_set, entry = item
    out = build_firmware(fixtures_dir / fixture_set / entry["file"], "mps2-an386")
    result = run_build(out, references=references_for(fixture_set, entry, fixtures_dir), atol=1e-5, timeout=120)
    planned = json.loads((out / "build.json").read_text())["workspace_bytes"]
    assert result.status == "pass" and max(m.workspace_peak for m in result.models) == planned


def test_the_residual_pattern_of_an_element_wise_add_is_replanned_and_computes_the_same(cmsis_nn, build_firmware,
                                                                                        tmp_path):
    """ic's residual pattern in TVM's CMSIS-NN shape (mlfwriter.ResidualModel): arm_elementwise_add_s8
    adds the skip connection, live across two operators, to the branch. Its operands carry no dims;
    the library's prototype sizes them (block_size), so the pool is re-planned — the add's output
    takes the bytes of a tensor already dead, never the skip connection's — and every output equals
    TFLite's ADD arithmetic computed here, on the writer's input and three seeded ones."""
    import numpy as np

    from conftest import cli
    from mlfwriter import ResidualModel, tar_tree

    model = ResidualModel()
    mlf = tar_tree(model.files(), tmp_path / "residual.tar")
    out = build_firmware(mlf, "host", cmsis_nn=cmsis_nn("v6.0.0"))
    pool = json.loads((out / "build.json").read_text())["models"][0]["workspace_pool"]
    regions = {r["name"]: (r["offset"], r["first"], r["last"]) for r in pool["regions"]}
    assert (pool["replanned"], pool["tvm_bytes"], pool["bytes"]) == (True, 256, 192), pool
    assert {r["size"] for r in pool["regions"]} == {64} and len(regions) == 4
    assert regions["sid_3_let"][0] == regions["sid_2_let"][0]  # the branch's first tensor is dead by the add
    skip_live = range(regions["sid_1_let"][1], regions["sid_1_let"][2] + 1)
    assert regions["sid_3_let"][1] in skip_live and regions["sid_1_let"][0] != regions["sid_3_let"][0]
    inputs = np.concatenate([model.input, np.random.default_rng(3).integers(-128, 128, (3, 64), dtype=np.int8)])
    np.savez(tmp_path / "residual.npz", input=inputs, output_0=np.stack([model.reference(x[None]) for x in inputs]))
    done = cli("run", str(out), "--reference", str(tmp_path / "residual.npz"), "--atol", "0")
    assert done.returncode == 0 and "4/4 exact" in done.stdout, done.stdout + done.stderr
