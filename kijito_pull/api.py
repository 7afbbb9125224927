"""The Kijito HTTP API client: requests for transport, tenacity for transient retries, strict parsing.

Every envelope is parsed into a typed result or raises `ApiError`. Nothing malformed ever turns into
"no mail": an answer we cannot read is a failure of the source, and the engine fails closed on it.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Callable

import requests
import tenacity
import urllib3

from kijito_pull import __version__
from kijito_pull.models import Message

USER_AGENT = f"kijito-pull/{__version__}"
log = logging.getLogger("kijito_pull.http")
DEFAULT_TIMEOUT = 5.0
MAX_BODY_BYTES = 32 * 1024 * 1024


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


class ApiError(Exception):
    """The source failed. `str()` is one line, safe to show: it never contains the token."""

    def __init__(self, message: str, *, status: int | None = None, transient: bool = False,
                 retry_after: float | None = None):
        super().__init__(message)
        self.status = status
        self.transient = transient
        self.retry_after = retry_after

    @property
    def auth_failed(self) -> bool:
        return self.status == 401


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

        kijito-api.md §2.1.2: omission and continuation are two halves of one statement, and the
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

    def hidden_unread(self) -> bool | None:
        """On a newest page: does the server hold unread mail this window did not show? None = no claim.

        kijito-api.md §4: the count is computed only when something was withheld, so a 0 means "clear"
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


@dataclass(frozen=True)
class PendingCount:
    persona: str
    unread: int
    unread_urgent: int | None


@dataclass(frozen=True)
class NotifyResult:
    counts: tuple[PendingCount, ...]
    cursor: str | None  # present only when the server long-polled


@dataclass(frozen=True)
class PersonaInfo:
    persona: str
    memory_count: int | None


@dataclass(frozen=True)
class SendResult:
    id: int
    to: str


def parse_inbox(data: Any, before_id: int | None = None) -> InboxPage:
    if not isinstance(data, dict):
        raise ApiError("malformed inbox response: the body is not a JSON object")
    rows = data.get("result")
    if not isinstance(rows, list):
        raise ApiError("malformed inbox response: `result` is not a list")
    messages: list[Message] = []
    seen: set[int] = set()
    for index, row in enumerate(rows):
        messages.append(_parse_row(row, index))
        if messages[-1].id in seen:
            raise ApiError(f"malformed inbox response: id {messages[-1].id} appears twice in one page")
        seen.add(messages[-1].id)
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


def _parse_row(row: Any, index: int) -> Message:
    where = f"malformed inbox row {index}"
    if not isinstance(row, dict):
        raise ApiError(f"{where}: not an object")
    mid = row.get("id")
    if not _is_int(mid) or mid < 0:
        raise ApiError(f"{where}: `id` is not a non-negative integer")
    sender, content = row.get("from"), row.get("content")
    if not isinstance(sender, str):
        raise ApiError(f"{where} (id {mid}): `from` is not a string")
    if not isinstance(content, str):
        raise ApiError(f"{where} (id {mid}): `content` is not a string")
    created = row.get("created", "")
    if not isinstance(created, str):
        raise ApiError(f"{where} (id {mid}): `created` is not a string")
    read = row.get("read")
    if read is not None and not isinstance(read, bool):
        raise ApiError(f"{where} (id {mid}): `read` is not a boolean")
    urgent = row.get("urgent")
    return Message(
        id=mid, sender=sender, content=content, created=created,
        # An absent read flag counts as unread: failing closed means handing it over, not skipping it.
        read=read is True,
        urgent=urgent if isinstance(urgent, bool) else None,
    )


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
    out = []
    for row in data["result"]:
        if isinstance(row, dict) and isinstance(row.get("persona"), str) and row["persona"]:
            count = row.get("memory_count")
            out.append(PersonaInfo(row["persona"], count if _is_int(count) and count >= 0 else None))
    if not out:
        raise ApiError("the persona directory is empty or unreadable")
    return out


