"""The simulators' prompt cache model: minimum lengths, breakpoints, TTLs under a given
time, per-account and per-model isolation, and OpenAI's 128-token steps."""

from __future__ import annotations

from typing import Any

import pytest

from rungway.sim.prompt_cache import (
    CacheRules,
    CacheUse,
    PromptCache,
    anthropic_rules,
    conversation_boundaries,
    gemini_rules,
    openai_rules,
)
from rungway.sim.wire.prompt_prefix import (
    anthropic_boundaries,
    chat_boundaries,
    gemini_boundaries,
    responses_boundaries,
)

SONNET = "claude-sonnet-4-5"
EPHEMERAL = {"type": "ephemeral"}


def text(tokens: int, seed: str = "a") -> str:
    """About `tokens` tokens of text in the sims' estimate (four characters a token)."""
    return (seed * 4) * tokens


def claude_body(
    system_tokens: int, turns: list[str], *, system_ttl: str | None = None, mark_last: bool = True
) -> dict[str, Any]:
    """A Claude Code-like request: a cached system prompt and the last turn marked."""
    control: dict[str, Any] = (
        dict(EPHEMERAL) if system_ttl is None else {**EPHEMERAL, "ttl": system_ttl}
    )
    messages: list[dict[str, Any]] = []
    for index, turn in enumerate(turns):
        block: dict[str, Any] = {"type": "text", "text": turn}
        if mark_last and index == len(turns) - 1:
            block["cache_control"] = dict(EPHEMERAL)
        messages.append({"role": "user" if index % 2 == 0 else "assistant", "content": [block]})
    return {
        "model": SONNET,
        "max_tokens": 100,
        "system": [{"type": "text", "text": text(system_tokens), "cache_control": control}],
        "messages": messages,
    }


def serve(
    cache: PromptCache,
    body: dict[str, Any],
    now: float,
    *,
    account: str = "acct-1",
    model: str = SONNET,
    rules: CacheRules | None = None,
    kind: str = "anthropic",
) -> CacheUse:
    """Look a request up, keep what it wrote, and return its use."""
    build = {
        "anthropic": anthropic_boundaries,
        "chat": chat_boundaries,
        "responses": responses_boundaries,
        "gemini": gemini_boundaries,
    }[kind]
    boundaries = build(body)
    total = boundaries[-1].tokens + 10 if boundaries else 10
    rules = rules or anthropic_rules(model)
    use = cache.look(account, model, boundaries, total, rules=rules, now=now)
    cache.keep(account, model, use, now)
    return use


def test_a_prefix_below_the_minimum_is_neither_written_nor_read() -> None:
    cache = PromptCache()
    body = claude_body(900, ["hello"])
    first = serve(cache, body, 0.0)
    second = serve(cache, body, 1.0)
    assert (first.read_tokens, first.written_tokens) == (0, 0)
    assert (second.read_tokens, second.written_tokens) == (0, 0)


def test_a_long_enough_prefix_is_written_once_then_read() -> None:
    cache = PromptCache()
    body = claude_body(1500, ["hello"])
    first = serve(cache, body, 0.0)
    second = serve(cache, body, 10.0)
    assert first.read_tokens == 0
    assert first.written_5m_tokens >= 1500
    assert second.read_tokens == first.written_5m_tokens
    assert second.written_tokens == 0
    # Input left over is what follows the last breakpoint: the same on both turns.
    assert second.input_tokens == first.input_tokens


@pytest.mark.parametrize(
    ("model", "minimum"),
    [
        ("claude-sonnet-4-5", 1024),
        ("claude-haiku-4-5", 4096),
        ("claude-3-5-haiku-latest", 2048),
        ("claude-opus-4-5", 4096),
    ],
)
def test_the_minimum_depends_on_the_model(model: str, minimum: int) -> None:
    cache = PromptCache()
    below = claude_body(minimum - 100, ["x"], mark_last=False)
    above = claude_body(minimum + 100, ["x"], mark_last=False)
    assert serve(cache, below, 0.0, model=model).written_tokens == 0
    assert serve(cache, above, 0.0, model=model).written_tokens >= minimum


def test_nothing_is_cached_without_a_breakpoint() -> None:
    cache = PromptCache()
    body = claude_body(3000, ["hello"], mark_last=False)
    body["system"][0].pop("cache_control")
    assert serve(cache, body, 0.0).written_tokens == 0
    assert serve(cache, body, 1.0).read_tokens == 0


def test_a_top_level_cache_control_marks_the_last_block() -> None:
    cache = PromptCache()
    body = claude_body(1500, ["first question"], mark_last=False)
    body["system"][0].pop("cache_control")
    body["cache_control"] = dict(EPHEMERAL)
    first = serve(cache, body, 0.0)
    assert first.written_tokens == anthropic_boundaries(body)[-1].tokens
    assert serve(cache, body, 1.0).read_tokens == first.written_tokens


