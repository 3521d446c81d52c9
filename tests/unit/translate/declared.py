"""What a codec declares it drops, and the canonical values its wire can carry because of it.

The shared suite holds every codec to the same canonical promises; where a wire cannot carry
something, the codec says so in its module's `DROPPED_FIELDS`, and these helpers turn that
declaration into the value a round trip may give back instead.
"""

from __future__ import annotations

import dataclasses
import importlib

from rungway.translate.canonical import CanonicalUsage, Message
from rungway.translate.codec import Codec


def declared_drops(codec: Codec) -> frozenset[str]:
    """The `DROPPED_FIELDS` of the module that defines `codec` (none declared: empty)."""
    module = importlib.import_module(type(codec).__module__)
    drops: frozenset[str] = getattr(module, "DROPPED_FIELDS", frozenset())
    return drops


def carried_usage(usage: CanonicalUsage, codec: Codec) -> CanonicalUsage:
    """`usage` as it reads back through `codec`'s wire, given the counts it declares dropped.

    A wire without a cache-write count reports those tokens as plain input; a wire without a
    reasoning count reports reasoning inside the output only (where it already is).
    """
    drops = declared_drops(codec)
    if "cache_write_tokens" in drops:
        usage = dataclasses.replace(
            usage, input_tokens=usage.input_tokens + usage.cache_write_tokens, cache_write_tokens=0
        )
    if "reasoning_tokens" in drops:
        usage = dataclasses.replace(usage, reasoning_tokens=0)
    return usage


def joined_turns(messages: tuple[Message, ...]) -> tuple[Message, ...]:
    """`messages` with consecutive turns of one role joined: the same conversation, as wires
    that split a turn into several items (or join several into one) read it."""
    joined: list[Message] = []
    for message in messages:
        if joined and joined[-1].role == message.role:
            joined[-1] = Message(message.role, joined[-1].parts + message.parts)
        else:
            joined.append(message)
    return tuple(joined)
