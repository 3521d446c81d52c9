"""A request's session key: each source, their order, and bodies of any shape."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rungway.protocol.api import Api
from rungway.protocol.sessions import response_key, session_key, short_session

SYSTEM = "You are a careful coding agent."
FIRST = {"role": "user", "content": "Fix the failing test in tests/unit."}
CLAUDE_CODE = {"x-claude-code-session-id": "6f1c2a4e-0b7d-4d8e-9a43-1f2e3d4c5b6a"}


def _key(api: Api, body: dict[str, Any], headers: dict[str, str] | None = None) -> str | None:
    return session_key(api, headers or {}, body, orjson.dumps(body))


def _messages(*later: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"model": "auto", "system": SYSTEM, "messages": [FIRST, *later], **fields}


def test_claude_code_s_session_header_comes_first_and_names_the_session() -> None:
    body = _messages(metadata={"user_id": "user_1"})
    key = _key(Api.ANTHROPIC_MESSAGES, body, CLAUDE_CODE)
    assert key is not None
    assert key.startswith("cc:")
    other = _key(Api.ANTHROPIC_MESSAGES, body, {"x-claude-code-session-id": "another-session"})
    assert other is not None
    assert other.startswith("cc:")
    assert other != key
    # The header wins whatever the API: Claude Code's session is one across its requests.
    assert _key(Api.OPENAI_CHAT, {"messages": [FIRST], "prompt_cache_key": "p"}, CLAUDE_CODE) == key


def test_metadata_user_id_is_next_for_messages() -> None:
    key = _key(Api.ANTHROPIC_MESSAGES, _messages(metadata={"user_id": "user_1_session_9"}))
    assert key is not None
    assert key.startswith("user:")
    assert key == _key(
        Api.ANTHROPIC_MESSAGES,
        _messages(
            {"role": "assistant", "content": "Done."}, metadata={"user_id": "user_1_session_9"}
        ),
    )
    # Another conversation with the same opening but another user id is another session.
    assert key != _key(Api.ANTHROPIC_MESSAGES, _messages(metadata={"user_id": "user_2"}))


@pytest.mark.parametrize("api", [Api.OPENAI_CHAT, Api.OPENAI_RESPONSES])
def test_prompt_cache_key_names_openai_sessions(api: Api) -> None:
    body = {"model": "auto", "prompt_cache_key": "conv-42", "messages": [FIRST], "input": "hi"}
    key = _key(api, body)
    assert key is not None
    assert key.startswith("cache:")
    assert key != _key(api, {**body, "prompt_cache_key": "conv-43"})


def test_prompt_cache_key_beats_the_previous_response_and_that_beats_the_opening() -> None:
    both = {"prompt_cache_key": "conv-42", "previous_response_id": "resp_1", "input": "go on"}
    assert (_key(Api.OPENAI_RESPONSES, both) or "").startswith("cache:")
    chained = _key(Api.OPENAI_RESPONSES, {"previous_response_id": "resp_1", "input": "go on"})
    assert chained == response_key("resp_1")
    assert chained is not None
    assert chained.startswith("resp:")


def test_gemini_s_cached_content_names_its_session() -> None:
    body = {"cachedContent": "cachedContents/abc", "contents": [{"role": "user", "parts": []}]}
    key = _key(Api.GEMINI, body)
    assert key is not None
    assert key.startswith("gcache:")
    assert key == _key(Api.GEMINI, {"cached_content": "cachedContents/abc"})


def test_the_opening_keys_a_conversation_through_all_its_turns() -> None:
    first = _key(Api.ANTHROPIC_MESSAGES, _messages())
    later = _key(
        Api.ANTHROPIC_MESSAGES,
        _messages(
            {"role": "assistant", "content": [{"type": "text", "text": "Looking."}]},
            {"role": "user", "content": "And the other one?"},
        ),
    )
    assert first is not None
    assert first.startswith("conv:")
    assert later == first
    assert _key(Api.ANTHROPIC_MESSAGES, {**_messages(), "system": "Another agent."}) != first
    other_task = {"model": "auto", "system": SYSTEM, "messages": [{"role": "user", "content": "x"}]}
    assert _key(Api.ANTHROPIC_MESSAGES, other_task) != first


def test_a_moving_cache_marker_does_not_change_the_opening() -> None:
    def opening(marked: bool) -> dict[str, Any]:
        block: dict[str, Any] = {"type": "text", "text": "Fix the failing test."}
        if marked:
            block["cache_control"] = {"type": "ephemeral"}
        return {"system": SYSTEM, "messages": [{"role": "user", "content": [block]}]}

    assert _key(Api.ANTHROPIC_MESSAGES, opening(True)) == _key(
        Api.ANTHROPIC_MESSAGES, opening(False)
    )


def test_each_api_s_opening_is_read_from_its_own_fields() -> None:
    chat = {"messages": [{"role": "system", "content": SYSTEM}, FIRST, {"role": "assistant"}]}
    assert (_key(Api.OPENAI_CHAT, chat) or "").startswith("conv:")
    assert _key(Api.OPENAI_CHAT, chat) != _key(Api.OPENAI_CHAT, {"messages": [FIRST]})
    responses = _key(Api.OPENAI_RESPONSES, {"instructions": SYSTEM, "input": "Fix it."})
    assert responses == _key(
        Api.OPENAI_RESPONSES,
        {"instructions": SYSTEM, "input": [{"role": "user", "content": "Fix it."}]},
    )
    gemini = {
        "systemInstruction": {"parts": [{"text": SYSTEM}]},
        "contents": [{"role": "user", "parts": [{"text": "a"}]}],
    }
    assert (_key(Api.GEMINI, gemini) or "").startswith("conv:")


def test_keys_of_different_sources_never_collide() -> None:
    value = "same-value"
    keys = {
        _key(Api.ANTHROPIC_MESSAGES, {}, {"x-claude-code-session-id": value}),
        _key(Api.ANTHROPIC_MESSAGES, {"metadata": {"user_id": value}}),
        _key(Api.OPENAI_CHAT, {"prompt_cache_key": value}),
        _key(Api.OPENAI_RESPONSES, {"previous_response_id": value}),
        _key(Api.GEMINI, {"cachedContent": value}),
    }
    assert None not in keys
    assert len(keys) == 5


def test_a_key_never_carries_its_source() -> None:
    secret = "user_alice@example.com_account_1234"
    key = _key(Api.ANTHROPIC_MESSAGES, {"metadata": {"user_id": secret}})
    assert key is not None
    assert "alice" not in key
    assert len(key) < 64
    assert "alice" not in short_session(key)
    assert short_session(key) == "user:" + key.removeprefix("user:")[:12]


@pytest.mark.parametrize(
    ("api", "body", "headers"),
    [
        (Api.ANTHROPIC_MESSAGES, {"metadata": {"user_id": 7}, "messages": "no"}, {}),
        (Api.ANTHROPIC_MESSAGES, {"metadata": ["user_id"], "messages": [1, 2]}, {}),
        (Api.ANTHROPIC_MESSAGES, {"messages": [{"role": "assistant", "content": "x"}]}, {}),
        (Api.ANTHROPIC_MESSAGES, {"messages": []}, {"x-claude-code-session-id": "   "}),
        (Api.OPENAI_CHAT, {"prompt_cache_key": {"a": 1}, "messages": None}, {}),
        (Api.OPENAI_RESPONSES, {"previous_response_id": 5, "input": 3}, {}),
        (Api.GEMINI, {"cachedContent": ["x"], "contents": {"role": "user"}}, {}),
    ],
)
def test_wrong_types_are_ignored(api: Api, body: dict[str, Any], headers: dict[str, str]) -> None:
    assert session_key(api, headers, body, b"") is None


def test_long_values_are_cut_before_hashing() -> None:
    huge = "x" * 10_000_000
    key = _key(Api.ANTHROPIC_MESSAGES, {"metadata": {"user_id": huge}})
    assert key == _key(Api.ANTHROPIC_MESSAGES, {"metadata": {"user_id": huge[:600]}})
    deep: Any = "bottom"
    for _ in range(5000):
        deep = [deep]
    body = {"messages": [{"role": "user", "content": deep}]}
    assert (session_key(Api.ANTHROPIC_MESSAGES, {}, body, b"") or "").startswith("conv:")


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=30,
)


@given(
    api=st.sampled_from(list(Api)),
    body=st.dictionaries(
        st.sampled_from(
            [
                "messages",
                "system",
                "metadata",
                "prompt_cache_key",
                "previous_response_id",
                "input",
                "instructions",
                "cachedContent",
                "contents",
                "systemInstruction",
            ]
        ),
        _JSON,
        max_size=6,
    ),
    header=st.one_of(st.none(), st.text(max_size=30)),
)
def test_no_body_makes_it_raise(api: Api, body: dict[str, Any], header: str | None) -> None:
    headers = {} if header is None else {"x-claude-code-session-id": header}
    key = session_key(api, headers, body, b"")
    assert key is None or (isinstance(key, str) and ":" in key and len(key) < 64)
