"""An abstract interpreter of C over pycparser's syntax tree: which bytes of a memory pool each part of
a program touches, and when.

It runs the program from one entry function with the pool's address as the only source of pool
pointers, following every pointer derived from it — through casts, parentheses, pointer arithmetic,
address-of, local variables, struct fields and calls into functions whose code it sees — and bounds
every index with integer intervals over all control flow the language allows (loops of any form reach
a fixed point with widening; conditions narrow the ranges they test). A region is what one literal
offset carves out of the pool (`&pool[64000]`); its size is the furthest byte any access reaches, its
life the steps (top-level statements of the entry's callees and theirs, in execution order) that
touch it.

Whatever is not followed raises NotProven with the reason and the place: a pool pointer stored in
memory or a global, returned, compared, converted to an integer, subtracted from another, handed to a
function whose code is not seen and whose arguments have no documented extent; an index without a
bound; the pool itself indexed other than to carve a region; recursion; goto and switch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pycparser import c_ast

from . import cmsis_nn_model
from .cfront import ParsedFile
from .ctype import OTHER_TYPE, CType, TypeTable, parse_int, size_range
from .intervals import BOOL, TOP, ZERO, Interval
from .values import (OTHER, POOL, UNKNOWN_INT, Allocation, Conflict, Held, IntValue, PointerValue, StructAddress,
                     StructValue, Target, covers, holds_pool, join, widen)

STEP_DEPTH = 2  # the entry (0), the AOT main (1) and its operators (2) count their statements as steps
MAX_CALL_DEPTH = 16
MAX_PASSES = 12  # widening reaches a fixed point in two or three; more means something is off
WORK_LIMIT = 4_000_000  # expressions evaluated in all (kws: about 40,000; three imported LSTMs with their
# gates and fixed-point activations nested four loops deep: about 370,000): past it, the code is not proven
_MEMORY_FUNCTIONS = {"memcpy": (0, 1), "memmove": (0, 1), "memset": (0,)}  # pointer arguments; length is the third
# TVM's workspace allocator (crt/src/backend.c): a LIFO stack, each block rounded up to this many bytes.
ALLOCATE, FREE = "TVMBackendAllocWorkspace", "TVMBackendFreeWorkspace"
WORKSPACE_ALIGNMENT = 16
_HELD = "@held"  # the pseudo-variable in a function's outermost scope that holds its allocator stack


class NotProven(Exception):
    """The analysis cannot prove what the code does with the pool; the message says what and where."""


@dataclass
class Carve:
    """One region: the bytes carved out of the pool by a literal offset at `site`."""

    name: str
    function: str
    offset: int  # the literal's value (where TVM put the region)
    site: tuple[str, int, int, str]  # (path, line, column, the literal as written)
    end: int = 0  # bytes from the region's start that some access reaches
    first: int | None = None  # first and last step that touch it
    last: int | None = None

    def touch(self, end: int, step: int) -> None:
        self.end = max(self.end, end)
        self.first = step if self.first is None else min(self.first, step)
        self.last = step if self.last is None else max(self.last, step)


@dataclass
class Operator:
    """A function the AOT main calls and hands the pool to: the parameter that receives it and the
    steps its calls span."""

    parameter: str
    first: int
    last: int


@dataclass
class Var:
    value: object
    type: CType
    escaped: bool = False  # its address was taken: any write through a pointer may change it


_FUNCTION_SCOPE = 1  # the scopes of a function's outermost block: its parameters and locals
State = list  # scopes, innermost last: list[dict[str, Var]]; None for a path that does not get here


@dataclass
class _Function:
    node: c_ast.FuncDef
    file: ParsedFile
    types: TypeTable


@dataclass
class _Frame:
    function: _Function
    depth: int
    held_below: int = 0  # bytes the callers hold on the allocator's stack when this call starts
    returns: list = field(default_factory=list)
    loops: list = field(default_factory=list)  # (breaks, continues, their scope depths) of the enclosing loops
    gotos: dict = field(default_factory=dict)  # label -> (goto, its state) of the jumps still to land there
    labels: set = field(default_factory=set)  # the labels already passed (a goto to one would go back)


@dataclass
class Analysis:
    carves: dict[str, Carve] = field(default_factory=dict)
    operators: dict[str, Operator] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)  # functions called at depth 2, in order
    call_spans: list[tuple[str, int, int]] = field(default_factory=list)  # each of those calls: (function, first, last step)
    steps: int = 0


class Interpreter:
    def __init__(self, files: list[ParsedFile], pool_name: str, main_name: str):
        self.pool_name = pool_name
        self.main_name = main_name
        self.functions: dict[str, _Function] = {}
        self.prototypes: dict[str, tuple[c_ast.FuncDecl, TypeTable]] = {}
        self.globals: dict[str, CType] = {}
        self.enums: dict[str, int] = {}
        for parsed in files:
            types = TypeTable(parsed.tree)
            for node in parsed.tree.ext:
                self._declare(node, parsed, types)
        self.result = Analysis()
        self.step = 0
        self.loop_depth = 0
        self.stack: list[str] = []
        self.work = 0
        self.allocation_peak = 0  # the most bytes the allocator's stack holds at once
        self._held_below = 0
        self._sealed: dict[str, bool] = {}
        self._followed_calls: set[tuple] = set()  # sealed calls already followed through without refusal

    def _declare(self, node: c_ast.Node, parsed: ParsedFile, types: TypeTable) -> None:
        if isinstance(node, c_ast.FuncDef):
            self.functions[node.decl.name] = _Function(node, parsed, types)
        elif isinstance(node, c_ast.Decl):
            if isinstance(node.type, c_ast.FuncDecl):
                self.prototypes.setdefault(node.name, (node.type, types))
            elif node.name:
                self.globals[node.name] = types.resolve(node.type)
            _collect_enums(node, self.enums)
        elif isinstance(node, c_ast.Typedef):
            _collect_enums(node, self.enums)

    # --- entry -------------------------------------------------------------------------------------

    def run(self, entry: str) -> Analysis:
        if entry not in self.functions:
            raise NotProven(f"{entry} is not defined in the generated C")
        function = self.functions[entry]
        self._call(function, [OTHER] * len(_parameters(function.node.decl.type)), depth=0, where=function.node)
        self.result.steps = self.step
        return self.result

    def allocation_peak_of(self, entry: str) -> int:
        """The most bytes TVM's workspace allocator holds at once while `entry` runs (its callees'
        blocks on top of what it holds where it calls them)."""
        self.result, self.step, self.allocation_peak, self._held_below = Analysis(), 0, 0, 0
        self.run(entry)
        return self.allocation_peak

    # --- statements --------------------------------------------------------------------------------

    def _body(self, statements: list, state, frame: _Frame, top: bool):
        for statement in statements:
            if state is None and not (isinstance(statement, c_ast.Label) and statement.name in frame.gotos):
                continue  # no path gets here (a label a `goto` jumps to is where one does again)
            if top and frame.depth <= STEP_DEPTH and self.loop_depth == 0:
                self.step += 1
            state = self._statement(statement, state, frame)
        return state

    def _statement(self, node: c_ast.Node, state, frame: _Frame):
        kind = type(node).__name__
        handler = getattr(self, f"_stmt_{kind}", None)
        if handler is not None:
            return handler(node, state, frame)
        if isinstance(node, (c_ast.Case, c_ast.Default)):
            raise self._refuse(node, frame, f"`{kind.lower()}` is not followed")
        if isinstance(node, (c_ast.EmptyStatement, c_ast.Pragma, c_ast.Typedef)):
            return state
        self._eval(node, state, frame)  # an expression statement
        return state

    def _stmt_Compound(self, node: c_ast.Compound, state, frame: _Frame):
        state.append({})
        state = self._body(node.block_items or [], state, frame, top=False)
        if state is not None:
            self._pop_scope(state)
        return state

    def _stmt_DeclList(self, node: c_ast.DeclList, state, frame: _Frame):
        for decl in node.decls:
            state = self._stmt_Decl(decl, state, frame)
        return state

    def _stmt_Decl(self, node: c_ast.Decl, state, frame: _Frame):
        types = frame.function.types
        ctype = types.resolve(node.type)
        if isinstance(node.type, c_ast.FuncDecl) or node.name is None:
            return state
        if "static" in (node.storage or []) or "extern" in (node.storage or []):
            if node.init is not None and holds_pool(self._eval(node.init, state, frame)):
                raise self._refuse(node, frame, f"a pointer into the pool is kept in the static variable {node.name}")
            self._forget(state, node.name)
            state[-1][node.name] = Var(_unknown_of(ctype), ctype, escaped=True)
            return state
        value = _unknown_of(ctype)
        if isinstance(node.init, c_ast.InitList):
            value = self._init_list(node.init, ctype, state, frame, node.name)
        elif node.init is not None:
            value = self._convert(self._eval(node.init, state, frame, declaring=node.name), ctype, node, frame)
            value = _with_definition(value, node.init, node.name)
        self._forget(state, node.name)
        state[-1][node.name] = Var(value, ctype)
        return state

    def _init_list(self, init: c_ast.InitList, ctype: CType, state, frame: _Frame, name: str):
        values = [self._eval(expr, state, frame) for expr in init.exprs]
        if ctype.kind == "struct" and ctype.fields and not any(isinstance(e, c_ast.NamedInitializer) for e in init.exprs):
            if len(values) > len(ctype.fields):
                raise self._refuse(init, frame, f"more initialisers than fields in {name}")
            converted = tuple((f, self._convert(v, t, init, frame))
                              for f, t, v in zip(ctype.fields, ctype.field_types, values))
            return StructValue(ctype.struct, converted)
        if any(holds_pool(v) for v in values):
            raise self._refuse(init, frame, f"a pointer into the pool is stored in the array or struct {name}")
        return OTHER

    def _stmt_If(self, node: c_ast.If, state, frame: _Frame):
        self._condition_value(node.cond, state, frame)
        then_entry = self._refine(node.cond, _copy(state), frame, True)
        then_state = self._statement(node.iftrue, then_entry, frame) if then_entry is not None else None
        else_entry = self._refine(node.cond, _copy(state), frame, False)
        else_state = else_entry if node.iffalse is None or else_entry is None else \
            self._statement(node.iffalse, else_entry, frame)
        return self._join(then_state, else_state, node, frame)

    def _stmt_Switch(self, node: c_ast.Switch, state, frame: _Frame):
        """Any case may be the one taken, and each falls through to the next until a break."""
        value = self._eval(node.cond, state, frame)
        if holds_pool(value):
            raise self._refuse(node, frame, "a pointer into the pool is switched on")
        if not isinstance(node.stmt, c_ast.Compound):
            raise self._refuse(node, frame, "a switch without a block")
        breaks: list = []
        labels = [self._case_value(item, state, frame) for item in node.stmt.block_items or []
                  if isinstance(item, c_ast.Case)]
        span = _as_int(value).range
        # The value is one known case's: no other label is jumped to (falling through still reaches them).
        matched = span.bounded and span.lo == span.hi and any(label == span for label in labels)
        state.append({})
        outer = frame.loops[-1] if frame.loops else ([], [], 0, 0)
        frame.loops.append((breaks, outer[1], len(state), outer[3]))
        current, has_default = None, False
        try:
            for item in node.stmt.block_items or []:
                if isinstance(item, (c_ast.Case, c_ast.Default)):
                    has_default |= isinstance(item, c_ast.Default)
                    label = self._case_value(item, state, frame) if isinstance(item, c_ast.Case) else None
                    if label is None and not matched or label is not None and not span.meet(label).empty:
                        current = self._join(current, _copy(state), node, frame)
                    current = self._body(item.stmts or [], current, frame, top=False)
                elif current is not None:
                    current = self._statement(item, current, frame)
        finally:
            frame.loops.pop()
        out = current
        for other in breaks + ([] if has_default or matched else [state]):
            out = self._join(out, other, node, frame)
        if out is not None:
            self._pop_scope(out)
        return out

    def _case_value(self, item: c_ast.Case, state, frame: _Frame) -> Interval | None:
        """A case label's constant (None: not a constant this reading knows)."""
        if not _pure(item.expr):
            return None
        value = self._eval(item.expr, _copy(state), frame)
        span = value.range if isinstance(value, IntValue) else None
        return span if span is not None and span.bounded and span.lo == span.hi else None

    def _stmt_Return(self, node: c_ast.Return, state, frame: _Frame):
        if node.expr is not None:
            value = self._eval(node.expr, state, frame)
            if holds_pool(value):
                raise self._refuse(node, frame, "a pointer into the pool is returned")
            frame.returns.append(value)
        return None

    def _stmt_Goto(self, node: c_ast.Goto, state, frame: _Frame):
        """A jump forward to a label of the function's outermost block (TVM's micro-kernels' `goto out`):
        the state at the label joins the jumps' states. A jump back would be a loop: not followed."""
        if node.name in frame.labels:
            raise self._refuse(node, frame, f"`goto {node.name}` jumps back")
        frame.gotos.setdefault(node.name, []).append((node, self._truncated(state, _FUNCTION_SCOPE)))
        return None

    def _stmt_Label(self, node: c_ast.Label, state, frame: _Frame):
        if frame.loops or (state is not None and len(state) != _FUNCTION_SCOPE):
            raise self._refuse(node, frame, f"the label {node.name} is not in the function's outermost block")
        for _, landed in frame.gotos.pop(node.name, []):
            state = self._join(state, landed, node, frame)
        frame.labels.add(node.name)
        return self._statement(node.stmt, state, frame) if state is not None else None

    def _stmt_Break(self, node, state, frame: _Frame):
        if not frame.loops:
            raise self._refuse(node, frame, "`break` outside a loop")
        frame.loops[-1][0].append(self._truncated(state, frame.loops[-1][2]))
        return None

    def _stmt_Continue(self, node, state, frame: _Frame):
        if not frame.loops:
            raise self._refuse(node, frame, "`continue` outside a loop")
        frame.loops[-1][1].append(self._truncated(state, frame.loops[-1][3]))
        return None

    def _truncated(self, state, depth: int):
        """`state` as it is where a break or continue lands: the scopes it leaves closed."""
        state = _copy(state)
        while len(state) > depth:
            self._pop_scope(state)
        return state

    def _stmt_For(self, node: c_ast.For, state, frame: _Frame):
        state.append({})
        if isinstance(node.init, c_ast.DeclList):
            state = self._stmt_DeclList(node.init, state, frame)
        elif node.init is not None:
            self._eval(node.init, state, frame)
        state = self._loop(node, node.cond, node.stmt, node.next, state, frame, test_first=True)
        if state is not None:
            self._pop_scope(state)
        return state

    def _stmt_While(self, node: c_ast.While, state, frame: _Frame):
        return self._loop(node, node.cond, node.stmt, None, state, frame, test_first=True)

    def _stmt_DoWhile(self, node: c_ast.DoWhile, state, frame: _Frame):
        return self._loop(node, node.cond, node.stmt, None, state, frame, test_first=False)

    def _loop(self, node, cond, body, step, state, frame: _Frame, test_first: bool):
        """Run the loop to a fixed point: the state at its head covers every iteration's."""
        self.loop_depth += 1
        try:
            head = state
            for _ in range(MAX_PASSES):
                breaks, continues = [], []
                frame.loops.append((breaks, continues, len(head), len(head)))
                entry = _copy(head)
                if test_first and cond is not None:
                    self._condition_value(cond, entry, frame)
                    entry = self._refine(cond, entry, frame, True)
                after = self._statement(body, entry, frame) if entry is not None else None
                frame.loops.pop()
                for other in continues:
                    after = self._join(after, other, node, frame)
                if after is not None and step is not None:
                    self._eval(step, after, frame)
                if not test_first and after is not None and cond is not None:
                    self._condition_value(cond, after, frame)
                    exits = [self._refine(cond, _copy(after), frame, False)]
                    after = self._refine(cond, after, frame, True)
                else:
                    exits = []
                merged = self._join(_copy(head), after, node, frame)
                if _state_covers(head, merged):
                    if test_first:
                        exits.append(self._refine(cond, _copy(head), frame, False) if cond is not None else None)
                    elif after is None and not exits:
                        exits.append(None)
                    out = None
                    for other in exits + breaks:
                        out = self._join(out, other, node, frame)
                    return out
                head = _widen_state(head, merged)
            raise self._refuse(node, frame, "a loop whose ranges do not settle")
        finally:
            self.loop_depth -= 1

    # --- expressions -------------------------------------------------------------------------------

    def _eval(self, node: c_ast.Node, state, frame: _Frame, declaring: str | None = None):
        self.work += 1
        if self.work > WORK_LIMIT:
            raise self._refuse(node, frame, f"more than {WORK_LIMIT:,} expressions to follow")
        handler = getattr(self, f"_expr_{type(node).__name__}", None)
        if handler is None:
            raise self._refuse(node, frame, f"{type(node).__name__} expressions are not followed")
        if declaring is not None and isinstance(node, (c_ast.UnaryOp, c_ast.Cast, c_ast.BinaryOp)):
            return handler(node, state, frame, declaring)
        return handler(node, state, frame)

    def _expr_Constant(self, node: c_ast.Constant, state, frame):
        if node.type in ("int", "unsigned int", "long int", "unsigned long int", "long long int",
                         "unsigned long long int"):
            value = parse_int(node.value)
            return IntValue(Interval.of(value)) if value is not None else UNKNOWN_INT
        if node.type == "char":
            return UNKNOWN_INT
        return OTHER

    def _expr_ID(self, node: c_ast.ID, state, frame):
        var = _lookup(state, node.name)
        if var is not None:
            return self._read_var(var, state, frame)
        if node.name == self.pool_name:
            return PointerValue(POOL, ZERO, 1)
        if node.name in self.enums:
            return IntValue(Interval.of(self.enums[node.name]))
        ctype = self.globals.get(node.name)
        return _unknown_of(ctype) if ctype is not None else OTHER

    def _read_var(self, var: Var, state, frame):
        value = var.value
        if var.escaped:
            return _unknown_of(var.type)
        if isinstance(value, IntValue) and value.definition is not None:
            again = self._eval_pure(value.definition, state, frame)
            if isinstance(again, IntValue):
                narrowed = value.range.meet(again.range)
                return IntValue(narrowed if not narrowed.empty else value.range, value.definition, value.reads)
        return value

    def _eval_pure(self, node, state, frame):
        """An expression without side effects evaluated again where a variable set from it is read."""
        return self._eval(node, _copy(state), frame)

    def _expr_Cast(self, node: c_ast.Cast, state, frame, declaring: str | None = None):
        value = self._eval(node.expr, state, frame, declaring)
        ctype = frame.function.types.resolve(node.to_type)
        if ctype.kind == "void":
            return OTHER
        return self._convert(value, ctype, node, frame)

    def _expr_UnaryOp(self, node: c_ast.UnaryOp, state, frame, declaring: str | None = None):
        op = node.op
        if op == "&":
            return self._address_of(node.expr, state, frame, declaring)
        if op == "sizeof":
            return self._sizeof(node.expr, frame)
        if op in ("++", "--", "p++", "p--"):
            old = self._eval(node.expr, state, frame)
            delta = IntValue(Interval.of(1 if "+" in op else -1))
            new = self._arith("+", old, delta, node, frame)
            self._assign(node.expr, new, state, frame)
            return new if op in ("++", "--") else old
        value = self._eval(node.expr, state, frame)
        if op == "*":
            return self._access(value, IntValue(ZERO), node, frame)
        if holds_pool(value):
            raise self._refuse(node, frame, f"a pointer into the pool is used with `{op}`")
        if op == "-":
            return IntValue(-_as_int(value).range)
        if op == "+":
            return _as_int(value)
        if op == "!":
            return IntValue(BOOL)
        return UNKNOWN_INT

    def _sizeof(self, operand: c_ast.Node, frame: _Frame) -> IntValue:
        """sizeof(a type) whose size is known on every target; anything else is some unknown count."""
        if not isinstance(operand, c_ast.Typename):
            return UNKNOWN_INT
        size = size_range(frame.function.types.resolve(operand))
        return IntValue(size) if size is not None else UNKNOWN_INT

    def _address_of(self, target: c_ast.Node, state, frame, declaring: str | None):
        if isinstance(target, c_ast.ArrayRef):
            base, index = self._pointer_and_index(target, state, frame)
            if isinstance(base, PointerValue):
                if base.target.is_pool:
                    return self._carve(base, target.subscript, target, frame, declaring)
                return self._offset(base, index, target, frame)
            return OTHER
        if isinstance(target, c_ast.ID):
            var = _lookup(state, target.name)
            if var is None:
                if target.name == self.pool_name:
                    return PointerValue(POOL, ZERO, 1)
                return OTHER
            if var.type.kind == "struct":
                return StructAddress(target.name, var.value)
            if holds_pool(var.value):
                raise self._refuse(target, frame, f"the address of {target.name}, which holds a pointer into the pool, "
                                                  "is taken")
            var.escaped = True
            return OTHER
        if isinstance(target, c_ast.UnaryOp) and target.op == "*":
            return self._eval(target.expr, state, frame)
        value = self._eval(target, state, frame)
        if holds_pool(value):
            raise self._refuse(target, frame, "the address of a value holding a pointer into the pool is taken")
        return OTHER

    def _carve(self, base: PointerValue, subscript: c_ast.Node, node, frame, declaring: str | None):
        if base.offset != ZERO or base.element != 1:
            raise self._refuse(node, frame, "the pool is carved other than from its first byte as bytes")
        if not isinstance(subscript, c_ast.Constant) or parse_int(subscript.value) is None:
            raise self._refuse(node, frame, "a region's offset in the pool is not a literal")
        coord = subscript.coord
        site = (frame.function.file.path, coord.line, coord.column or 0, subscript.value)
        function = frame.function.node.decl.name
        existing = next((c for c in self.result.carves.values() if c.site == site), None)
        if existing is None:
            name = declaring or f"offset_{subscript.value}"
            if function != self.main_name:
                name = f"{function}:{name}"
            if name in self.result.carves:
                name = f"{name}@{coord.line}"
            existing = Carve(name, function, parse_int(subscript.value), site)
            self.result.carves[name] = existing
        return PointerValue(Target(existing.name), ZERO, None)

    def _expr_ArrayRef(self, node: c_ast.ArrayRef, state, frame):
        base, index = self._pointer_and_index(node, state, frame)
        return self._access(base, index, node, frame)

    def _pointer_and_index(self, node: c_ast.ArrayRef, state, frame):
        first = self._eval(node.name, state, frame)
        second = self._eval(node.subscript, state, frame)
        if isinstance(second, PointerValue):  # i[p] is p[i]
            first, second = second, first
        if holds_pool(second):
            raise self._refuse(node, frame, "two pointers into the pool in one index")
        return first, _as_int(second)

    def _access(self, pointer, index: IntValue, node, frame):
        """A read or write through `pointer` at `index` elements; the value read (never a pool pointer:
        none is ever stored)."""
        if isinstance(pointer, (StructValue, StructAddress)):
            return OTHER
        if not isinstance(pointer, PointerValue):
            return UNKNOWN_INT
        if pointer.target.is_pool:
            raise self._refuse(node, frame, "the pool is read or written directly, not through a region carved from it")
        if pointer.element is None:
            raise self._refuse(node, frame, f"{pointer.target.key} is accessed through a pointer of unknown element size")
        start = pointer.offset + index.range * IntValue(Interval.of(pointer.element)).range
        end = start + Interval.of(pointer.element)
        self._touch(pointer.target, start, end, node, frame)
        return UNKNOWN_INT

    def _touch(self, target: Target, start: Interval, end: Interval, node, frame) -> None:
        carve = self.result.carves[target.key]
        if start.lo is None or end.hi is None:
            raise self._refuse(node, frame, f"an access of {carve.name} has no bound")
        if start.lo < 0:
            raise self._refuse(node, frame, f"an access of {carve.name} may be before its start")
        carve.touch(end.hi, self.step)

    def _expr_BinaryOp(self, node: c_ast.BinaryOp, state, frame, declaring: str | None = None):
        op = node.op
        if op in ("&&", "||"):
            self._condition_value(node.left, state, frame)
            rest = self._refine(node.left, _copy(state), frame, op == "&&")
            skipped = self._refine(node.left, _copy(state), frame, op != "&&")
            if rest is not None:
                self._condition_value(node.right, rest, frame)
            _replace(state, self._join(rest, skipped, node, frame))
            return IntValue(BOOL)
        left = self._eval(node.left, state, frame, declaring if op in ("+", "-") else None)
        right = self._eval(node.right, state, frame)
        if op == "+" and isinstance(left, PointerValue) and left.target.is_pool and isinstance(right, IntValue):
            return self._carve(left, node.right, node, frame, declaring)
        if op in ("==", "!=", "<", ">", "<=", ">="):
            if holds_pool(left) or holds_pool(right):
                raise self._refuse(node, frame, "a pointer into the pool is compared")
            return IntValue(BOOL)
        return self._arith(op, left, right, node, frame)

    def _arith(self, op: str, left, right, node, frame):
        if isinstance(left, PointerValue) or isinstance(right, PointerValue):
            if op == "+" and isinstance(right, PointerValue) and not isinstance(left, PointerValue):
                left, right = right, left
            if op in ("+", "-") and isinstance(left, PointerValue) and not holds_pool(right):
                if left.target.is_pool:
                    raise self._refuse(node, frame, "the pool is offset other than to carve a region")
                count = _as_int(right).range
                return self._offset(left, IntValue(-count if op == "-" else count), node, frame)
            raise self._refuse(node, frame, f"a pointer into the pool is used with `{op}`")
        if holds_pool(left) or holds_pool(right):
            raise self._refuse(node, frame, f"a pointer into the pool is used with `{op}`")
        a, b = _as_int(left).range, _as_int(right).range
        if op == "+":
            return IntValue(a + b)
        if op == "-":
            return IntValue(a - b)
        if op == "*":
            return IntValue(a * b)
        if op == "/":
            return IntValue(a.divide(b))
        if op == "%":
            return IntValue(a.remainder(b))
        if op == "<<":
            return IntValue(a.shift_left(b))
        if op == ">>":
            return IntValue(a.shift_right(b))
        if op == "&":
            return IntValue(a.bit_and(b))
        return UNKNOWN_INT

    def _offset(self, pointer: PointerValue, count: IntValue, node, frame) -> PointerValue:
        element = pointer.element if pointer.element is not None else 1
        return PointerValue(pointer.target, pointer.offset + count.range * Interval.of(element), pointer.element)

    def _expr_TernaryOp(self, node: c_ast.TernaryOp, state, frame):
        self._condition_value(node.cond, state, frame)
        then_state = self._refine(node.cond, _copy(state), frame, True)
        else_state = self._refine(node.cond, _copy(state), frame, False)
        then_value = self._eval(node.iftrue, then_state, frame) if then_state is not None else None
        else_value = self._eval(node.iffalse, else_state, frame) if else_state is not None else None
        _replace(state, self._join(then_state, else_state, node, frame))
        value = join(then_value, else_value)
        if isinstance(value, Conflict):
            raise self._refuse(node, frame, "a choice between pointers into different regions")
        return value if value is not None else UNKNOWN_INT

    def _expr_Assignment(self, node: c_ast.Assignment, state, frame):
        value = self._eval(node.rvalue, state, frame)
        if node.op != "=":
            value = self._arith(node.op[:-1], self._eval(node.lvalue, state, frame), value, node, frame)
        self._assign(node.lvalue, value, state, frame, node.rvalue if node.op == "=" else None)
        return value

    def _assign(self, target: c_ast.Node, value, state, frame, definition: c_ast.Node | None = None) -> None:
        if isinstance(target, c_ast.ID):
            var = _lookup(state, target.name)
            if var is None:
                if holds_pool(value):
                    raise self._refuse(target, frame, f"a pointer into the pool is stored in the global {target.name}")
                return
            if var.escaped and holds_pool(value):
                raise self._refuse(target, frame, f"a pointer into the pool is stored in {target.name}, a static "
                                                  "variable or one whose address was taken")
            converted = self._convert(value, var.type, target, frame)
            self._set(state, target.name, _with_definition(converted, definition))
            return
        if isinstance(target, c_ast.StructRef) and target.type == "." and isinstance(target.name, c_ast.ID):
            var = _lookup(state, target.name.name)
            if var is not None and isinstance(var.value, StructValue):
                fields = tuple((k, value if k == target.field.name else v) for k, v in var.value.fields)
                if holds_pool(value) and target.field.name not in dict(fields):
                    raise self._refuse(target, frame, "a pointer into the pool is stored in a struct field not followed")
                self._set(state, target.name.name, StructValue(var.value.type_name, fields))
                return
        if holds_pool(value):
            raise self._refuse(target, frame, "a pointer into the pool is stored in memory")
        self._eval(target, state, frame)  # the store itself: an access through its pointer

    def _set(self, state, name: str, value) -> None:
        for scope in reversed(state):
            if name in scope:
                scope[name] = Var(value, scope[name].type, scope[name].escaped)
                break
        self._forget(state, name)

    def _forget(self, state, name: str) -> None:
        """Variables set from an expression that reads `name` no longer equal that expression."""
        for scope in state:
            for key, var in list(scope.items()):
                if isinstance(var.value, IntValue) and name in var.value.reads:
                    scope[key] = Var(IntValue(var.value.range), var.type, var.escaped)

    def _expr_StructRef(self, node: c_ast.StructRef, state, frame):
        if node.type == "." and isinstance(node.name, c_ast.ID):
            var = _lookup(state, node.name.name)
            if var is not None and isinstance(var.value, StructValue) and not var.escaped:
                return var.value.field(node.field.name)
        base = self._eval(node.name, state, frame)
        if isinstance(base, StructAddress) and node.type == "->":
            var = _lookup(state, base.name)
            if var is not None and isinstance(var.value, StructValue) and not var.escaped:
                return var.value.field(node.field.name)
        if holds_pool(base) and not isinstance(base, PointerValue):
            raise self._refuse(node, frame, "a struct holding a pointer into the pool is read in a way not followed")
        if isinstance(base, PointerValue):
            raise self._refuse(node, frame, "a struct is read through a pointer into the pool")
        return OTHER

    def _expr_ExprList(self, node: c_ast.ExprList, state, frame):
        value = OTHER
        for expr in node.exprs:
            value = self._eval(expr, state, frame)
        return value

    def _expr_NamedInitializer(self, node: c_ast.NamedInitializer, state, frame):
        return self._eval(node.expr, state, frame)

    def _expr_InitList(self, node: c_ast.InitList, state, frame):
        return self._init_list(node, OTHER_TYPE, state, frame, "an initialiser list")

    def _expr_Typename(self, node, state, frame):
        return OTHER

    def _expr_CompoundLiteral(self, node: c_ast.CompoundLiteral, state, frame):
        ctype = frame.function.types.resolve(node.type)
        return self._init_list(node.init, ctype, state, frame, "a compound literal")

    def _expr_FuncCall(self, node: c_ast.FuncCall, state, frame):
        args = [self._eval(a, state, frame) for a in (node.args.exprs if node.args else [])]
        name = node.name.name if isinstance(node.name, c_ast.ID) and _lookup(state, node.name.name) is None else None
        if name in self.functions:
            callee = self.functions[name]
            outer = self._held_below
            self._held_below = frame.held_below + self._held(state, node, frame).bytes
            try:
                return self._call(callee, args, frame.depth + 1, node)
            finally:
                self._held_below = outer
        if name is not None and cmsis_nn_model.is_cmsis_nn(name) and name in self.prototypes:
            return self._cmsis_nn_call(name, node, args, state, frame)
        if name == ALLOCATE:
            return self._allocate(node, args, state, frame)
        if name == FREE:
            return self._free(node, args, state, frame)
        if name in _MEMORY_FUNCTIONS and len(args) == 3:
            length = _as_int(args[2]).range
            for index in _MEMORY_FUNCTIONS[name]:
                if isinstance(args[index], PointerValue):
                    self._touch_bytes(args[index], length, node, frame)
            return OTHER
        for value, expr in zip(args, node.args.exprs if node.args else []):
            if holds_pool(value):
                shown = name or "a function through a pointer"
                raise self._refuse(expr, frame, f"{shown} is handed a pointer into the pool and its code is not seen")
            self._escape(value, state)
        return UNKNOWN_INT

    def _escape(self, value, state) -> None:
        """A local struct whose address went where it is not followed may change at any time."""
        if isinstance(value, StructAddress):
            var = _lookup(state, value.name)
            if var is not None:
                var.escaped = True

    def _allocate(self, node, args, state, frame):
        """TVMBackendAllocWorkspace(device_type, device_id, nbytes, dtype_code, dtype_bits)."""
        size = _as_int(args[2]).range if len(args) == 5 else None
        if size is None or size.hi is None or size.lo is None or size.lo < 0:
            raise self._refuse(node, frame, f"the size of a {ALLOCATE} call has no bound")
        rounded = max(-(-size.hi // WORKSPACE_ALIGNMENT) * WORKSPACE_ALIGNMENT, WORKSPACE_ALIGNMENT)
        held = self._held(state, node, frame)
        held = Held(held.blocks + ((id(node), rounded),))
        state[0][_HELD] = Var(held, OTHER_TYPE)
        self.allocation_peak = max(self.allocation_peak, frame.held_below + held.bytes)
        return Allocation(id(node))

    def _free(self, node, args, state, frame):
        """TVMBackendFreeWorkspace(device_type, device_id, ptr): the block on top of the stack."""
        held = self._held(state, node, frame)
        block = args[2] if len(args) == 3 else None
        if not isinstance(block, Allocation) or not held.blocks or held.blocks[-1][0] != block.site:
            raise self._refuse(node, frame, f"a {FREE} call frees what is not the last block allocated")
        state[0][_HELD] = Var(Held(held.blocks[:-1]), OTHER_TYPE)
        return UNKNOWN_INT

    def _held(self, state, node, frame) -> Held:
        held = state[0][_HELD].value if _HELD in state[0] else Held()
        if not isinstance(held, Held):
            raise self._refuse(node, frame, "the workspace held differs between paths that meet here")
        return held

    def _touch_bytes(self, pointer: PointerValue, length: Interval, node, frame) -> None:
        if pointer.target.is_pool:
            raise self._refuse(node, frame, "the pool is read or written directly, not through a region carved from it")
        if length.hi is None or length.lo is None or length.lo < 0:
            raise self._refuse(node, frame, f"the length handed with {pointer.target.key} has no bound")
        if length.hi == 0:
            return
        self._touch(pointer.target, pointer.offset, pointer.offset + Interval(length.hi, length.hi), node, frame)

    def _cmsis_nn_call(self, name: str, node: c_ast.FuncCall, args: list, state, frame):
        decl, types = self.prototypes[name]
        params = [cmsis_nn_model.Parameter(p.name or "", types.resolve(p.type)) for p in _parameters(decl)]
        if len(params) != len(args):
            raise self._refuse(node, frame, f"{name} is called with {len(args)} arguments; its prototype takes "
                                            f"{len(params)}")
        reach = cmsis_nn_model.extents(name, params)
        for index, (param, value) in enumerate(zip(params, args)):
            if isinstance(value, StructAddress):
                struct = value.value
                extent = reach.get(index)
                if extent is not None and extent.context and isinstance(struct, StructValue):
                    buffer, size = struct.field("buf"), _as_int(struct.field("size")).range
                    if isinstance(buffer, PointerValue):
                        self._touch_bytes(buffer, size, node, frame)
                elif holds_pool(struct):
                    raise self._refuse(node, frame, f"{name} is handed {value.name}, which holds a pointer into the pool")
                if not _points_to_const(_parameters(decl)[index]):
                    self._escape(value, state)
                continue
            if not holds_pool(value):
                continue
            extent = reach.get(index)
            if extent is None or extent.context:
                raise self._refuse(node, frame, f"argument {param.name or index} of {name} is a pointer into the pool "
                                                "whose extent its prototype does not state")
            count = self._element_count(extent, args, state, name, node, frame)
            if extent.element is None:
                raise self._refuse(node, frame, f"the element size of {param.name} of {name} is not known")
            self._touch_bytes(value, count * Interval.of(extent.element), node, frame)
        return UNKNOWN_INT

    def _element_count(self, extent, args, state, name, node, frame) -> Interval:
        if extent.dims_index is not None:
            dims = args[extent.dims_index]
            struct = dims.value if isinstance(dims, StructAddress) else None
            if not isinstance(struct, StructValue):
                raise self._refuse(node, frame, f"the dims describing argument {extent.index} of {name} are not a "
                                                "local cmsis_nn_dims")
            factors = [_as_int(struct.field(f)).range for f in cmsis_nn_model.DIMS_FIELDS]
        else:
            factors = [_as_int(args[i]).range for i in extent.factors]
        count = Interval.of(1)
        for factor in factors:
            if factor.lo is None or factor.lo < 0:
                raise self._refuse(node, frame, f"a length of argument {extent.index} of {name} may be negative or "
                                                "unbounded")
            count = count * factor
        return count

    def _call(self, function: _Function, args: list, depth: int, where) -> IntValue:
        """Follow a call; a sealed function already followed with the same argument ranges at the same
        depth is not followed again: what it does depends on nothing else, and it touches no pool."""
        key = self._sealed_call_key(function, args, depth)
        if key is not None and key in self._followed_calls:
            return UNKNOWN_INT
        value = self._follow_call(function, args, depth, where)
        if key is not None:
            self._followed_calls.add(key)
        return value

    def _sealed_call_key(self, function: _Function, args: list, depth: int) -> tuple | None:
        if depth <= STEP_DEPTH or not all(isinstance(value, IntValue) for value in args):
            return None
        if not self._is_sealed(function.node.decl.name):
            return None
        return (function.node.decl.name, depth, tuple(value.range for value in args))

    def _is_sealed(self, name: str) -> bool:
        """A function whose parameters are all integers and whose body names neither the pool, nor the
        allocator, nor a function that is not sealed itself: its analysis is decided by its argument
        ranges alone and cannot reach the pool (globals read as unknowns of their type)."""
        if name not in self._sealed:
            self._sealed[name] = False  # a call cycle is not sealed
            function = self.functions[name]
            params = _parameters(function.node.decl.type)
            integers = all(function.types.resolve(param.type).kind in ("int", "float") for param in params)
            names = _reads(function.node.body)
            callees = names & self.functions.keys()
            self._sealed[name] = integers and not names & {self.pool_name, ALLOCATE, FREE, *_MEMORY_FUNCTIONS} \
                and not any(cmsis_nn_model.is_cmsis_nn(n) for n in names) \
                and all(self._is_sealed(callee) for callee in callees - {name})
        return self._sealed[name]

    def _follow_call(self, function: _Function, args: list, depth: int, where) -> IntValue:
        name = function.node.decl.name
        if name in self.stack:
            raise NotProven(f"{name} calls itself (recursion is not followed)")
        if depth > MAX_CALL_DEPTH:
            raise NotProven(f"calls nest deeper than {MAX_CALL_DEPTH} at {name}")
        params = _parameters(function.node.decl.type)
        if len(args) != len(params) and not (len(params) == 1 and _is_void(params[0]) and not args):
            raise NotProven(f"{name} is called with {len(args)} arguments but takes {len(params)}")
        frame = _Frame(function, depth, held_below=self._held_below)
        scope = {_HELD: Var(Held(), OTHER_TYPE)}
        pool_parameter = None
        for param, value in zip(params, args):
            ctype = function.types.resolve(param.type)
            if isinstance(value, PointerValue) and value.target.is_pool:
                pool_parameter = param.name
            if isinstance(value, StructAddress):
                if holds_pool(value):
                    raise NotProven(f"{name} is handed the address of {value.name}, which holds a pointer into the pool")
                value = OTHER
            if isinstance(value, IntValue):  # its definition names the caller's variables, not the callee's
                value = IntValue(value.range)
            scope[param.name] = Var(self._convert(value, ctype, param, frame), ctype)
        counted = depth <= STEP_DEPTH and self.loop_depth == 0
        if depth == STEP_DEPTH and counted:
            self.result.calls.append(name)
        first = self.step + 1 if counted else self.step
        self.stack.append(name)
        try:
            self._body(function.node.body.block_items or [], [scope], frame, top=True)
        finally:
            self.stack.pop()
        for label, ((jump, _), *_) in frame.gotos.items():
            raise self._refuse(jump, frame, f"`goto {label}` lands on no label of the function's outermost block "
                               "after it")
        if depth == STEP_DEPTH and counted:
            self.result.call_spans.append((name, first, max(self.step, first)))
        if pool_parameter is not None and depth == STEP_DEPTH:
            known = self.result.operators.get(name)
            self.result.operators[name] = Operator(pool_parameter, known.first if known else first,
                                                   max(self.step, first))
        if counted:
            self.step += 1  # what the caller does after the call comes later
        return UNKNOWN_INT

    # --- conditions --------------------------------------------------------------------------------

    def _condition_value(self, cond, state, frame) -> None:
        value = self._eval(cond, state, frame)
        if holds_pool(value):
            raise self._refuse(cond, frame, "a pointer into the pool is tested as a condition")

    def _refine(self, cond, state, frame, truth: bool):
        """The state narrowed by `cond` being `truth` (None: no value can make it so)."""
        if state is None:
            return None
        if isinstance(cond, c_ast.UnaryOp) and cond.op == "!":
            return self._refine(cond.expr, state, frame, not truth)
        if isinstance(cond, c_ast.BinaryOp) and cond.op in ("&&", "||"):
            both = (cond.op == "&&") == truth
            if both:
                return self._refine(cond.right, self._refine(cond.left, state, frame, truth), frame, truth)
            left = self._refine(cond.left, _copy(state), frame, truth)
            right = self._refine(cond.right, self._refine(cond.left, state, frame, not truth), frame, truth)
            return self._join(left, right, cond, frame)
        if isinstance(cond, c_ast.BinaryOp) and cond.op in _FLIP:
            decided = self._comparison_decided(cond, state, frame)
            if decided is not None:
                return state if decided == truth else None
            op = cond.op if truth else _NEGATE[cond.op]
            state = self._narrow(cond.left, op, cond.right, state, frame)
            if state is not None:
                state = self._narrow(cond.right, _FLIP[op], cond.left, state, frame)
            return state
        if isinstance(cond, c_ast.Constant) and _pure(cond):
            value = self._eval(cond, _copy(state), frame)
            if isinstance(value, IntValue) and value.range.bounded and value.range.lo == value.range.hi:
                return state if (value.range.lo != 0) == truth else None
        return state

    def _comparison_decided(self, cond: c_ast.BinaryOp, state, frame) -> bool | None:
        """A comparison every value of its sides answers the same way (TVM's `if (1 < 2 && ...)`)."""
        if not (_pure(cond.left) and _pure(cond.right)):
            return None
        left, right = self._eval(cond.left, _copy(state), frame), self._eval(cond.right, _copy(state), frame)
        if not (isinstance(left, IntValue) and isinstance(right, IntValue)):
            return None
        a, b = left.range, right.range
        if not (a.bounded and b.bounded) or a.lo < 0 or b.lo < 0:
            return None  # a negative value compared with an unsigned one is converted first
        if cond.op in (">", ">="):
            a, b = b, a
        if cond.op in ("<", ">"):
            return True if a.hi < b.lo else False if a.lo >= b.hi else None
        if cond.op in ("<=", ">="):
            return True if a.hi <= b.lo else False if a.lo > b.hi else None
        same = True if a.lo == a.hi == b.lo == b.hi else False if a.meet(b).empty else None
        return same if same is None or cond.op == "==" else not same

    def _narrow(self, subject, op: str, bound, state, frame):
        while isinstance(subject, c_ast.Cast):
            subject = subject.expr
        if not isinstance(subject, c_ast.ID) or not _pure(bound):
            return state
        var = _lookup(state, subject.name)
        if var is None or var.escaped or not isinstance(var.value, IntValue):
            return state
        limit = self._eval(bound, _copy(state), frame)
        if not isinstance(limit, IntValue):
            return state
        current = self._read_var(var, state, frame).range
        b = limit.range
        allowed = {"<": Interval(None, None if b.hi is None else b.hi - 1), "<=": Interval(None, b.hi),
                   ">": Interval(None if b.lo is None else b.lo + 1, None), ">=": Interval(b.lo, None),
                   "==": b, "!=": TOP}[op]
        narrowed = current.meet(allowed)
        if op == "!=" and b.bounded and b.lo == b.hi:
            if narrowed.lo == b.lo:
                narrowed = Interval(b.lo + 1, narrowed.hi)
            elif narrowed.hi == b.hi:
                narrowed = Interval(narrowed.lo, b.hi - 1)
        if narrowed.empty:
            return None
        for scope in reversed(state):
            if subject.name in scope:
                old = scope[subject.name]
                scope[subject.name] = Var(IntValue(narrowed, old.value.definition, old.value.reads), old.type)
                break
        return state

    # --- helpers -----------------------------------------------------------------------------------

    def _convert(self, value, ctype: CType, node, frame):
        if isinstance(value, Allocation) and ctype.kind in ("pointer", "other"):
            return value
        if ctype.kind == "pointer":
            if isinstance(value, PointerValue):
                return PointerValue(value.target, value.offset, ctype.element_bytes)
            if isinstance(value, StructAddress):
                if holds_pool(value):
                    raise self._refuse(node, frame, f"the address of {value.name}, which holds a pointer into the pool, "
                                                    "is kept where it is not followed")
                return value
            return OTHER
        if ctype.kind == "int":
            if isinstance(value, PointerValue):
                raise self._refuse(node, frame, "a pointer into the pool is converted to an integer")
            if holds_pool(value):
                raise self._refuse(node, frame, "a struct holding a pointer into the pool is converted")
            if not isinstance(value, IntValue):
                return IntValue(ctype.range or TOP)
            bounds = ctype.range or TOP
            if value.range.within(bounds):
                return value
            return IntValue(bounds)
        if holds_pool(value) and not (ctype.kind == "struct" and isinstance(value, StructValue)):
            raise self._refuse(node, frame, f"a pointer into the pool is converted to a {ctype.kind}")
        if ctype.kind == "struct" and isinstance(value, StructValue):
            return value
        if isinstance(value, StructAddress):
            return value
        return OTHER if ctype.kind != "other" or not isinstance(value, IntValue) else value

    def _join(self, a, b, node, frame):
        if a is None:
            return b
        if b is None:
            return a
        if len(a) != len(b):
            raise self._refuse(node, frame, "scopes differ where paths meet")
        joined = []
        for scope_a, scope_b in zip(a, b):
            scope = {}
            for name in scope_a.keys() | scope_b.keys():
                var_a, var_b = scope_a.get(name), scope_b.get(name)
                if var_a is None or var_b is None:
                    continue
                value = join(var_a.value, var_b.value)
                if isinstance(value, Conflict):
                    raise self._refuse(node, frame, f"{name} points into different regions on different paths")
                scope[name] = Var(value, var_a.type, var_a.escaped or var_b.escaped)
            joined.append(scope)
        return joined

    def _pop_scope(self, state) -> None:
        for name in state.pop():
            self._forget(state, name)

    def _refuse(self, node, frame: _Frame, why: str) -> NotProven:
        coord = getattr(node, "coord", None)
        where = f"{coord.file}:{coord.line}" if coord is not None and coord.file else frame.function.file.path
        return NotProven(f"{why} ({frame.function.node.decl.name}, {where})")


_FLIP = {"<": ">", ">": "<", "<=": ">=", ">=": "<=", "==": "==", "!=": "!="}
_NEGATE = {"<": ">=", ">": "<=", "<=": ">", ">=": "<", "==": "!=", "!=": "=="}


def _pure(node: c_ast.Node) -> bool:
    if isinstance(node, (c_ast.FuncCall, c_ast.Assignment)):
        return False
    if isinstance(node, c_ast.UnaryOp) and node.op in ("++", "--", "p++", "p--"):
        return False
    return all(_pure(child) for _, child in node.children())


def _arithmetic(node: c_ast.Node) -> bool:
    """Only variables, literals and operators: its value depends on nothing but the variables."""
    if isinstance(node, (c_ast.ID, c_ast.Constant)):
        return True
    if isinstance(node, c_ast.UnaryOp) and node.op in ("-", "+", "!", "~"):
        return _arithmetic(node.expr)
    if isinstance(node, (c_ast.BinaryOp, c_ast.TernaryOp)):
        return all(_arithmetic(child) for _, child in node.children())
    if isinstance(node, c_ast.Cast):
        return _arithmetic(node.expr)
    return False


def _with_definition(value, definition, name: str | None = None):
    if isinstance(value, IntValue) and definition is not None and _arithmetic(definition):
        reads = _reads(definition)
        if name not in reads:
            return IntValue(value.range, definition, reads)
    return value


def _reads(node: c_ast.Node) -> frozenset[str]:
    if isinstance(node, c_ast.ID):
        return frozenset([node.name])
    names: set[str] = set()
    for _, child in node.children():
        names |= _reads(child)
    return frozenset(names)


def _parameters(decl) -> list:
    if not isinstance(decl, c_ast.FuncDecl) or decl.args is None:
        return []
    return [p for p in decl.args.params if not _is_void(p)]


def _is_void(param) -> bool:
    return isinstance(param, c_ast.Typename) and isinstance(param.type, c_ast.TypeDecl) and \
        isinstance(param.type.type, c_ast.IdentifierType) and param.type.type.names == ["void"]


def _points_to_const(param) -> bool:
    node = getattr(param, "type", None)
    return isinstance(node, c_ast.PtrDecl) and isinstance(node.type, c_ast.TypeDecl) and "const" in (node.type.quals or [])


def _lookup(state, name: str) -> Var | None:
    if state is None:
        return None
    for scope in reversed(state):
        if name in scope:
            return scope[name]
    return None


def _copy(state):
    return None if state is None else [dict(scope) for scope in state]


def _replace(state, new) -> None:
    if new is None:
        raise NotProven("an expression with no path through it")
    state[:] = new


def _as_int(value) -> IntValue:
    return value if isinstance(value, IntValue) else UNKNOWN_INT


def _unknown_of(ctype: CType | None):
    if ctype is not None and ctype.kind == "int":
        return IntValue(ctype.range or TOP)
    return OTHER


def _state_covers(old, new) -> bool:
    if new is None:
        return True
    if old is None:
        return False
    for scope_old, scope_new in zip(old, new):
        for name, var in scope_new.items():
            if name not in scope_old or not covers(scope_old[name].value, var.value):
                return False
            if var.escaped and not scope_old[name].escaped:
                return False
    return True


def _widen_state(old, new):
    if old is None:
        return new
    widened = []
    for scope_old, scope_new in zip(old, new):
        scope = {}
        for name, var in scope_new.items():
            before = scope_old.get(name)
            value = widen(before.value, var.value) if before is not None else var.value
            if isinstance(value, Conflict):
                raise NotProven(f"{name} points into different regions in different iterations")
            scope[name] = Var(value, var.type, var.escaped or (before.escaped if before else False))
        widened.append(scope)
    return widened


def _collect_enums(node: c_ast.Node, enums: dict[str, int]) -> None:
    if isinstance(node, c_ast.Enum) and node.values is not None:
        value = -1
        for item in node.values.enumerators:
            if item.value is not None:
                literal = parse_int(item.value.value) if isinstance(item.value, c_ast.Constant) else None
                if literal is None:
                    return
                value = literal
            else:
                value += 1
            enums[item.name] = value
        return
    for _, child in node.children():
        _collect_enums(child, enums)