def test_the_next_turn_reads_the_conversation_so_far() -> None:
    cache = PromptCache()
    turn_one = claude_body(1500, [text(200, "q")])
    turn_two = claude_body(1500, [text(200, "q"), text(100, "r"), text(50, "s")])
    first = serve(cache, turn_one, 0.0)
    second = serve(cache, turn_two, 30.0)
    # Moving the breakpoint to the new last turn does not change the prefix it read.
    assert second.read_tokens == first.written_tokens
    assert second.written_5m_tokens > 0
    assert second.read_tokens + second.written_tokens == anthropic_boundaries(turn_two)[-1].tokens


def test_only_the_breakpoints_prefix_is_read_when_the_turns_change() -> None:
    cache = PromptCache()
    serve(cache, claude_body(1500, ["one conversation"]), 0.0)
    other = claude_body(1500, ["another conversation"])
    use = serve(cache, other, 1.0)
    system_tokens = anthropic_boundaries(other)[0].tokens
    assert use.read_tokens == system_tokens
    assert use.written_5m_tokens == anthropic_boundaries(other)[-1].tokens - system_tokens


def test_a_five_minute_entry_expires_unless_read() -> None:
    cache = PromptCache()
    body = claude_body(1500, ["hello"])
    written = serve(cache, body, 0.0).written_tokens
    assert serve(cache, body, 299.0).read_tokens == written
    # The read at 299 s refreshed it: 5 minutes more from then.
    assert serve(cache, body, 590.0).read_tokens == written
    after = serve(cache, body, 591.0 + 300.0)
    assert after.read_tokens == 0
    assert after.written_5m_tokens == written


def test_a_one_hour_breakpoint_lives_an_hour() -> None:
    cache = PromptCache()
    body = claude_body(1500, ["hello"], system_ttl="1h", mark_last=False)
    first = serve(cache, body, 0.0)
    assert first.written_1h_tokens >= 1500
    assert first.written_5m_tokens == 0
    assert serve(cache, body, 3000.0).read_tokens == first.written_1h_tokens
    assert serve(cache, body, 3000.0 + 3601.0).read_tokens == 0


def test_one_hour_and_five_minute_stretches_are_told_apart() -> None:
    cache = PromptCache()
    body = claude_body(1500, [text(600, "q")], system_ttl="1h")
    use = serve(cache, body, 0.0)
    boundaries = anthropic_boundaries(body)
    assert use.written_1h_tokens == boundaries[0].tokens
    assert use.written_5m_tokens == boundaries[-1].tokens - boundaries[0].tokens


def test_another_account_does_not_read_this_accounts_cache() -> None:
    cache = PromptCache()
    body = claude_body(1500, ["hello"])
    serve(cache, body, 0.0, account="acct-1")
    elsewhere = serve(cache, body, 1.0, account="acct-2")
    assert elsewhere.read_tokens == 0
    assert elsewhere.written_tokens > 0
    assert serve(cache, body, 2.0, account="acct-1").read_tokens > 0


def test_another_model_does_not_read_this_models_cache() -> None:
    cache = PromptCache()
    body = claude_body(1500, ["hello"])
    serve(cache, body, 0.0, model="claude-sonnet-4-5")
    assert serve(cache, body, 1.0, model="claude-opus-4-1").read_tokens == 0


def _blocks(count: int, marked: int) -> list[dict[str, Any]]:
    """`count` user content blocks of 100 tokens, the one at `marked` a breakpoint."""
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text(100, "b")} for _ in range(count)]
    blocks[marked]["cache_control"] = dict(EPHEMERAL)
    return blocks


def test_a_breakpoint_looks_back_twenty_blocks_only() -> None:
    cache = PromptCache()

    def body(count: int) -> dict[str, Any]:
        content = _blocks(count, count - 1)
        return {
            "model": SONNET,
            "system": text(1100),
            "messages": [{"role": "user", "content": content}],
        }

    written = serve(cache, body(1), 0.0).written_tokens
    assert written > 0
    rules = anthropic_rules(SONNET)
    # The breakpoint 20 blocks after the cached one still finds it; 22 after, it does not.
    near = cache.look("acct-1", SONNET, anthropic_boundaries(body(21)), 10**6, rules=rules, now=1.0)
    far = cache.look("acct-1", SONNET, anthropic_boundaries(body(23)), 10**6, rules=rules, now=1.0)
    assert near.read_tokens == written
    assert far.read_tokens == 0


def chat_body(turns: list[str]) -> dict[str, Any]:
    messages = [{"role": "system", "content": text(1100)}]
    messages += [
        {"role": "user" if index % 2 == 0 else "assistant", "content": turn}
        for index, turn in enumerate(turns)
    ]
    return {"model": "gpt-5", "messages": messages}


