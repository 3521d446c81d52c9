"""Gemini API request checks, error bodies, stream error events and model lists."""

from __future__ import annotations

import pathlib
from typing import Any

import orjson
import pytest
from google.genai import types

from rungway.protocol import gemini
from rungway.protocol.failures import FailureClass
from rungway.quota.errors import read_gemini_error

FIXTURES = pathlib.Path(__file__).parents[2] / "fixtures" / "gemini"
USER = {"role": "user", "parts": [{"text": "hi"}]}


def body(**fields: Any) -> dict[str, Any]:
    return {"model": "gemini-2.5-flash", "contents": [USER], **fields}


def test_a_full_request_passes() -> None:
    assert gemini.check_request(orjson.loads((FIXTURES / "request_full.json").read_bytes())) is None
    assert gemini.check_request(body(stream=True)) is None


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"model": ""}, "model is required"),
        ({"stream": "yes"}, "stream must be a boolean"),
        ({"contents": []}, "contents is required"),
        ({"contents": "hi"}, "contents is required"),
        ({"contents": [{"role": "assistant", "parts": []}]}, "contents[0].role must be"),
        ({"contents": [{"role": "user"}]}, "contents[0].parts is required"),
        ({"contents": [{"parts": ["hi"]}]}, "contents[0].parts[0] must be a Part object"),
        ({"contents": [{"parts": [{"text": 1}]}]}, "contents[0].parts[0].text must be a string"),
        (
            {"contents": [{"parts": [{"inlineData": {"data": "x"}}]}]},
            "contents[0].parts[0].inlineData.mimeType is required",
        ),
        (
            {"contents": [{"parts": [{"functionCall": {"name": "f", "args": []}}]}]},
            "contents[0].parts[0].functionCall.args must be an object",
        ),
        (
            {"contents": [{"parts": [{"functionResponse": {"response": {}}}]}]},
            "contents[0].parts[0].functionResponse.name is required",
        ),
        ({"contents": [{"parts": [{"thought": "yes"}]}]}, "thought must be a boolean"),
        (
            {"contents": [{"parts": [{"functionResponse": {"name": "f", "parts": {}}}]}]},
            "functionResponse.parts must be an array",
        ),
        (
            {"contents": [{"parts": [{"functionResponse": {"name": "f", "parts": [{}, 1]}}]}]},
            "functionResponse.parts[1] must be a Part object",
        ),
        ({"systemInstruction": "Be brief."}, "systemInstruction must be a Content object"),
        ({"system_instruction": {"parts": [{"text": 3}]}}, "systemInstruction.parts[0].text"),
        ({"tools": {"functionDeclarations": []}}, "tools must be an array"),
        ({"tools": [{"functionDeclarations": [{}]}]}, "functionDeclarations[0].name is required"),
        (
            {"tools": [{"functionDeclarations": [{"name": "f", "parameters": "{}"}]}]},
            "functionDeclarations[0].parameters must be a schema object",
        ),
        ({"toolConfig": {"functionCallingConfig": {"mode": "SOME"}}}, "mode must be one of"),
        (
            {"toolConfig": {"functionCallingConfig": {"allowedFunctionNames": "f"}}},
            "allowedFunctionNames must be an array of strings",
        ),
        ({"generationConfig": []}, "generationConfig must be an object"),
        ({"generationConfig": {"maxOutputTokens": 0}}, "generationConfig.maxOutputTokens"),
        ({"generationConfig": {"temperature": "hot"}}, "generationConfig.temperature"),
        ({"generation_config": {"stop_sequences": "END"}}, "generationConfig.stopSequences"),
        ({"generationConfig": {"responseSchema": "x"}}, "generationConfig.responseSchema"),
        ({"generationConfig": {"responseJsonSchema": 1}}, "responseJsonSchema must be"),
        (
            {"generationConfig": {"thinkingConfig": {"thinkingBudget": -2}}},
            "thinkingBudget must be an integer of -1 or more",
        ),
        (
            {"generationConfig": {"thinkingConfig": {"includeThoughts": 1}}},
            "includeThoughts must be a boolean",
        ),
        ({"safetySettings": [{"category": "X"}]}, "safetySettings[0].threshold is required"),
        ({"cachedContent": 5}, "cachedContent must be a string"),
    ],
)
def test_each_malformed_field_is_named(fields: dict[str, Any], problem: str) -> None:
    found = gemini.check_request(body(**fields))
    assert found is not None
    assert problem in found


