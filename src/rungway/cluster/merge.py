"""How a connection's state written by several processes is merged: part by part, the
last change wins.

A connection's saved state is split into five parts that change independently: its quota
windows (with their exhaustion memory), its cooldown, its breaker, its overage flags and
its operator's disable. Each part carries the instant it last changed and the origin of
the process that changed it. Merging two records keeps, for every part, the one changed
last (the origin breaks a tie), so an operator's disable on one replica is not undone by
a reading another replica takes a moment later, and what a replica changed while Redis
was away is merged on its return instead of overwriting, or being overwritten by, what
the others changed meanwhile.

Instants are the processes' wall clocks: replicas are expected to keep them in step (NTP
does; a part written within a clock skew of another may lose to it).

Redis runs the same rule in `MERGE_SCRIPT`, so a write never needs a read first. A part
travels as a JSON string, which Redis's cjson passes through unchanged (it would round
numbers it decoded to 14 digits).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from rungway.quota.encoding import saved_document, saved_from_document
from rungway.quota.store import SavedConnection
from rungway.routing.snapshot import ConnectionState

PARTS: Mapping[str, tuple[str, ...]] = {
    "windows": ("windows",),
    "cooldown": ("cooldown_until", "cooldown_reason"),
    "breaker": ("breaker_failures", "breaker_opened_at"),
    "overage": ("overage_permitted", "overage_in_use"),
    "disabled": ("disabled",),
}
"""Each part's name and the fields of the saved document it holds."""


@dataclass(frozen=True, slots=True)
class Part:
    """One part of a connection's state: its fields as JSON, when and by whom it changed."""

    data: str
    at: float
    by: str

    def newer_than(self, other: Part | None) -> bool:
        """True when this part changed after `other` (the origin breaks a tie)."""
        return other is None or (self.at, self.by) > (other.at, other.by)


Record = Mapping[str, Part]
"""A connection's state as the cluster keeps it: part name to part."""


def split(saved: SavedConnection | None) -> dict[str, str]:
    """Each part's fields as JSON (a forgotten state is every part at its default)."""
    document = saved_document(saved if saved is not None else SavedConnection(ConnectionState()))
    return {
        name: orjson.dumps({field: document[field] for field in fields}).decode()
        for name, fields in PARTS.items()
    }


def joined(record: Record) -> SavedConnection:
    """The saved state a record describes; raises on a part it cannot read."""
    document: dict[str, Any] = {}
    for name in PARTS:
        part = record.get(name)
        document.update(orjson.loads(part.data if part is not None else DEFAULT_PARTS[name]))
    return saved_from_document(document)


def merged(mine: Record, theirs: Record) -> dict[str, Part]:
    """Every part from whichever record changed it last."""
    result = dict(mine)
    for name, part in theirs.items():
        if part.newer_than(result.get(name)):
            result[name] = part
    return result


def encode_record(record: Record) -> str:
    """The record as Redis keeps it: JSON with only strings in it."""
    return orjson.dumps(
        {
            name: {"data": part.data, "at": repr(part.at), "by": part.by}
            for name, part in record.items()
        }
    ).decode()


def decode_record(blob: bytes | str) -> dict[str, Part]:
    """The record `encode_record` (or `MERGE_SCRIPT`) wrote; raises on anything else."""
    data = orjson.loads(blob)
    if not isinstance(data, dict):
        raise TypeError(f"a state record is a JSON object, not {type(data).__name__}")
    return {
        name: Part(str(part["data"]), float(part["at"]), str(part["by"]))
        for name, part in data.items()
        if name in PARTS
    }


DEFAULT_PARTS: Mapping[str, str] = split(None)
"""Each part at its default, as a connection nothing has happened to has it."""

MERGE_SCRIPT = """
-- KEYS[1] the state hash; ARGV: connection id, incoming record, feed channel, origin.
-- Keeps each part changed last, writes the merged record and tells the feed.
local function newer(a, b)
  local x, y = tonumber(a.at), tonumber(b.at)
  if x ~= y then return x > y end
  return a.by > b.by
end
local incoming = cjson.decode(ARGV[2])
local held = redis.call('HGET', KEYS[1], ARGV[1])
if held then
  for name, part in pairs(cjson.decode(held)) do
    local mine = incoming[name]
    if mine == nil or newer(part, mine) then incoming[name] = part end
  end
end
local record = cjson.encode(incoming)
redis.call('HSET', KEYS[1], ARGV[1], record)
redis.call('PUBLISH', ARGV[3], ARGV[4] .. '\\n' .. ARGV[1] .. '\\n' .. record)
return record
"""
"""The merge rule in Redis: one round trip writes a change and announces the result."""
