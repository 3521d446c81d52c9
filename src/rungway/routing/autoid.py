"""The `auto` id grammar: `auto`, `auto/<tier>`, `auto/<category>`, `auto/<category>:<tier>`.

Tiers are the two ladders: `subscription` (fail closed) and `thrifty` (fail open, the
default). Categories filter candidates by model capability. The flat ids and the category
forms parse to the same `AutoSpec`, so every form runs the ladder.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Ladder(StrEnum):
    """Which ladder an `auto` id runs."""

    SUBSCRIPTION = "subscription"
    THRIFTY = "thrifty"


class Category(StrEnum):
    """A capability a model may have."""

    CODING = "coding"
    REASONING = "reasoning"
    VISION = "vision"
    CHAT = "chat"


@dataclass(frozen=True, slots=True)
class AutoSpec:
    """A parsed `auto` id."""

    ladder: Ladder
    category: Category | None

    @property
    def id(self) -> str:
        """The canonical id, e.g. `auto/coding:subscription`."""
        if self.category is None:
            return f"auto/{self.ladder}"
        return f"auto/{self.category}:{self.ladder}"


class BadAutoId(ValueError):
    """An id that starts like an `auto` id but is not one; the message says what is valid."""


def is_auto_id(name: str) -> bool:
    """True for `auto` and anything under `auto/`."""
    return name == "auto" or name.startswith("auto/")


def parse_auto_id(name: str) -> AutoSpec:
    """Parse an `auto` id or raise `BadAutoId`."""
    if name == "auto":
        return AutoSpec(Ladder.THRIFTY, None)
    rest = name.removeprefix("auto/")
    head, colon, tail = rest.partition(":")
    if not colon:
        if head in Ladder.__members__.values():
            return AutoSpec(Ladder(head), None)
        if head in Category.__members__.values():
            return AutoSpec(Ladder.THRIFTY, Category(head))
    elif head in Category.__members__.values() and tail in Ladder.__members__.values():
        return AutoSpec(Ladder(tail), Category(head))
    raise BadAutoId(
        f"{name!r} is not an auto id; use auto, auto/<tier>, auto/<category> or "
        f"auto/<category>:<tier> with tier one of {', '.join(Ladder)} and category one of "
        f"{', '.join(Category)}"
    )


def advertised_auto_ids() -> list[str]:
    """Every `auto` id, for `/v1/models`."""
    ids = ["auto", *(f"auto/{ladder}" for ladder in Ladder)]
    for category in Category:
        ids.append(f"auto/{category}")
        ids.extend(f"auto/{category}:{ladder}" for ladder in Ladder)
    return ids
