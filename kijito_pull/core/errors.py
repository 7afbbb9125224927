"""kijito-pull's own errors: one root, `KijitoPullError`, carrying its exit code and the one line a person is shown.

Contract:
- Every failure kijito-pull anticipates is a `KijitoPullError`. A usage or configuration mistake, found
  before any request is sent, is a `UsageError` (exit 2: `core.config.ConfigError`, `MissingExtra`); a
  source, state or hand-over failure is a `SourceFailed` (exit 1: nothing was skipped, the mail is delivered
  next time: `core.models.ApiError`, `core.files.StateError`); the harnesses' own errors hang under the root
  (exit 1 unless they say otherwise).
- `str(error)` is the message, one line, safe to show (never the token). `line()` is what a person is
  shown: where it happened (`about`), the message, what it means for the mail (`outcome`) and what to do
  (`fix`), joined into one line.
- The CLI maps errors to exit codes in one place, cli/main.py; a command raises, and says with `about`
  what a failure is about. `Carry` runs independent items (one persona each) where a source failure ends
  that item only, is reported as its line, and the others go on. Hooks keep their own boundary
  (harnesses/hookgate.py): a hook never wedges a session.

Standard library only: core.models, core.files and the hook fast path import it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from kijito_pull.core.exitcodes import ExitCode

#: What a person runs to find what is wrong with the setup (named by connection and token errors).
DOCTOR = "`kijito-pull doctor` checks the setup"


def first_line(error: object, limit: int = 200) -> str:
    """An error's first line, cut to `limit` characters (its type's name when it says nothing): what a
    one-line report of a failure shows."""
    text = str(error)
    return text.splitlines()[0][:limit] if text.strip() else type(error).__name__


class KijitoPullError(Exception):
    """The root of kijito-pull's own errors. `exit_code` is what the CLI exits with; `fix` what to do;
    `where` and `outcome` are added by `about` as the error passes up."""

    exit_code: int = ExitCode.SOURCE_FAILED
    fix: str | None = None
    outcome: str | None = None
    where: tuple[str, ...] = ()

    def __init__(self, message: str = "", *args: object, fix: str | None = None, exit_code: int | None = None):
        super().__init__(message, *args)
        if fix is not None:
            self.fix = fix
        if exit_code is not None:
            self.exit_code = ExitCode(exit_code)

    def within(self, where: str | None = None, outcome: str | None = None) -> KijitoPullError:
        """This error, said to be about `where` (its line is prefixed with it) and, when it does not say
        already, `outcome` what it means for the mail; returned, to be raised again."""
        if where:
            self.where = (where, *self.where)
        if outcome and self.outcome is None:
            self.outcome = outcome
        return self

    def text(self) -> str:
        """The message as `line` shows it: its first line (an error whose next lines are steps a person
        follows, `install`'s by-hand instructions, keeps them)."""
        return first_line(self, 400)

    def line(self) -> str:
        """The one line a person is shown: `where: message; outcome; fix`."""
        parts = [": ".join([*self.where, self.text()])]
        parts += [p for p in (self.outcome, self.fix) if p]
        return "; ".join(parts)


class UsageError(KijitoPullError):
    """A usage or configuration mistake, found before any request was sent (exit 2)."""

    exit_code = ExitCode.USAGE


class MissingExtra(UsageError):
    """An optional dependency the configuration needs is not installed (exit 2): the message names the
    `pip install 'kijito-pull[EXTRA]'` that brings it."""

    def __init__(self, what: str, extra: str, module: str):
        super().__init__(f"{what} needs the {module} package, which is not installed: "
                         f"pip install 'kijito-pull[{extra}]'")
        self.extra = extra


class SourceFailed(KijitoPullError):
    """The mail could not be read, recorded or handed over (exit 1): the source failed or answered
    something that cannot be trusted, or the state could not be written. Nothing was skipped."""

    exit_code = ExitCode.SOURCE_FAILED


@contextlib.contextmanager
def about(where: str, outcome: str | None = None) -> Iterator[None]:
    """A `KijitoPullError` raised inside is about `where` (a persona, a command: its line is prefixed with
    it) and, when it does not say already, `outcome` says what it means for the mail."""
    try:
        yield
    except KijitoPullError as exc:
        exc.within(where, outcome)
        raise


class Carry:
    """Independent items run one after another (one persona each): a `SourceFailed` in one ends that item
    only and is reported (`report(line)`); `code` is the worst exit code met. A usage error is about the
    whole command, and goes up to the boundary."""

    def __init__(self, report: Callable[[str], None]):
        self.report = report
        self.code = ExitCode.OK

    @contextlib.contextmanager
    def item(self, where: str, outcome: str | None = None) -> Iterator[None]:
        try:
            with about(where, outcome):
                yield
        except SourceFailed as exc:
            self.report(exc.line())
            self.code = max(self.code, ExitCode(exc.exit_code))
