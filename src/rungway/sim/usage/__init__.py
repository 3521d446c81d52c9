"""The providers' usage endpoints a simulated upstream serves, one module each (`claude`,
`codex`, `copilot`, `gemini`, `openrouter`), over the same quota windows and credits its
requests spend; `reads` gates who may read them and how often, and `endpoints` picks a
scenario's.
"""
