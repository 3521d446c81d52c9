"""What several gateway processes share through Redis: live quota state and its change
feed, budget holds, rate windows and single-flight usage polls.

One process needs none of it (the embedded store keeps its state in SQLite); with
`state.store: redis` every worker and replica reads and writes the same keys.
"""
