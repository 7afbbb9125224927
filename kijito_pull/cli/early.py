"""Imported first by the CLI entry: answers `kijito-pull hook NAME` before the heavy imports.

The console script imports `kijito_pull.cli.main`, which imports every command (and so `requests`,
`tenacity`, ...): about 150 ms before any code runs. Claude Code and Codex run their hooks in every
project, so for a project that has not opted in, importing this module first lets the hook exit 0
having loaded only the standard library, and an opted-in hook runs from here without argparse or
the unrelated commands: through the one hook route, `kijito_pull.harnesses.hookgate.run_hook` (see
`early_gate`). For any other command line it does nothing.
"""

from kijito_pull.harnesses import hookgate

hookgate.early_gate()
