"""`kijito-pull install kilo`: OpenCode's installer (kijito_pull.harnesses.opencode.installer) with Kilo's names.

    --user      ~/.config/kilo/plugin/kijito-pull.js   ($XDG_CONFIG_HOME/kilo when set)
    --project   <project>/.kilo/plugin/kijito-pull.js

and `@kilocode/plugin` beside it (Kilo's offline start-up stall, as OpenCode's); uninstall is byte-exact.
"""

from __future__ import annotations

from collections.abc import Mapping

from kijito_pull.harnesses.installkit import Wiring
from kijito_pull.harnesses.opencode import installer
from kijito_pull.harnesses.opencode.variant import KILO

add_arguments = installer.add_arguments
install = installer.install  # the request names its harness: `kilo`, whose variant it takes
uninstall = installer.uninstall


def wiring(environ: Mapping[str, str], cwd: str) -> list[Wiring]:
    return installer.wiring(environ, cwd, KILO)
