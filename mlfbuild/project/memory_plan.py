"""One arena for every buffer of a lowered model: activations and each operator's scratch.

A buffer is live over an inclusive interval of steps (the operator calls, in order); two buffers may
share bytes only when their intervals do not meet. Placement is greedy by size with conflict checks:
the largest buffers go first, each at the lowest offset where it overlaps no placed buffer that is
live at the same time. Large buffers fix the arena's shape early and the small ones fill the gaps
left beside them, which is why this order lands at or near the floor on the graph models here (see
docs/benchmarks.md). Where it does not, a bounded search swaps pairs in the order and keeps what is
no worse (TVM's hill_climb idea). Everything is deterministic: ties break on interval and then on
name, and the search has a fixed seed.

The floor is the largest sum of (aligned) sizes live at any one step: no placement can do better.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Buffer:
    """Bytes needed from step `first` to step `last`, both included."""

    name: str
    size: int
    first: int
    last: int

    def live_with(self, other: "Buffer") -> bool:
        return self.first <= other.last and other.first <= self.last


@dataclass(frozen=True)
class MemoryPlan:
    buffers: tuple[Buffer, ...]
    offsets: dict[str, int]  # buffer name -> byte offset in the arena
    arena_bytes: int
    floor_bytes: int
    alignment: int

    def conflicts(self) -> list[tuple[str, str]]:
        """Replay the plan step by step: the pairs of buffers live at one step whose bytes overlap."""
        found = []
        steps = sorted({step for b in self.buffers for step in range(b.first, b.last + 1)})
        for step in steps:
            live = sorted((b for b in self.buffers if b.first <= step <= b.last), key=lambda b: self.offsets[b.name])
            for i, low in enumerate(live):
                for high in live[i + 1:]:
                    if self.offsets[high.name] >= self.offsets[low.name] + low.size:
                        break
                    if high.size and low.size and (low.name, high.name) not in found:
                        found.append((low.name, high.name))
        return found

    def to_json(self) -> dict:
        return {"arena_bytes": self.arena_bytes, "floor_bytes": self.floor_bytes, "alignment": self.alignment,
                "algorithm": "greedy by size, then pair swaps",
                "buffers": [{"name": b.name, "size": b.size, "first": b.first, "last": b.last,
                             "offset": self.offsets[b.name]} for b in self.buffers]}


def align(value: int, to: int) -> int:
    return (value + to - 1) // to * to


def floor_bytes(buffers: list[Buffer], alignment: int) -> int:
    """The most bytes live at any one step (sizes aligned as the arena aligns them)."""
    events: dict[int, int] = {}
    for b in buffers:
        events[b.first] = events.get(b.first, 0) + align(b.size, alignment)
        events[b.last + 1] = events.get(b.last + 1, 0) - align(b.size, alignment)
    live = peak = 0
    for step in sorted(events):
        live += events[step]
        peak = max(peak, live)
    return peak


def plan_memory(buffers: list[Buffer], alignment: int = 16) -> MemoryPlan:
    names = [b.name for b in buffers]
    if len(set(names)) != len(names):
        raise ValueError("buffer names must be unique")
    if any(b.size < 0 or b.first > b.last for b in buffers):
        raise ValueError("a buffer needs a size >= 0 and first <= last")
    order = sorted(buffers, key=lambda b: (-align(b.size, alignment), -(b.last - b.first), b.first, b.name))
    floor = floor_bytes(buffers, alignment)
    offsets, arena = _place(order, alignment)
    # Above the floor, swap pairs in the order (a fixed seed: the same plan every time) and keep any
    # order that is no worse, within a bounded number of placements: TVM's hill_climb idea.
    rng = random.Random(0)
    for _ in range(min(MAX_SWAPS, SWAP_WORK // max(len(order) ** 2, 1)) if arena > floor and len(order) > 2 else 0):
        trial = list(order)
        i, j = rng.randrange(len(trial)), rng.randrange(len(trial))
        trial[i], trial[j] = trial[j], trial[i]
        trial_offsets, trial_arena = _place(trial, alignment)
        if trial_arena <= arena:
            order, offsets, arena = trial, trial_offsets, trial_arena
            if arena == floor:
                break
    return MemoryPlan(buffers=tuple(buffers), offsets=offsets, arena_bytes=arena, floor_bytes=floor,
                      alignment=alignment)


MAX_SWAPS = 3000
SWAP_WORK = 6_000_000  # buffers² × swaps: a fraction of a second whatever the model


def _place(order: list[Buffer], alignment: int) -> tuple[dict[str, int], int]:
    placed: list[tuple[Buffer, int]] = []
    offsets: dict[str, int] = {}
    for buffer in order:
        offset = _lowest_fit(buffer, placed, alignment)
        offsets[buffer.name] = offset
        placed.append((buffer, offset))
    return offsets, max((align(offsets[b.name] + b.size, alignment) for b in order), default=0)


def _lowest_fit(buffer: Buffer, placed: list[tuple[Buffer, int]], alignment: int) -> int:
    """The lowest aligned offset where `buffer` overlaps no placed buffer live at the same time."""
    size = align(buffer.size, alignment)
    busy = sorted((offset, offset + align(other.size, alignment)) for other, offset in placed
                  if other.live_with(buffer) and other.size)
    candidate = 0
    for start, end in busy:
        if candidate + size <= start:
            break
        candidate = max(candidate, end)
    return candidate