def parse_send(data: Any) -> SendResult:
    result = data.get("result") if isinstance(data, dict) else None
    if not isinstance(result, dict) or not _is_int(result.get("id")) or not isinstance(result.get("to"), str):
        raise ApiError("malformed send response: expected {\"result\": {\"id\": int, \"to\": str}}")
    return SendResult(result["id"], result["to"])


def _retry_after(value: str | None) -> float | None:
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    return seconds if seconds is not None and 0 <= seconds <= 3600 else None


class KijitoClient:
    """One API base and token. Retries only transient faults, within a total deadline per call."""

    def __init__(self, api_base: str, token: str, *, auth_header: str | None = None,
                 timeout: float = DEFAULT_TIMEOUT, attempts: int = 3, deadline: float = 15.0,
                 session: requests.Session | None = None,
                 sleep: Callable[[float], None] = time.sleep):
        self.api_base = api_base.rstrip("/")
        self.timeout = timeout
        self.attempts = max(1, attempts)
        self.deadline = deadline
        self._sleep = sleep
        self._session = session or requests.Session()
        self._session.trust_env = False  # no proxy or .netrc surprises carrying the token elsewhere
        self._session.headers["User-Agent"] = USER_AGENT
        if auth_header:
            self._session.headers[auth_header] = token
        else:
            self._session.headers["Authorization"] = f"Bearer {token}"
        self._token = token

    def close(self) -> None:
        self._session.close()

    def __repr__(self) -> str:
        return f"KijitoClient({self.api_base!r})"

    # -- endpoints ---------------------------------------------------------------------------------

    def inbox(self, persona: str, before_id: int | None = None, limit: int | None = None) -> InboxPage:
        params: list[tuple[str, str]] = [("persona", persona), ("mark_read", "false")]
        if before_id is not None:
            params.append(("before_id", str(before_id)))
        if limit is not None:
            params.append(("limit", str(limit)))
        return parse_inbox(self._call("GET", "/api/inbox", params=params), before_id)

    def notify_pending(self, wait: int | None = None, cursor: str | None = None) -> NotifyResult:
        params: list[tuple[str, str]] = []
        if wait is not None:
            params.append(("wait", str(wait)))
            if cursor:
                params.append(("cursor", cursor))
        timeout = self.timeout if wait is None else wait + 10.0
        return parse_notify(self._call("GET", "/api/notify/pending", params=params, timeout=timeout,
                                       attempts=1))

    def personas(self) -> list[PersonaInfo]:
        return parse_personas(self._call("GET", "/api/personas"))

    def send(self, to: str, content: str, sender: str | None = None, urgent: bool = False) -> SendResult:
        body: dict[str, Any] = {"to": to, "content": content, "urgent": urgent}
        if sender:
            body["from"] = sender
        # A send is not idempotent: never retried, so a timeout cannot post the message twice.
        return parse_send(self._call("POST", "/api/send", json_body=body, attempts=1))

    # -- transport ---------------------------------------------------------------------------------

    def _call(self, method: str, path: str, *, params: Sequence[tuple[str, str]] = (),
              json_body: Any = None, timeout: float | None = None, attempts: int | None = None) -> Any:
        started = time.monotonic()
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(lambda e: isinstance(e, ApiError) and e.transient),
            stop=tenacity.stop_after_attempt(attempts or self.attempts) | tenacity.stop_after_delay(self.deadline),
            wait=_wait_for(self),
            sleep=self._sleep,
            reraise=True,
        )
        return retrying(self._once, method, path, params, json_body, timeout or self.timeout, started)

    def _once(self, method: str, path: str, params: Sequence[tuple[str, str]], json_body: Any,
              timeout: float, started: float) -> Any:
        url = self.api_base + path
        try:
            response = self._session.request(method, url, params=list(params), json=json_body,
                                             timeout=(min(timeout, 10.0), timeout),
                                             allow_redirects=False, stream=True)
        except requests.exceptions.Timeout:
            raise ApiError(f"{path}: timed out after {timeout:g} s", transient=True) from None
        except requests.exceptions.ConnectionError as exc:
            raise ApiError(f"{path}: connection failed ({_short_reason(exc)})", transient=True) from None
        except requests.exceptions.RequestException as exc:
            raise ApiError(f"{path}: request failed ({type(exc).__name__})") from None
        with response:
            status = response.status_code
            log.debug("%s %s %s %.0f ms", method, response.request.path_url, status,
                      (time.monotonic() - started) * 1000)
            if 300 <= status < 400:
                raise ApiError(f"{path}: the server redirected ({status}); redirects are never followed",
                               status=status)
            if status == 401:
                raise ApiError(f"{path}: the server rejected the token (401)", status=status)
            if status == 429 or status >= 500:
                raise ApiError(f"{path}: server error {status}", status=status, transient=True,
                               retry_after=_retry_after(response.headers.get("Retry-After")))
            if not 200 <= status < 300:
                raise ApiError(f"{path}: HTTP {status}", status=status)
            body = self._read_body(response, path, timeout, started)
        try:
            return json.loads(body)
        except (ValueError, RecursionError):  # RecursionError: nesting too deep for the decoder
            body.clear()  # see _read_body: a failure must not keep the body alive
            raise ApiError(f"{path}: the response is not valid JSON") from None

    def _read_body(self, response: requests.Response, path: str, timeout: float, started: float) -> bytearray:
        """Read at most MAX_BODY_BYTES within the call's time, so a hostile server cannot exhaust us."""
        # One growing buffer, not a list of chunks joined at the end: joining held the body twice, and
        # the watch loop reads two bodies at once (counts and an inbox).
        body = bytearray()
        limit_at = started + max(timeout, self.deadline)
        try:
            for chunk in _arrivals(response, 65536):
                if len(body) + len(chunk) > MAX_BODY_BYTES:
                    raise ApiError(f"{path}: the response is larger than {MAX_BODY_BYTES // 2**20} MiB")
                if time.monotonic() > limit_at:
                    raise ApiError(f"{path}: the response took too long to arrive", transient=True)
                body += chunk
        except (requests.exceptions.RequestException, urllib3.exceptions.HTTPError) as exc:
            body.clear()
            raise ApiError(f"{path}: the response was cut off ({_short_reason(exc)})", transient=True) from None
        except ApiError:
            # The traceback keeps this frame, and tenacity's retry state makes it a reference cycle, so
            # without this the buffer (up to MAX_BODY_BYTES) lived on until the cycle collector ran.
            body.clear()
            raise
        return body


