"""Simulated OAuth token endpoints: what a scenario's `oauth:` section says
(`token_spec`), and the token server that answers refresh requests (`token_server`).
"""
