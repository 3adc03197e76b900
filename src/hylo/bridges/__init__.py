"""Served mode: an external harness owns the episode loop and hylo serves an agent to it — the vla-eval
bridge (`hylo bridge vlaeval`) and its served session. The agents that drive a policy served elsewhere
(`vlaeval-remote`, `openpi-remote`) are agents (`hylo.agents`).

The modules stay importable on their own; nothing here is imported by `import hylo`.
"""
