"""What the analysis knows about a C value: an integer range, a pointer into the pool, a local struct,
or a value that holds no pointer into the pool."""

from __future__ import annotations

from dataclasses import dataclass

from pycparser import c_ast

from .intervals import TOP, Interval


@dataclass(frozen=True)
class IntValue:
    """An integer in `range`. `definition`: the expression it was last set from, re-evaluated where it
    is used (so a condition that narrows `i` also narrows `j = i * 64`), valid while none of the
    variables it reads (`reads`) has been set since."""

    range: Interval
    definition: c_ast.Node | None = None
    reads: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Target:
    """What a pointer points into: the whole pool (only ever carved), or one region carved from it."""

    key: str  # "pool", or the region's name

    @property
    def is_pool(self) -> bool:
        return self.key == "pool"


POOL = Target("pool")


@dataclass(frozen=True)
class PointerValue:
    """A pointer `offset` bytes into `target`; `element`: bytes of what it points to (None: void)."""

    target: Target
    offset: Interval
    element: int | None


@dataclass(frozen=True)
class StructValue:
    """A local struct: its fields' values by name (fields not listed hold no pointer into the pool)."""

    type_name: str
    fields: tuple[tuple[str, object], ...]

    def field(self, name: str):
        return next((value for key, value in self.fields if key == name), OTHER)


@dataclass(frozen=True)
class Allocation:
    """What one TVMBackendAllocWorkspace call returned (`site`: the call's place in the code)."""

    site: int


@dataclass(frozen=True)
class Held:
    """The allocator's stack where a path is: (allocation site, bytes) from the bottom up."""

    blocks: tuple[tuple[int, int], ...] = ()

    @property
    def bytes(self) -> int:
        return sum(size for _, size in self.blocks)


@dataclass(frozen=True)
class Other:
    """Any value that is no pointer into the pool: a float, a pointer to anything else, unknown data."""


OTHER = Other()
UNKNOWN_INT = IntValue(TOP)


@dataclass(frozen=True)
class StructAddress:
    """`&s` for a local struct `s` (CMSIS-NN calls read dims and contexts through it); `value`: what
    `s` held when its address was taken."""

    name: str
    value: object


def holds_pool(value) -> bool:
    if isinstance(value, PointerValue):
        return True
    if isinstance(value, StructValue):
        return any(holds_pool(v) for _, v in value.fields)
    if isinstance(value, StructAddress):
        return holds_pool(value.value)
    return False


def join(a, b):
    """The least value covering both (None: a path that does not reach here)."""
    if a is None:
        return b
    if b is None or a == b:
        return a
    if isinstance(a, IntValue) and isinstance(b, IntValue):
        same = a.definition is b.definition and a.reads == b.reads
        return IntValue(a.range.hull(b.range), a.definition if same else None, a.reads if same else frozenset())
    if isinstance(a, PointerValue) and isinstance(b, PointerValue) and a.target == b.target:
        return PointerValue(a.target, a.offset.hull(b.offset), a.element if a.element == b.element else None)
    if isinstance(a, StructValue) and isinstance(b, StructValue) and a.type_name == b.type_name:
        names = [k for k, _ in a.fields] + [k for k, _ in b.fields if k not in dict(a.fields)]
        return StructValue(a.type_name, tuple((k, join(a.field(k), b.field(k))) for k in names))
    if holds_pool(a) or holds_pool(b):
        return Conflict(a, b)
    if isinstance(a, IntValue) or isinstance(b, IntValue):
        return UNKNOWN_INT
    return OTHER


@dataclass(frozen=True)
class Conflict:
    """Two paths give a variable values that cannot be merged (pointers into different regions)."""

    a: object
    b: object


def widen(old, new):
    if isinstance(old, IntValue) and isinstance(new, IntValue):
        same = old.definition is new.definition and old.reads == new.reads
        return IntValue(old.range.widen(new.range), old.definition if same else None, old.reads if same else frozenset())
    if isinstance(old, PointerValue) and isinstance(new, PointerValue) and old.target == new.target:
        return PointerValue(old.target, old.offset.widen(new.offset), old.element if old.element == new.element else None)
    return join(old, new)


def covers(old, new) -> bool:
    """Whether `old` already includes every value `new` may hold."""
    if new is None or old == new:
        return True
    if old is None:
        return False
    if isinstance(old, IntValue) and isinstance(new, IntValue):
        return new.range.within(old.range) and (old.definition is None or old.definition is new.definition)
    if isinstance(old, PointerValue) and isinstance(new, PointerValue):
        return old.target == new.target and new.offset.within(old.offset) and old.element == new.element
    if isinstance(old, StructValue) and isinstance(new, StructValue):
        return old.type_name == new.type_name and all(covers(old.field(k), v) for k, v in new.fields)
    return isinstance(old, Other) and isinstance(new, Other)
