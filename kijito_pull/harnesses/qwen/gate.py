"""Qwen Code's part of the hook fast gate: which UserPromptSubmit inputs `qwen-prompt` has nothing to do for.
Standard library only (see kijito_pull.harnesses.hookgate).

When a Stop hook blocks, Qwen Code makes the block's reason the next prompt and runs UserPromptSubmit for it
too, with `prompt` = the reason (measured on 0.24.4). That reason is our own hand-over, so it carries our
`kijito-ref:` markers: the hook then answers "nothing to do" at once, and never hands the same mail over a
second time in the same request (the mail is pending with the session until the record confirms it).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

MARKER = "kijito-ref:"  # kijito_pull.core.render's marker prefix (a test keeps them equal)


def wants_prompt(data: Mapping[str, object]) -> bool:
    """False for the prompt Qwen makes of our own Stop block (it holds our markers)."""
    prompt = data.get("prompt")
    return not (isinstance(prompt, str) and MARKER in prompt)
