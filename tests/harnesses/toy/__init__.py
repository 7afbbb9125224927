"""A toy harness, registered only at test time (tests/harnesses/test_toy_harness.py): one folder, like a
real harness package under kijito_pull/harnesses/, and no other file of the project knows it."""

from kijito_pull.harnesses.base import Harness, Hook

HARNESS = Harness(
    "toy", "Toy Agent",
    executable="toy-agent",
    hooks=(Hook("toy-stop", "Stop", "Toy Stop: says which persona it would hand mail to"),),
    nothing="TOY-NOTHING\n",
    runtime="tests.harnesses.toy.runtime:run",
    installer="tests.harnesses.toy.installer",
    install_help="Toy Agent: one line in .toy/hooks.json",
    checks=(("toy.check", "tests.harnesses.toy.runtime:check"),),
)
