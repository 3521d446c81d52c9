"""The admin API's OpenAPI 3.1 schema, served at `GET /admin/openapi.json`.

Written out by hand, so that it reads as the contract it is; the enums come from the code
they describe. Tests validate real answers against these schemas and fuzz the API from it.
"""

from __future__ import annotations

from typing import Any, get_args

from rungway.budget.period import Period
from rungway.ledger.report import DIMENSIONS
from rungway.pricing import Tier
from rungway.quota.burn import Outlook
from rungway.routing.autoid import Category, Ladder
from rungway.routing.billing import BillingClass, Overage
from rungway.routing.plan import SkipReason
from rungway.routing.rungs import Rung
from rungway.routing.snapshot import BreakerState, WindowStatus
from rungway.server.requests import DEFAULT_LIMIT, MAX_LIMIT

_RUNGS = [rung.label for rung in Rung]
_NAME = {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", "maxLength": 64}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _nullable(kind: str) -> dict[str, Any]:
    return {"type": [kind, "null"]}


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    """A closed object whose every property is always present."""
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def _enum(values: list[str], *, nullable: bool = False) -> dict[str, Any]:
    if nullable:
        return {"type": ["string", "null"], "enum": [*values, None]}
    return {"type": "string", "enum": values}


_STRING = {"type": "string"}
_NUMBER = {"type": "number"}
_INTEGER = {"type": "integer"}

_SCHEMAS: dict[str, Any] = {
    "Error": _object(
        {"error": _object({"type": _STRING, "message": _STRING})},
    ),
    "QuotaWindow": _object(
        {
            "name": _STRING,
            "model": _nullable("string"),
            "used_percent": _nullable("number"),
            "resets_at": _nullable("number"),
            "status": _enum([status.value for status in WindowStatus]),
            "source": _STRING,
            "checked_at": _NUMBER,
        }
    ),
    "Connection": _object(
        {
            "id": _STRING,
            "provider": _STRING,
            "auth": _STRING,
            "billing": _enum([billing.value for billing in BillingClass]),
            "overage": _enum([overage.value for overage in Overage]),
            "overage_permitted": {
                "type": ["boolean", "null"],
                "description": "The account's own word, as last read, on billing past its "
                "quota (Copilot overage, Claude extra usage, Codex credits); null when unread.",
            },
            "overage_in_use": {
                "type": "boolean",
                "description": "The account's last answer was served past its quota and billed.",
            },
            "models": {
                "type": "array",
                "items": _object(
                    {
                        "model": _STRING,
                        "rung": _enum(_RUNGS),
                        "tier": _enum([tier.value for tier in Tier]),
                    }
                ),
            },
            "windows": {"type": "array", "items": _ref("QuotaWindow")},
            "cooldown_until": _nullable("number"),
            "cooldown_reason": _STRING,
            "breaker": _enum([state.value for state in BreakerState]),
            "disabled": {"type": "boolean"},
            "terms": {
                "anyOf": [
                    _object(
                        {
                            "clients": {
                                "anyOf": [{"type": "array", "items": _STRING}, {"const": "any"}]
                            },
                            "widened": {"type": "boolean"},
                            "client_key": _nullable("string"),
                            "one_person": {"type": "boolean"},
                            "page": _nullable("string"),
                            "read": _nullable("string"),
                            "rule": _nullable("string"),
                            "note": _STRING,
                            "warning": _nullable("string"),
                        }
                    ),
                    {"type": "null"},
                ],
                "description": "Which clients the plan serves: its terms (the clients they "
                "allow, the page and the date it was read), whether the operator widened it "
                "(`clients: any`) or bound it to one client key, and a warning when a plan for "
                "one person serves several client keys; null for a connection without terms.",
            },
            "retired": {
                "anyOf": [
                    _object({"since": _STRING, "successor": _STRING, "notice": _STRING}),
                    {"type": "null"},
                ],
                "description": "The provider's service is gone for most of its users (consumer "
                "Code Assist): since when, and the provider that replaced it; null otherwise.",
            },
        }
    ),
    "Connections": _object(
        {
            "now": {"type": "number", "description": "The gateway's clock, for countdowns."},
            "connections": {"type": "array", "items": _ref("Connection")},
        }
    ),
    "CooldownCleared": _object({"connection": _STRING, "cleared": {"type": "boolean"}}),
    "Switched": _object(
        {"connection": _STRING, "disabled": {"type": "boolean"}, "changed": {"type": "boolean"}}
    ),
    "SpendRow": _object(
        {
            "group": _STRING,
            "requests": _INTEGER,
            "input_tokens": _INTEGER,
            "output_tokens": _INTEGER,
            "reasoning_tokens": _INTEGER,
            "cost_usd": _NUMBER,
            "list_cost_usd": _NUMBER,
            "savings_usd": _NUMBER,
            "unpriced_requests": _INTEGER,
            "unrecorded_requests": _INTEGER,
            "unrecorded_usd": _NUMBER,
            "cache_read_tokens": _INTEGER,
            "cache_hit_share": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
        }
    ),
    "Spend": _object(
        {
            "by": _enum(list(DIMENSIONS)),
            "period": _enum(list(get_args(Period))),
            "since": _NUMBER,
            "until": _NUMBER,
            "rows": {"type": "array", "items": _ref("SpendRow")},
            "total": _ref("SpendRow"),
            "budgets": _object(
                {
                    "period": _enum(list(get_args(Period))),
                    "since": _NUMBER,
                    "until": _NUMBER,
                    "rungs": {
                        "type": "array",
                        "items": _object(
                            {
                                "rung": _enum(_RUNGS),
                                "budget_usd": _NUMBER,
                                "spent_usd": _NUMBER,
                                "reserved_usd": _NUMBER,
                                "used_percent": _nullable("number"),
                            }
                        ),
                    },
                }
            ),
            "keys": {
                "type": "array",
                "items": _object(
                    {
                        "key": _STRING,
                        "budget_usd": _nullable("number"),
                        "period": _enum(list(get_args(Period))),
                        "since": _NUMBER,
                        "until": _NUMBER,
                        "requests": _INTEGER,
                        "cost_usd": _NUMBER,
                        "used_percent": _nullable("number"),
                    }
                ),
            },
        }
    ),
    "Attempt": _object(
        {
            "connection_id": _STRING,
            "outcome": _STRING,
            "status": _nullable("integer"),
            "latency_ms": _NUMBER,
            "detail": _STRING,
        }
    ),
    "RequestSummary": _object(
        {
            "request_id": _STRING,
            "started_at": _NUMBER,
            "client_key": _nullable("string"),
            "api": _STRING,
            "requested_model": _STRING,
            "resolved_model": _STRING,
            "provider": _nullable("string"),
            "connection_id": _nullable("string"),
            "upstream_model": _nullable("string"),
            "rung": _enum(_RUNGS, nullable=True),
            "outcome": _STRING,
            "status": _INTEGER,
            "stream": {"type": "boolean"},
            "latency_ms": _NUMBER,
            "ttfb_ms": _nullable("number"),
            "tokens": _object(
                {
                    "input": _INTEGER,
                    "output": _INTEGER,
                    "cache_read": _INTEGER,
                    "cache_write": _INTEGER,
                    "reasoning": _INTEGER,
                }
            ),
            "cost_usd": _NUMBER,
            "list_cost_usd": _nullable("number"),
            "attempts": {"type": "array", "items": _ref("Attempt")},
        }
    ),
    "Requests": _object({"requests": {"type": "array", "items": _ref("RequestSummary")}}),
    "Ambiguous": _object(
        {
            "error": _object({"type": _STRING, "message": _STRING}),
            "matches": {"type": "array", "items": _ref("RequestSummary")},
            "truncated": {"type": "boolean"},
        }
    ),
    "RoutePlan": _object(
        {
            "requested": _STRING,
            "ladder": _enum([ladder.value for ladder in Ladder], nullable=True),
            "category": _enum([category.value for category in Category], nullable=True),
            "candidates": {
                "type": "array",
                "items": _object(
                    {
                        "provider": _STRING,
                        "model": _STRING,
                        "rung": _enum(_RUNGS),
                        "connections": {"type": "array", "items": _STRING},
                        "score": _NUMBER,
                    }
                ),
            },
            "skipped": {
                "type": "array",
                "items": _object(
                    {
                        "reason": _enum([reason.value for reason in SkipReason]),
                        "detail": _STRING,
                        "connection": _nullable("string"),
                        "model": _nullable("string"),
                        "rung": _enum(_RUNGS, nullable=True),
                        "resets_at": _nullable("number"),
                    }
                ),
            },
            "earliest_reset": _nullable("number"),
            "pinned": {
                **_nullable("string"),
                "description": "The session's pinned connection, put first within its pool "
                "because it was usable; null otherwise.",
            },
        }
    ),
}
# Only a request whose session affinity keeps it names its session (a short hash of its key).
_SCHEMAS["RoutePlan"]["properties"]["session"] = _STRING
_OUTLOOK = {
    **_enum([outlook.value for outlook in Outlook]),
    "description": "`exhausted`: spent now; `runs_out`: spent before its reset at the current "
    "rate; `not_before_reset`: it resets first; `unknown`: fewer than two readings.",
}
_SCHEMAS["PoolAccount"] = _object(
    {
        "id": _STRING,
        "windows": {
            "type": "array",
            "items": _object(
                {
                    "name": _STRING,
                    "model": _nullable("string"),
                    "used_percent": _nullable("number"),
                    "resets_at": _nullable("number"),
                    "status": _enum([status.value for status in WindowStatus]),
                    "burn_per_hour": {
                        **_nullable("number"),
                        "description": "Percent of the window used per hour over its recent "
                        "readings; null with fewer than two.",
                    },
                    "outlook": _OUTLOOK,
                    "outlook_at": {
                        **_nullable("number"),
                        "description": "When it runs out (`runs_out`) or resets (otherwise).",
                    },
                }
            ),
        },
        "binding": {
            "anyOf": [
                _object(
                    {
                        "window": _STRING,
                        "model": _nullable("string"),
                        "outlook": _OUTLOOK,
                        "at": _nullable("number"),
                    }
                ),
                {"type": "null"},
            ],
            "description": "The window that stops the account first, and when.",
        },
        "pinned_sessions": {
            **_nullable("integer"),
            "description": "Sessions pinned to the account; null without session pins.",
        },
        "cache_hit_share": {
            **_nullable("number"),
            "description": "Share of its input tokens read from a prompt cache in `cache_period`.",
        },
        "cooldown_until": _nullable("number"),
        "disabled": {"type": "boolean"},
    }
)
_SCHEMAS["Pools"] = _object(
    {
        "now": _NUMBER,
        "cache_period": _object(
            {"period": _enum(list(get_args(Period))), "since": _NUMBER, "until": _NUMBER}
        ),
        "pinning": {"type": "boolean", "description": "Whether sessions are pinned at all."},
        "pools": {
            "type": "array",
            "items": _object(
                {
                    "pool": _STRING,
                    "provider": _STRING,
                    "billing_entry": _STRING,
                    "owner": _nullable("string"),
                    "accounts": {"type": "array", "items": _ref("PoolAccount")},
                }
            ),
        },
    }
)
_SCHEMAS["RequestDetail"] = {
    **_SCHEMAS["RequestSummary"],
    "properties": {
        **_SCHEMAS["RequestSummary"]["properties"],
        "plan": {"oneOf": [_ref("RoutePlan"), {"type": "null"}]},
    },
    "required": [*_SCHEMAS["RequestSummary"]["required"], "plan"],
}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors(*statuses: int) -> dict[str, Any]:
    words = {
        400: "A query parameter is unknown or out of range.",
        401: "No admin key, or the wrong one.",
        403: "No admin key is configured and the client is not on loopback.",
        404: "Nothing by that id.",
        405: "The path exists; the method does not (see `Allow`).",
        409: "The gateway cannot do this for that connection.",
        503: "The shared ledger (PostgreSQL) does not answer; the message says which and why.",
    }
    return {str(status): _json(_ref("Error"), words[status]) for status in (401, 403, *statuses)}


_CONNECTION_ID = {
    "name": "connection_id",
    "in": "path",
    "required": True,
    "description": "A connection id from the config.",
    "schema": _NAME,
}


def _action(operation_id: str, summary: str, answer: dict[str, Any]) -> dict[str, Any]:
    return {
        "post": {
            "operationId": operation_id,
            "summary": summary,
            "parameters": [_CONNECTION_ID],
            "responses": {"200": _json(answer, "Done."), **_errors(404, 409)},
        }
    }


def _choice(name: str, values: list[str], default: str, description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "description": description,
        "schema": {"type": "string", "enum": values, "default": default},
    }


SCHEMA: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {
        "title": "rungway admin API",
        "version": "1",
        "description": (
            "The ladder's live state, spend, recent requests and the operator's actions. "
            "Send the admin key as `Authorization: Bearer <key>`; with no key configured, "
            "only loopback clients are answered."
        ),
    },
    "security": [{"adminKey": []}],
    "paths": {
        "/admin/connections": {
            "get": {
                "operationId": "listConnections",
                "summary": "Every connection: billing, rungs, quota windows, cooldown, breaker.",
                "responses": {"200": _json(_ref("Connections"), "The connections."), **_errors()},
            }
        },
        "/admin/connections/{connection_id}/clear-cooldown": _action(
            "clearCooldown", "End a connection's cooldown now.", _ref("CooldownCleared")
        ),
        "/admin/connections/{connection_id}/refresh-quota": _action(
            "refreshQuota", "Read a connection's usage endpoint now.", _ref("Connection")
        ),
        "/admin/connections/{connection_id}/disable": _action(
            "disableConnection",
            "Take a connection out of the ladder until it is enabled, across restarts.",
            _ref("Switched"),
        ),
        "/admin/connections/{connection_id}/enable": _action(
            "enableConnection", "Put a disabled connection back into the ladder.", _ref("Switched")
        ),
        "/admin/pools": {
            "get": {
                "operationId": "listPools",
                "summary": "The plans' accounts by pool: windows, burn rates, forecasts, pins.",
                "responses": {"200": _json(_ref("Pools"), "The pools."), **_errors()},
            }
        },
        "/admin/spend": {
            "get": {
                "operationId": "spend",
                "summary": "Spend over a period, grouped one way, and the budgets' use.",
                "parameters": [
                    _choice("by", list(DIMENSIONS), "rung", "How to group the rows."),
                    _choice("period", list(get_args(Period)), "month", "The UTC period."),
                ],
                "responses": {"200": _json(_ref("Spend"), "The spend."), **_errors(400, 503)},
            }
        },
        "/admin/requests": {
            "get": {
                "operationId": "listRequests",
                "summary": "The newest ledger rows, newest first, without their route plans.",
                "parameters": [
                    {
                        "name": "limit",
                        "in": "query",
                        "required": False,
                        "description": "How many rows.",
                        "schema": {
                            "type": "integer",
                            "minimum": 1,
                            "maximum": MAX_LIMIT,
                            "default": DEFAULT_LIMIT,
                        },
                    }
                ],
                "responses": {"200": _json(_ref("Requests"), "The rows."), **_errors(400, 503)},
            }
        },
        "/admin/requests/{request_id}": {
            "get": {
                "operationId": "getRequest",
                "summary": "One ledger row with its route plan, by id or a unique prefix of it.",
                "description": (
                    "A prefix is matched without regard to case. A prefix that several ids "
                    "share answers 409 with their summaries (at most 20)."
                ),
                "parameters": [
                    {
                        "name": "request_id",
                        "in": "path",
                        "required": True,
                        "description": "A request id (`x-rungway-request-id`) or its prefix.",
                        "schema": {
                            "type": "string",
                            "pattern": "^[0-9A-Za-z_-]+$",
                            "maxLength": 64,
                        },
                    }
                ],
                "responses": {
                    "200": _json(_ref("RequestDetail"), "The row."),
                    **_errors(404, 503),
                    "409": _json(
                        _ref("Ambiguous"), "Several ids start with the prefix: their summaries."
                    ),
                },
            }
        },
        "/admin/openapi.json": {
            "get": {
                "operationId": "openapi",
                "summary": "This schema.",
                "responses": {"200": _json({"type": "object"}, "The schema."), **_errors()},
            }
        },
    },
    "components": {
        "schemas": _SCHEMAS,
        "securitySchemes": {"adminKey": {"type": "http", "scheme": "bearer"}},
    },
}
"""The whole schema as plain data."""
