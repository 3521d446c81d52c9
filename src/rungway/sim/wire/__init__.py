"""The wire APIs a simulated upstream serves (Anthropic Messages, OpenAI Chat Completions,
the Responses API) on one endpoint base class (`api`), the deterministic model behind
them (`completion`) and the serving of one generation request they all share (`serving`).
"""