def test_a_count_request_takes_contents_or_a_whole_request() -> None:
    assert gemini.check_count_request({"model": "m", "contents": [USER]}) is None
    whole = {"model": "m", "generateContentRequest": {"model": "models/m", "contents": [USER]}}
    assert gemini.check_count_request(whole) is None
    assert "contents is required" in str(gemini.check_count_request({"model": "m"}))
    bad = {"model": "m", "generateContentRequest": {"contents": [{"parts": 1}]}}
    assert "contents[0].parts" in str(gemini.check_count_request(bad))


@pytest.mark.parametrize(
    ("status", "name"),
    [
        (400, "INVALID_ARGUMENT"),
        (401, "UNAUTHENTICATED"),
        (403, "PERMISSION_DENIED"),
        (404, "NOT_FOUND"),
        (408, "DEADLINE_EXCEEDED"),
        (413, "INVALID_ARGUMENT"),
        (429, "RESOURCE_EXHAUSTED"),
        (500, "INTERNAL"),
        (502, "UNAVAILABLE"),
        (503, "UNAVAILABLE"),
        (504, "DEADLINE_EXCEEDED"),
        (507, "INTERNAL"),
    ],
)
def test_an_error_body_has_google_shape(status: int, name: str) -> None:
    error = orjson.loads(gemini.error_body(status, "no"))
    assert error == {"error": {"code": status, "message": "no", "status": name}}


def test_the_gateway_code_rides_in_an_error_info() -> None:
    error = orjson.loads(gemini.error_body(402, "over budget", "budget_exhausted"))["error"]
    assert error["details"] == [
        {
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": "BUDGET_EXHAUSTED",
            "domain": "rungway",
        }
    ]


@pytest.mark.parametrize(
    ("kind", "code", "name"),
    [
        (FailureClass.OVERLOADED, 503, "UNAVAILABLE"),
        (FailureClass.RATE_LIMITED, 429, "RESOURCE_EXHAUSTED"),
        (FailureClass.TIMEOUT, 504, "DEADLINE_EXCEEDED"),
        (None, 500, "INTERNAL"),
    ],
)
def test_a_stream_error_is_one_data_event(kind: FailureClass | None, code: int, name: str) -> None:
    event = gemini.stream_error_event("went away", kind)
    assert event.startswith(b"data: ")
    assert event.endswith(b"\r\n\r\n")
    assert event.count(b"\r\n\r\n") == 1
    payload = orjson.loads(event[len(b"data: ") : -4])
    assert payload == {"error": {"code": code, "message": "went away", "status": name}}


def test_a_model_list_has_google_shape() -> None:
    listed = orjson.loads(gemini.model_list(["gemini-2.5-flash", "models/claude-sonnet-4-5"]))
    names = [model["name"] for model in listed["models"]]
    assert names == ["models/gemini-2.5-flash", "models/claude-sonnet-4-5"]
    for model in listed["models"]:
        assert model["supportedGenerationMethods"] == [
            "generateContent",
            "streamGenerateContent",
            "countTokens",
        ]
        # The SDK's own Model type holds what it reads of each.
        types.Model.model_validate(
            {"name": model["name"], "display_name": model["displayName"], "version": "001"}
        )


def test_field_reads_either_spelling() -> None:
    assert gemini.field({"generation_config": 1}, "generationConfig") == 1
    assert gemini.field({"generationConfig": 2, "generation_config": 1}, "generationConfig") == 2
    assert gemini.field({}, "generationConfig") is None
    assert gemini.bare_model("models/gemini-2.5-pro") == "gemini-2.5-pro"


def test_a_refusal_with_a_wait_carries_it_as_google_retry_info() -> None:
    body = gemini.error_body(
        429, "no subscription quota left", "subscription_unavailable", retry_after_s=37.4
    )
    error = orjson.loads(body)["error"]
    assert (error["code"], error["status"]) == (429, "RESOURCE_EXHAUSTED")
    retry = [d for d in error["details"] if d["@type"].endswith("google.rpc.RetryInfo")]
    assert retry == [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"}]
    # Read the way Google's clients read it: the wait is the one the gateway meant.
    assert read_gemini_error(429, body, now=0.0).retry_after_s == 37.0


def test_a_refusal_without_a_wait_has_no_retry_info() -> None:
    error = orjson.loads(gemini.error_body(400, "bad", "invalid_request"))["error"]
    assert all(not d["@type"].endswith("RetryInfo") for d in error["details"])