def _arrivals(response: requests.Response, size: int) -> Iterator[bytes]:
    """The body in pieces as they arrive, so the caller's deadline check runs however slowly bytes trickle.

    iter_content blocks until a whole chunk is filled (each byte resetting the socket timeout), so a server
    sending a byte a second held a pull for hours; read1 returns whatever has arrived.
    """
    read1 = getattr(response.raw, "read1", None)
    if read1 is None:  # urllib3 older than 2.3
        yield from response.iter_content(size)
        return
    while True:
        chunk = read1(size, decode_content=True)
        if not chunk:
            return
        yield chunk


def _wait_for(client: KijitoClient) -> Callable[[tenacity.RetryCallState], float]:
    backoff = tenacity.wait_exponential(multiplier=0.25, max=2.0)

    def wait(state: tenacity.RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, ApiError) and exc.retry_after is not None:
            return min(exc.retry_after, client.deadline)
        return backoff(state)

    return wait


def _short_reason(exc: BaseException) -> str:
    """A short, token-free reason from a requests exception chain."""
    text = str(exc)
    for marker in ("ConnectionResetError", "Connection refused", "RemoteDisconnected", "Connection aborted",
                   "Name or service not known", "timed out", "IncompleteRead", "ProtocolError"):
        if marker in text:
            return marker
    return type(exc).__name__
