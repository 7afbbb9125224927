"""pi: the installer of the extension package and the Python side of its ack protocol.

`HARNESS` is pi's side of the Harness contract (kijito_pull.harnesses.base). pi has no
`kijito-pull hook` entry points: its extension runs `kijito-pull watch --ack-stdin` and answers
each hand-over itself (kijito_pull.harnesses.pi.acksink). Standard library only.
"""

from kijito_pull.harnesses.base import SESSION, Harness

HARNESS = Harness(
    "pi", "pi",
    executable="pi",
    confirmation=SESSION,  # the extension acknowledges each hand-over on the child's stdin
    installer="kijito_pull.harnesses.pi.installer",
    install_help="pi: the extension as a pi package, via `pi install`",
)
