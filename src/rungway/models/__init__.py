"""What each model can do: vision, tool use, reasoning, structured output, its context window.

Read by routing (to skip a model that cannot serve a request) and by translation (to write
what a model accepts); below both, so neither reaches into the other.
"""
