"""Typed values that cross layer boundaries: what the server said, parsed strictly once.

The envelopes of the Kijito API (docs/server-api.md) are parsed here into typed results or `ApiError` (a
`core.errors.SourceFailed`, exit 1); nothing malformed ever turns into "no mail". Standard library only:
the engine and the hook fast path use these types without importing the HTTP stack (core.api is the
client that fetches them; `message_at` is the one request that reads a single row through it)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

from kijito_pull.core.errors import SourceFailed, first_line  # noqa: F401 - first_line: re-exported


@dataclass(frozen=True)
class Message:
    """One inbox row. `sender` is the wire field `from` (a Python keyword)."""

    id: int
    sender: str
    content: str
    created: str
    read: bool
    urgent: bool | None = None


class NoAnswer:
    """A declaration the server did not make in a usable form (absent, wrong type, negative)."""

    _instance: NoAnswer | None = None

    def __new__(cls) -> NoAnswer:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NO_ANSWER"


NO_ANSWER = NoAnswer()
#: An omission the server admitted but did not count ("at least one").
INEXACT = "inexact"


#: The id range the contract accepts (docs/server-api.md): integers from 0 that fit a signed 64-bit value.
#: Kijito's ids start at 0: a new account's first message is id 0 (and an empty inbox's cursor sits below it).
MIN_ID = 0
MAX_ID = 2**63 - 1


class ApiError(SourceFailed):
    """The source failed (exit 1). `str()` is one line, safe to show: it never contains the token; `fix`
    (core.errors) says what to do, where there is something."""

    def __init__(self, message: str, *, status: int | None = None, transient: bool = False,
                 retry_after: float | None = None, fix: str | None = None):
        super().__init__(message, fix=fix)
        self.status = status
        self.transient = transient
        self.retry_after = retry_after

    @property
    def auth_failed(self) -> bool:
        return self.status == 401


class EmptyDirectory(ApiError):
    """The persona directory answered, and lists no persona: readable, but nobody has been sent mail yet
    (a new account). An ApiError for callers that need a persona from it (`watch --all-personas`)."""

    def __init__(self) -> None:
        super().__init__("the persona directory is empty: no persona has been sent mail yet")


class Untrustworthy(ApiError):
    """An answer that reads well but cannot be believed: it states another persona than the one asked for,
    or carries an id outside MIN_ID..MAX_ID. Nothing from it is delivered (shared/design.md); where a cursor
    exists the engine pins it and raises one alert, as for a lying window."""

    def __init__(self, message: str):
        super().__init__(f"untrustworthy answer: {message}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class InboxPage:
    """One window of an inbox, with what the server declared about the rows it withheld."""

    messages: tuple[Message, ...]  # sorted by id ascending
    omission: int | str  # exact count of withheld rows, or INEXACT (at least one)
    continuation: int | None | NoAnswer  # next_before_id: int, None (affirmed end) or NO_ANSWER
    size_truncated: bool
    unread_not_shown: int | None  # None = no statement
    before_id: int | None = None  # the before_id this page was asked for (None = newest page)

    @property
    def oldest_id(self) -> int | None:
        return self.messages[0].id if self.messages else None

    @property
    def newest_id(self) -> int | None:
        return self.messages[-1].id if self.messages else None

    @property
    def withheld(self) -> bool:
        return self.omission == INEXACT or (isinstance(self.omission, int) and self.omission > 0)

    def contradiction(self) -> str | None:
        """Why this page cannot be believed about what it withheld, or None if it is self-consistent.

        docs/server-api.md, rule 1: omission and continuation are two halves of one statement, and the
        continuation must be this page's oldest id. A page that contradicts itself never proves coverage.
        """
        if isinstance(self.continuation, NoAnswer):
            return "next_before_id missing or not an integer"
        if self.before_id is not None and any(m.id >= self.before_id for m in self.messages):
            return f"a page asked for ids below {self.before_id} returned id {self.newest_id}"
        if self.withheld and self.continuation is None:
            return "rows withheld but next_before_id is null"
        if not self.withheld and self.continuation is not None:
            return "nothing withheld but next_before_id is set"
        if self.continuation is not None and self.continuation != self.oldest_id:
            return f"next_before_id {self.continuation} is not the page's oldest id {self.oldest_id}"
        return None

    def contradicts(self, seen: Mapping[int, Message]) -> str | None:
        """Why this page contradicts rows earlier pages showed (one id, another message), or None."""
        for m in self.messages:
            known = seen.get(m.id)
            if known is not None and known != m:
                return f"id {m.id} differs from the row an earlier page showed"
        return None

    @classmethod
    def unbelieved(cls) -> InboxPage:
        """What stands in for an untrustworthy newest page: no rows, and nothing proven about the rest."""
        return cls(messages=(), omission=INEXACT, continuation=NO_ANSWER, size_truncated=False,
                   unread_not_shown=None)

    def hidden_unread(self) -> bool | None:
        """On a newest page: does the server hold unread mail this window did not show? None = no claim.

        docs/server-api.md, rule 3: the count is computed only when something was withheld, so a 0 means "clear"
        only with positive evidence (a continuation, or a structurally complete window).
        """
        n = self.unread_not_shown
        if n is None:
            return None
        if n > 0:
            return True
        if self.continuation is not None and not isinstance(self.continuation, NoAnswer):
            return False
        return False if self.omission == 0 and self.continuation is None else None

    @property
    def declares_end(self) -> bool:
        """A consistent page that withheld nothing: there is nothing older than it."""
        return not self.withheld and self.continuation is None and self.contradiction() is None


def message_at(client: Any, persona: str, ident: int) -> Message | None:
    """Message `ident` of `persona`'s inbox, None when the inbox does not hold it: one request that marks
    nothing (the newest row below ident + 1 is ident itself when it is there), through a client with
    core.api.KijitoClient's `inbox`. ApiError when the server cannot be asked."""
    page = client.inbox(persona, before_id=ident + 1, limit=1)
    return next((m for m in page.messages if m.id == ident), None)


