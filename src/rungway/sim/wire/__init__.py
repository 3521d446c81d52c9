"""The wire APIs a simulated upstream serves (Anthropic Messages, OpenAI Chat Completions,
the Responses API), the deterministic model behind them (`completion`) and the serving of
one generation request that every API shares (`serving`).
"""
