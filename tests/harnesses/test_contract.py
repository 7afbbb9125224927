"""The Harness contract checks itself: every "module:function" reference a registered harness holds
(each hook's handler and `wants`, mode, early answers, runtime, installer, doctor checks) resolves to
something callable, so a typo fails here instead of in a user's session (where the hook route would
answer "internal error" with exit 0 and hand nothing over)."""

from __future__ import annotations

import pytest

from kijito_pull.harnesses import registry
from kijito_pull.harnesses.base import Harness, Hook


@pytest.mark.parametrize("name", registry.names())
def test_every_reference_of_a_registered_harness_resolves(name):
    harness = registry.get(name)
    refs = harness.references()
    assert refs, f"{name} names nothing?"
    assert harness.verify() == []
    for hook in harness.hooks:  # each hook names its work: no second dispatch table in a runtime
        assert f"hook {hook.name}" in refs


def test_a_harness_with_a_typo_is_rejected():
    typo = Harness(
        "typo", "Typo Agent", installer="kijito_pull.harnesses.codex.installer", install_help="-",
        hooks=(Hook("typo-stop", "Stop", handler="kijito_pull.harnesses.codex.hooks:on_stopp"),
               Hook("typo-start", "SessionStart", handler="kijito_pull.harnesses.codx.hooks:on_session_start")),
        checks=(("typo.check", "kijito_pull.harnesses.codex.checks:check_trust"),),
    )
    problems = typo.verify()
    assert len(problems) == 2, problems
    assert "hook typo-stop" in problems[0] and "on_stopp" in problems[0]
    assert "hook typo-start" in problems[1] and "codx" in problems[1]


def test_a_reference_to_something_not_callable_is_rejected():
    odd = Harness("odd", "Odd", installer="kijito_pull.harnesses.codex.installer", install_help="-",
                  hooks=(Hook("odd-stop", "Stop", handler="kijito_pull.harnesses.codex.hooks:SESSION_START"),))
    assert odd.verify() == ["odd: hook odd-stop: 'kijito_pull.harnesses.codex.hooks:SESSION_START' is not callable"]


def test_a_hook_without_handler_needs_a_runtime():
    with pytest.raises(ValueError, match="every hook needs a handler"):
        Harness("bare", "Bare", installer="x", install_help="-", hooks=(Hook("bare-stop", "Stop"),))


def test_the_declared_session_holders_are_the_ones_the_harnesses_use():
    """SessionEnd settles the holders each Harness declares: they must be the keys and transcript readers
    the pusher and the watcher really hold hand-overs with."""
    from kijito_pull.harnesses.claude import hooks as claude_hooks
    from kijito_pull.harnesses.claude import push
    from kijito_pull.harnesses.codex import watcher

    assert registry.get("claude").holders == ((push.PUSH_KEY, claude_hooks.PUSH_READER),)
    assert push.push_holder_key("s1") == f"{push.PUSH_KEY}:s1"
    assert registry.get("codex").holders == ((watcher.queue_holder_key("s1").split(":")[0], watcher.READER),)
    assert watcher.queue_holder_key("s1").endswith(":s1")
    from kijito_pull.harnesses.copilot import watcher as copilot_watcher
    from kijito_pull.harnesses.opencode import watcher as opencode_watcher
    from kijito_pull.harnesses.opencode.variant import VARIANTS
    from kijito_pull.harnesses.qwen import watcher as qwen_watcher

    for module in (copilot_watcher, qwen_watcher):  # a watcher with its own record reader
        key, reader = registry.get(module.NAME.split("-")[0]).holders[0]
        assert (f"{key}:s1", reader) == (module.push_holder_key("s1"), module.READER), module.NAME
    for name, variant in VARIANTS.items():  # OpenCode and Kilo: the key (the record is read whole, no reader)
        assert f"{registry.get(name).holders[0][0]}:s1" == opencode_watcher.push_holder_key("s1", variant)
