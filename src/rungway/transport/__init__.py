"""Implementations of the engine's transport port (`rungway.engine.transport`)."""
