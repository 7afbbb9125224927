"""The supervised daemon: systemd/launchd templates and their installer.

`HARNESS` is the daemon's side of the Harness contract (kijito_pull.harnesses.base): no hooks, no
scopes (one unit per user and persona), its own doctor finding (`harness.daemon`) and check
(`daemon.consumer`: a daemon sharing the agent harnesses' cursor). Standard library only.
"""

from kijito_pull.harnesses.base import Harness

HARNESS = Harness(
    "daemon", "the daemon",
    installer="kijito_pull.harnesses.daemon.installer",
    install_help="`kijito-pull watch` for one persona as a systemd user unit or launchd agent "
                 "(--relay --redis URL: `kijito-pull relay` for a fleet)",
    scopes=(),
    wiring_check="kijito_pull.harnesses.daemon.checks:wiring_finding",
    checks=(("daemon.consumer", "kijito_pull.harnesses.daemon.checks:check_consumer"),),
)
