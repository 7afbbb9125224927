"""The agent harnesses (Claude Code, Codex, pi, the daemon), each one package behind the Harness
contract (base.py) and listed in the registry (registry.py). Importing this package is cheap: the hook
fast gate goes through it."""
