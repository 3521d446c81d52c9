"""What limits a simulated upstream's requests, and how it reports them: quota windows and
the rate-limit header families that carry their readings (`windows`, `codex`,
`header_families`), and an OpenRouter key's credits (`credits`).
"""
