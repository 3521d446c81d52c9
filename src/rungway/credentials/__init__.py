"""Credentials: imported plan logins, encrypted at rest, kept alive by token managers.

`store` keeps logins encrypted; `secrets` reads the secrets the config names (from the
environment, files or the store) and opens the store; `logins` reads the files other tools
leave; `grants` speaks each token endpoint; `manager` renews a login's token; `sources`
hands managers to the connections that use them; `code_assist` finds the Google Cloud
project a Gemini Code Assist login works in; `redaction` keeps secrets out of log lines
and out of what upstreams say in their errors.
"""