def test_openai_caches_long_prompts_automatically_in_128_token_steps() -> None:
    cache = PromptCache()
    rules = openai_rules()
    first_body = chat_body([text(77, "q")])
    first = serve(cache, first_body, 0.0, model="gpt-5", rules=rules, kind="chat")
    assert (first.read_tokens, first.written_tokens) == (0, 0)
    second_body = chat_body([text(77, "q"), text(40, "r"), text(30, "s")])
    second = serve(cache, second_body, 60.0, model="gpt-5", rules=rules, kind="chat")
    seen = chat_boundaries(first_body)[-1].tokens
    assert second.read_tokens == seen - seen % 128
    assert second.read_tokens % 128 == 0
    assert second.read_tokens >= 1024


def test_openai_does_not_cache_a_prompt_under_1024_tokens() -> None:
    cache = PromptCache()
    body = {"model": "gpt-5", "messages": [{"role": "user", "content": text(900)}]}
    serve(cache, body, 0.0, model="gpt-5", rules=openai_rules(), kind="chat")
    use = serve(cache, body, 1.0, model="gpt-5", rules=openai_rules(), kind="chat")
    assert use.read_tokens == 0


def test_openai_retention_of_24_hours_keeps_the_prefix_a_day() -> None:
    body = chat_body(["hello"])
    for retention, later, hit in ((None, 400.0, False), ("24h", 80_000.0, True)):
        cache = PromptCache()
        rules = openai_rules(retention)
        serve(cache, body, 0.0, model="gpt-5", rules=rules, kind="chat")
        use = serve(cache, body, later, model="gpt-5", rules=rules, kind="chat")
        assert (use.read_tokens > 0) is hit


def test_responses_and_gemini_prompts_are_cached_by_their_own_boundaries() -> None:
    cache = PromptCache()
    responses = {"model": "gpt-5", "instructions": text(1200), "input": "hi"}
    serve(cache, responses, 0.0, model="gpt-5", rules=openai_rules(), kind="responses")
    assert (
        serve(
            cache, responses, 1.0, model="gpt-5", rules=openai_rules(), kind="responses"
        ).read_tokens
        >= 1024
    )
    gemini = {"contents": [{"role": "user", "parts": [{"text": text(1500)}]}]}
    flash = gemini_rules("gemini-2.5-flash")
    serve(cache, gemini, 0.0, model="gemini-2.5-flash", rules=flash, kind="gemini")
    use = serve(cache, gemini, 1.0, model="gemini-2.5-flash", rules=flash, kind="gemini")
    assert use.read_tokens == gemini_boundaries(gemini)[-1].tokens
    pro = gemini_rules("gemini-2.5-pro")
    serve(cache, gemini, 0.0, model="gemini-2.5-pro", rules=pro, kind="gemini")
    assert (
        serve(cache, gemini, 1.0, model="gemini-2.5-pro", rules=pro, kind="gemini").read_tokens == 0
    )


def test_an_anthropic_api_key_does_not_count_cache_reads_and_a_plan_counts_them_whole() -> None:
    use = CacheUse(input_tokens=100, read_tokens=5000, written_5m_tokens=200)
    assert use.charged_input(anthropic_rules(SONNET, plan=True).read_weight) == 5300
    assert use.charged_input(anthropic_rules(SONNET).read_weight) == 300
    assert use.charged_input(openai_rules().read_weight) == 5300


def test_clear_forgets_every_prefix() -> None:
    cache = PromptCache()
    body = claude_body(1500, ["hello"])
    serve(cache, body, 0.0)
    assert cache.size("acct-1", SONNET, 1.0) > 0
    cache.clear()
    assert cache.size("acct-1", SONNET, 1.0) == 0
    assert serve(cache, body, 1.0).read_tokens == 0


def test_a_conversation_known_only_by_its_size_is_cached_turn_after_turn() -> None:
    cache = PromptCache()
    rules = anthropic_rules(SONNET, plan=True)
    sizes = [3000, 3400, 3900]
    uses = []
    for turn in range(1, len(sizes) + 1):
        boundaries = conversation_boundaries("session-1", sizes[:turn])
        use = cache.look("plan-a", SONNET, boundaries, sizes[turn - 1] + 50, rules=rules, now=turn)
        cache.keep("plan-a", SONNET, use, float(turn))
        uses.append(use)
    assert [use.read_tokens for use in uses] == [0, 3000, 3400]
    assert [use.written_tokens for use in uses] == [3000, 400, 500]
    other = conversation_boundaries("session-2", sizes[:2])
    assert cache.look("plan-a", SONNET, other, 3450, rules=rules, now=4.0).read_tokens == 0
    moved = conversation_boundaries("session-1", sizes)
    assert cache.look("plan-b", SONNET, moved, 3950, rules=rules, now=4.0).read_tokens == 0
