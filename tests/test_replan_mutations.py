"""The re-plan is never wrong: meaning-preserving edits of real TVM code (tests/c_mutations.py) either
re-plan soundly or keep TVM's layout with a reason — both occur — and every re-plan is checked against
the running code by the independent AddressSanitizer check (tests/pool_sanitizer.py): each region its
own allocation of its planned size, poisoned outside its planned life, outputs equal to TVM's layout."""

from __future__ import annotations

import dataclasses
import functools
import io
import tarfile

import pytest

import c_mutations as mutations
import pool_sanitizer
from conftest import THIRD_PARTY_ENV, required_folder
from mlfbuild.canalysis.cfront import runtime_include_dir
from mlfbuild.canalysis.pool import read_usmp_pool
from mlfbuild.mlf.reader import read_mlf
from mlfbuild.project.lowering.base import module_sources
from mlfbuild.project.pool_plan import header_dirs, plan_usmp_pool

PLAIN_C = "tvm-0.18/kws_aot_c_unpacked_usmp"
CMSIS_NN = "tvm-0.18/kws_aot_cmsisnn_m4"
# Every fixture that re-plans and can run natively as TVM wrote it. Not vww_aot_cmsisnn_m4: TVM sized its
# one scratch buffer (108 B) for the M4's DSP path, and the host has only CMSIS-NN's generic path, which
# needs more (the sanitizer sees it write past the 108 B whatever the layout). mlfbuild's own builds give
# that call the buffer the library asks for on the board's core and check it before the call.
REPLANNED = [PLAIN_C, "tvm-0.13/kws_aot_c_unpacked_usmp", CMSIS_NN, "tvm-0.18/kws_aot_cmsisnn", "tvm-0.13/kws_aot_cmsisnn"]
FLOOR = {PLAIN_C: 56_192, CMSIS_NN: 16_000}


@functools.lru_cache(maxsize=None)
def _fixture(fixtures_dir, third_party_dir, tmp_root, name):
    lib = read_mlf(fixtures_dir / f"{name}.tar", tmp_root / name.replace("/", "_"))
    module = lib.modules[0]
    tree = required_folder(third_party_dir / "cmsis-nn-v6.0.0", "CMSIS-NN v6.0.0", THIRD_PARTY_ENV) \
        if module.cmsis_nn else None
    cmsis_sources = tuple(sorted((tree / "Source").rglob("*.c"))) if tree else ()
    return module, module_sources(module, lib.root), header_dirs(lib.root, tree), cmsis_sources


