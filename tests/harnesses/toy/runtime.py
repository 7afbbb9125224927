"""The toy harness's hook runtime and doctor check."""

from __future__ import annotations

import json


def run(inp, env) -> int:
    env.stdout.write(json.dumps({"toy": inp.hook, "persona": inp.persona, "mode": inp.mode}) + "\n")
    return 0


def check(ctx):
    from kijito_pull.core.findings import OK, Finding

    return Finding("toy.check", OK, "the toy harness was asked")
