"""What if: replay a trace of requests against plans and policies on a virtual clock.

`trace` is what was asked, `plans` the simulated quota of each plan connection, `outcome`
where each policy put each request; the replayed ladder, the baselines and the oracle are
policies, and `metrics` reads a policy's run. Only `cli` imports this package.
"""
