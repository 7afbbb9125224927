"""Imported first by the CLI entry: answers `kijito-pull hook claude-*` before the heavy imports.

The console script imports `kijito_pull.cli.main`, which imports every command (and so `requests`,
`tenacity`, ...): about 150 ms before any code runs. Claude Code runs the plugin's hooks in every
project, so for a project that has not opted in, importing this module first lets the hook exit 0
having loaded only the standard library, and an opted-in hook runs from here without argparse or
the unrelated commands (see `kijito_pull.harnesses.hookgate.early_gate`). For any other command line it
does nothing.
"""

from kijito_pull.harnesses import hookgate as fastpath

fastpath.early_gate()
