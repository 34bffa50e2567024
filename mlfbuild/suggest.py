""""Did you mean" for names a user typed: board names, flags, models, project-file keys."""

from __future__ import annotations

import difflib
from typing import Iterable


def close_matches(word: str, choices: Iterable[str], count: int = 1) -> list[str]:
    """The choices closest to `word` (ignoring case, '-' and '_' differences), best first."""
    def key(text: str) -> str:
        return text.lower().replace("_", "-")

    by_key: dict[str, str] = {}
    for choice in choices:  # the first spelling of a key wins: list preferred names first
        by_key.setdefault(key(choice), choice)
    return [by_key[k] for k in difflib.get_close_matches(key(word), list(by_key), n=count, cutoff=0.6)]


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """' (did you mean 'x'?)' when a choice is close to `word`, else ''."""
    matches = close_matches(word, choices)
    return f" (did you mean '{matches[0]}'?)" if matches else ""
