"""How far TVM's generated C indexes a pointer (mlf/extents.py): never less than the code really
touches (checked by running generated loop nests in Python), exact on affine loops, and "not
proven" — never a guess or a crash — on anything else."""

from __future__ import annotations

import itertools

from hypothesis import example, given, settings
from hypothesis import strategies as st

from mlfbuild.mlf.extents import pointer_extent

loops = st.lists(st.integers(1, 6), min_size=1, max_size=3)


@st.composite
def nests(draw):
    """A TVM-shaped loop nest writing p0[index] (index affine in the loop variables, perhaps through
    a cse let, perhaps guarded by an `if` or a ternary on one variable's range)."""
    bounds = draw(loops)
    names = [f"i{k}" for k in range(len(bounds))]
    coefficients = [draw(st.integers(0, 40)) for _ in names]
    offset = draw(st.integers(-30, 30))
    guard = draw(st.none() | st.tuples(st.integers(0, len(names) - 1), st.integers(0, 3), st.integers(0, 6)))
    form = draw(st.sampled_from(["plain", "let", "if", "ternary"]))
    terms = " + ".join(f"({n} * {c})" for n, c in zip(names, coefficients))
    index = f"(({terms}) + {offset})" if offset >= 0 else f"(({terms}) - {-offset})"
    lines = [f"{'  ' * d}for (int32_t {n} = 0; {n} < {b}; ++{n}) {{" for d, (n, b) in enumerate(zip(names, bounds))]
    pad = "  " * len(names)
    condition = None
    if guard is not None:
        var, low, high = guard
        condition = f"(({low} <= {names[var]}) && ({names[var]} < {high}))"
    if form == "let":
        lines.append(f"{pad}int32_t cse_var_1 = {index};")
        index = "cse_var_1"
    if condition and form == "if":
        lines += [f"{pad}if ({condition}) {{", f"{pad}  p0[{index}] = (int8_t)1;", f"{pad}}}"]
    elif condition and form == "ternary":
        lines.append(f"{pad}T[0] = ({condition} ? p0[{index}] : (int8_t)0);")
    else:
        condition = None
        lines.append(f"{pad}p0[{index}] = (int8_t)1;")
    lines += [f"{'  ' * d}}}" for d in reversed(range(len(names)))]
    return "\n".join(lines), bounds, coefficients, offset, guard if condition else None


def _touched(bounds, coefficients, offset, guard) -> list[int]:
    indices = []
    for values in itertools.product(*(range(b) for b in bounds)):
        if guard is not None and not (guard[1] <= values[guard[0]] < guard[2]):
            continue
        indices.append(sum(v * c for v, c in zip(values, coefficients)) + offset)
    return indices


@settings(max_examples=300, deadline=None)
@given(nests())
@example(("for (int32_t i0 = 0; i0 < 3; ++i0) {\n  p0[((i0 * 4) - 1)] = (int8_t)1;\n}", [3], [4], -1, None))
def test_the_extent_covers_every_index_the_code_touches(nest):
    body, bounds, coefficients, offset, guard = nest
    size, why = pointer_extent(body, "p0", "int8_t")
    touched = _touched(bounds, coefficients, offset, guard)
    if size is None:  # refused: only where an index may really be negative or nothing is touched
        assert why and (not touched or min(touched) < 0 or guard is not None or offset < 0), why
        return
    assert touched and size >= max(touched) + 1 and min(touched) >= 0
    if guard is None:
        assert size == max(touched) + 1  # affine with non-negative coefficients: exact


def test_what_is_not_proven_is_said():
    cases = {
        "f(p0);": "used other than by indexing",
        "g((&(p0[4])));": "address of an element",
        "for (int32_t i = 0; i < n; ++i) {\n  p0[i] = 0;\n}": "not a loop variable",
        "while (1) {\n  p0[0] = 0;\n}": "not a counted for loop",
        "p0[idx[3]] = 0;": "reads memory",
        "for (int32_t i = 0; i < 4; ++i) {\n  p0[(i - 2)] = 0;\n}": "may be negative",
        "int32_t k = 3;\nk = 4;\np0[k] = 0;": "does not have a known range",
        "int32_t k = 3;\nk += 4;\np0[k] = 0;": "does not have a known range",
        "int32_t k = 3;\n++k;\np0[k] = 0;": "does not have a known range",
        "for (int32_t i = 0; i < 4; ++i) {\n  i += 10;\n  p0[i] = 0;\n}": "changes inside its loop",
    }
    for body, reason in cases.items():
        size, why = pointer_extent(body, "p0", "int16_t")
        assert size is None and reason in why, (body, why)


def test_element_type_comes_from_the_access_cast():
    body = ("void* pad_let = (&(global_workspace_5_var[72192]));\n"
            "for (int32_t i = 0; i < 58; ++i) {\n  ((int16_t*)pad_let)[(i * 12)] = 0;\n}")
    assert pointer_extent(body, "pad_let", None) == ((57 * 12 + 1) * 2, "")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="p0[]()+-*/%<>=&|?:;{} \nforintif_123abc", max_size=200))
@example("p0[((((")
@example("for (int32_t i = 0; i < 5; ++i) {\n}\n}\np0[i] = 0;")
def test_any_text_reads_or_is_refused_without_crashing(text):
    size, why = pointer_extent(text, "p0", "int8_t")
    assert (size is None) == bool(why)