@pytest.fixture(scope="module")
def fixture(fixtures_dir, third_party_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("mlfs")
    return lambda name: _fixture(fixtures_dir, third_party_dir, root, name)


@pytest.mark.parametrize("name", [PLAIN_C, CMSIS_NN])
@pytest.mark.parametrize("mutation", mutations.PRESERVING + [mutations.file_scope_pointer], ids=lambda m: m.__name__)
def test_every_mutation_replans_at_the_floor_or_keeps_tvms_layout_with_a_reason(fixture, name, mutation):
    module, sources, headers, _ = fixture(name)
    edited = mutation(sources)
    pool = plan_usmp_pool(edited, module.name, include_dirs=headers)
    if pool.replanned:
        assert pool.bytes == FLOOR[name] and pool.plan.conflicts() == [] and not pool.reason
    else:
        assert pool.reason.startswith("not proven: ") and pool.bytes == pool.tvm_bytes and not pool.sources


def test_both_outcomes_occur_and_the_old_readers_failures_are_followed(fixture):
    """The three edits that made the line-based reader overlap live tensors are now followed (re-planned
    at the floor); a do-while whose step hides in its condition and a file-scope pointer into the pool
    keep TVM's layout, each saying where."""
    module, sources, headers, _ = fixture(PLAIN_C)
    for mutation in (mutations.offset_zero_arithmetic, mutations.casts_and_parentheses, mutations.loops_declared_outside):
        assert plan_usmp_pool(mutation(sources), module.name, include_dirs=headers).bytes == 56_192
    do_while = plan_usmp_pool(mutations.loops_as_do_while(sources), module.name, include_dirs=headers)
    assert not do_while.replanned and "has no bound" in do_while.reason and "kws_lib1.c:" in do_while.reason
    kept = plan_usmp_pool(mutations.file_scope_pointer(sources), module.name, include_dirs=headers)
    assert not kept.replanned and "global_workspace is used outside tvmgen_kws_run (codegen/host/src/kws_lib0.c:" \
        in kept.reason
    pool_sum = {r.name: r for r in read_usmp_pool(mutations.loops_declared_outside(sources), module.name,
                                                  headers).regions}["tvmgen_kws_fused_nn_avg_pool2d_cast:pool_sum_let"]
    assert pool_sum.size == 256  # the line-based reader read 4


def _checked_run(fixture, name, tmp_path, edit=lambda sources: sources, claims=lambda pool: pool):
    module, sources, headers, cmsis_sources = fixture(name)
    include = [*headers, runtime_include_dir()]
    reference = pool_sanitizer.build_and_run(module, sources, None, include, tmp_path / "tvm", cmsis_sources,
                                             checked=False)
    edited = edit(sources)
    pool = read_usmp_pool(edited, module.name, headers)
    assert not pool.problem and pool.regions
    checked = pool_sanitizer.build_and_run(module, edited, claims(pool), include, tmp_path / "checked", cmsis_sources)
    assert checked == reference and checked.endswith("status 0\n")


_COMBINED = [lambda s: mutations.offset_zero_arithmetic(mutations.reordered_carves(mutations.loops_declared_outside(s))),
             lambda s: mutations.casts_and_parentheses(mutations.aliases_through_locals(mutations.loops_as_while(s))),
             lambda s: mutations.loops_flipped(s)]


@pytest.mark.parametrize("name", [PLAIN_C, CMSIS_NN])
@pytest.mark.parametrize("combined", range(len(_COMBINED)))
def test_mutated_code_runs_its_replan_clean_under_the_sanitizer(fixture, tmp_path, name, combined):
    _checked_run(fixture, name, tmp_path, _COMBINED[combined])


@pytest.mark.exhaustive
@pytest.mark.parametrize("name", REPLANNED)
@pytest.mark.parametrize("mutation", [lambda s: s] + mutations.PRESERVING, ids=lambda m: m.__name__)
def test_every_replanned_fixture_and_mutation_runs_clean_under_the_sanitizer(fixture, tmp_path, name, mutation):
    module, sources, headers, _ = fixture(name)
    if plan_usmp_pool(mutation(sources), module.name, include_dirs=headers).replanned:
        _checked_run(fixture, name, tmp_path, mutation)


@pytest.mark.parametrize("name", [PLAIN_C, CMSIS_NN])
def test_every_real_replan_runs_clean_under_the_sanitizer(fixture, tmp_path, name):
    _checked_run(fixture, name, tmp_path)


def test_the_sanitizer_catches_a_region_one_byte_short(fixture, tmp_path):
    def short(pool):
        pool.regions[0] = dataclasses.replace(pool.regions[0], size=pool.regions[0].size - 1)
        return pool
    with pytest.raises(AssertionError, match="heap-buffer-overflow"):
        _checked_run(fixture, PLAIN_C, tmp_path, claims=short)


def test_the_sanitizer_catches_a_region_used_outside_its_planned_life(fixture, tmp_path):
    def late(pool):
        sid_1 = next(i for i, r in enumerate(pool.regions) if r.name == "sid_1_let")
        pool.regions[sid_1] = dataclasses.replace(pool.regions[sid_1], first=pool.regions[sid_1].first + 1000)
        return pool
    with pytest.raises(AssertionError, match="use-after-poison"):
        _checked_run(fixture, PLAIN_C, tmp_path, claims=late)


@pytest.mark.parametrize("name", [PLAIN_C])
def test_a_mutated_mlf_replanned_runs_bit_exact_against_tvms_reference(fixtures_dir, tmp_path, build_firmware, name):
    """The mutated code through the whole pipeline: an MLF with the edited C, built for the host,
    run against TVM's own reference outputs."""
    from mlfbuild.run import run_build

    source = fixtures_dir / f"{name}.tar"
    mutated = tmp_path / "kws_mutated.tar"
    with tarfile.open(source) as original, tarfile.open(mutated, "w") as out:
        for member in original.getmembers():
            data = original.extractfile(member).read() if member.isfile() else None
            if data is not None and member.name.endswith(".c") and "/codegen/" in member.name:
                data = _COMBINED[1]({"x": data.decode()})["x"].encode()
                member.size = len(data)
            out.addfile(member, io.BytesIO(data) if data is not None else None)
    build = build_firmware(mutated, "host")
    notes = (build / "build.json").read_text()
    assert "re-planned: 104,192 B -> 56,192 B" in notes
    result = run_build(build, references=[str(fixtures_dir / "tvm-0.18" / "kws.npz")], timeout=120)
    assert result.status == "pass" and result.models[0].comparisons[0].max_abs_error == 0