@dataclass(frozen=True)
class PendingCount:
    """One persona's row of a notify/pending answer: its unread count and, where the server says, how
    many of them a sender marked urgent."""

    persona: str
    unread: int
    unread_urgent: int | None


@dataclass(frozen=True)
class NotifyResult:
    """A notify/pending answer: every persona's counts, and the cursor of a long-polled answer."""

    counts: tuple[PendingCount, ...]
    cursor: str | None  # present only when the server long-polled


@dataclass(frozen=True)
class PersonaInfo:
    """One persona of the account's directory (GET /api/personas)."""

    persona: str
    memory_count: int | None


@dataclass(frozen=True)
class SendResult:
    """What POST /api/send answered: the new message's id and its recipient."""

    id: int
    to: str


def parse_inbox(data: Any, before_id: int | None = None, persona: str | None = None) -> InboxPage:
    """`persona`: the inbox asked for; an envelope or row that states another one is `Untrustworthy`
    (an absent or null `persona` field is no statement). So is a row id outside MIN_ID..MAX_ID."""
    if not isinstance(data, dict):
        raise ApiError("malformed inbox response: the body is not a JSON object")
    rows = data.get("result")
    if not isinstance(rows, list):
        raise ApiError("malformed inbox response: `result` is not a list")
    if persona is not None:
        _check_persona(data, "the envelope", persona)
    messages = [_parse_row(row, index, persona) for index, row in enumerate(rows)]
    ids = [m.id for m in messages]
    if len(set(ids)) != len(ids):
        twice = next(i for n, i in enumerate(ids) if i in ids[:n])
        raise ApiError(f"malformed inbox response: id {twice} appears twice in one page")
    messages.sort(key=lambda m: m.id)
    return InboxPage(
        messages=tuple(messages),
        omission=_omission(data),
        continuation=_continuation(data.get("next_before_id", NO_ANSWER)),
        size_truncated=data.get("size_truncated") is True,
        unread_not_shown=data.get("unread_not_shown") if _is_int(data.get("unread_not_shown"))
        and data["unread_not_shown"] >= 0 else None,
        before_id=before_id,
    )


def _check_persona(obj: dict, where: str, persona: str) -> None:
    stated = obj.get("persona")
    if stated is not None and stated != persona:
        shown = repr(stated[:64]) if isinstance(stated, str) else f"a {type(stated).__name__}"
        raise Untrustworthy(f"{where} states persona {shown}, not {persona!r} as asked")


def _parse_row(row: Any, index: int, persona: str | None = None) -> Message:
    # Checked field by field, cheapest first: a watch parses the whole newest page on every wake.
    if type(row) is not dict:
        raise ApiError(f"malformed inbox row {index}: not an object")
    mid = row.get("id")
    sender, content, created, read = row.get("from"), row.get("content"), row.get("created", ""), row.get("read")
    if (type(mid) is not int or not MIN_ID <= mid <= MAX_ID or type(sender) is not str or type(content) is not str
            or type(created) is not str or (read is not None and type(read) is not bool)):
        _reject_row(row, index)
    if persona is not None and "persona" in row:
        _check_persona(row, f"inbox row {index} (id {mid})", persona)
    urgent = row.get("urgent")
    return Message(
        id=mid, sender=sender, content=content, created=created,
        # An absent read flag counts as unread: failing closed means handing it over, not skipping it.
        read=read is True,
        urgent=urgent if isinstance(urgent, bool) else None,
    )


def _reject_row(row: dict, index: int) -> NoReturn:
    """Why a row that failed `_parse_row`'s checks is malformed (the first broken field, in field order)."""
    where = f"malformed inbox row {index}"
    mid = row.get("id")
    if not _is_int(mid):
        raise ApiError(f"{where}: `id` is not an integer")
    if not MIN_ID <= mid <= MAX_ID:
        shown = str(mid) if len(str(mid)) <= 40 else f"{str(mid)[:20]}... ({len(str(mid))} digits)"
        raise Untrustworthy(f"inbox row {index} has id {shown}, outside the contract's range "
                            f"{MIN_ID}..{MAX_ID} (2**63 - 1)")
    for key, wanted in (("from", "string"), ("content", "string"), ("created", "string"), ("read", "boolean")):
        value = row.get(key, "" if key == "created" else None)
        if key == "read" and value is None:
            continue
        if not isinstance(value, str if wanted == "string" else bool):
            raise ApiError(f"{where} (id {mid}): `{key}` is not a {wanted}")
    raise ApiError(f"{where} (id {mid}): malformed")


def _omission(data: dict) -> int | str:
    """How many rows the page withheld, by the reference's reading of the declarations (§2.1.2)."""
    exact = 0
    inexact = False
    if "truncated" in data and data["truncated"] is not False:
        inexact = True  # true, or any non-bool value: an admitted, uncounted omission
    size_dropped = data.get("size_dropped")
    if _is_int(size_dropped) and size_dropped >= 0:
        exact += size_dropped
    elif _is_int(size_dropped):
        inexact = True  # a negative count is no count
    else:
        size_truncated = data.get("size_truncated", False)
        if size_dropped is not None or (size_truncated is not False and size_truncated is not None):
            inexact = True
    return INEXACT if inexact else exact


def _continuation(value: Any) -> int | None | NoAnswer:
    if value is None:
        return None
    if _is_int(value) and value >= 0:
        return value
    return NO_ANSWER


def parse_notify(data: Any) -> NotifyResult:
    if not isinstance(data, dict) or not isinstance(data.get("result"), list):
        raise ApiError("malformed notify response: `result` is not a list")
    counts = []
    for row in data["result"]:
        if not isinstance(row, dict) or not isinstance(row.get("persona"), str) or not row["persona"]:
            continue  # the reference ignores rows without a persona name
        unread = row.get("unread")
        urgent = row.get("unread_urgent")
        counts.append(PendingCount(
            persona=row["persona"],
            unread=unread if _is_int(unread) and unread >= 0 else 0,
            unread_urgent=urgent if _is_int(urgent) and urgent >= 0 else None,
        ))
    cursor = data.get("cursor")
    return NotifyResult(tuple(counts), cursor if isinstance(cursor, str) and cursor else None)


def parse_personas(data: Any) -> list[PersonaInfo]:
    if not isinstance(data, dict) or not isinstance(data.get("result"), list):
        raise ApiError("malformed personas response: `result` is not a list")
    if not data["result"]:
        raise EmptyDirectory()
    out = []
    for row in data["result"]:
        if isinstance(row, dict) and isinstance(row.get("persona"), str) and row["persona"]:
            count = row.get("memory_count")
            out.append(PersonaInfo(row["persona"], count if _is_int(count) and count >= 0 else None))
    if not out:
        raise ApiError("the persona directory is unreadable: no row names a persona")
    return out


def parse_send(data: Any) -> SendResult:
    result = data.get("result") if isinstance(data, dict) else None
    if not isinstance(result, dict) or not _is_int(result.get("id")) or not isinstance(result.get("to"), str):
        raise ApiError("malformed send response: expected {\"result\": {\"id\": int, \"to\": str}}")
    return SendResult(result["id"], result["to"])
