"""The Kijito HTTP API client: requests (sending through core/transport.py's kept-alive connections),
tenacity for transient retries, strict parsing.

Every envelope is parsed into a typed result or raises `ApiError`. Nothing malformed ever turns into
"no mail": an answer we cannot read is a failure of the source, and the engine fails closed on it. A
rejected token and a failed connection name the API base they tried, and their `fix` the doctor (and,
for a loopback base that refuses connections, the sandbox, whose port changes on restart).
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import logging
import time
from collections.abc import Iterator, Sequence
from typing import Any, Callable

import requests
import tenacity
import urllib3

from kijito_pull import __version__
from kijito_pull.core.errors import DOCTOR
from kijito_pull.core.models import (
    ApiError,
    InboxPage,
    NotifyResult,
    PersonaInfo,
    SendResult,
    parse_inbox,
    parse_notify,
    parse_personas,
    parse_send,
)
from kijito_pull.core.transport import DeadlineExceeded, KeepAliveAdapter

USER_AGENT = f"kijito-pull/{__version__}"
log = logging.getLogger("kijito_pull.http")
DEFAULT_TIMEOUT = 5.0
MAX_BODY_BYTES = 32 * 1024 * 1024
#: The fix a rejected token names.
TOKEN_FIX = f"check $KIJITOMON_TOKEN, --token-file or the config file's token_file; {DOCTOR}"
#: The fix a refused connection to a loopback API base names: most often a sandbox that stopped or restarted.
SANDBOX_FIX = f"is the sandbox still running? its port changes on restart; {DOCTOR}"


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
        if session is None:
            session = requests.Session()
            transport = KeepAliveAdapter()  # core/transport.py: requests over kept http.client connections
            session.mount("http://", transport)
            session.mount("https://", transport)
        self._session = session
        try:  # the whole-exchange deadline is this transport's; another (a benchmark's stock one) gets two
            self._bounded = isinstance(session.get_adapter(self.api_base + "/"), KeepAliveAdapter)
        except requests.exceptions.InvalidSchema:
            self._bounded = False
        self._session.trust_env = False  # no proxy or .netrc surprises carrying the token elsewhere
        self._session.headers["User-Agent"] = USER_AGENT
        if auth_header:
            self._session.headers[auth_header] = token
        else:
            self._session.headers["Authorization"] = f"Bearer {token}"
        self._token = token
        #: Prepared requests by request line (`_prepare`), so a request sent again is not prepared again.
        self._prepared: dict[tuple, requests.PreparedRequest] = {}

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
        return parse_inbox(self._call("GET", "/api/inbox", params=params), before_id, persona)

    def mark_read_below(self, persona: str, before_id: int) -> InboxPage:
        """Mark read the inbox window of ids below `before_id` (the server marks every row a window returns:
        only core/receipts.py asks this, with `before_id` just above the confirmed cursor)."""
        params = [("persona", persona), ("mark_read", "true"), ("before_id", str(before_id))]
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
        attempts = attempts or self.attempts
        timeout = timeout or self.timeout
        try:
            # The first attempt is made directly: most calls succeed at once, and tenacity's bookkeeping
            # was a tenth of a watch's request CPU. Only a transient failure brings tenacity in.
            return self._once(method, path, params, json_body, timeout, started)
        except ApiError as exc:
            if attempts == 1 or not exc.transient:
                raise
            first: ApiError | None = exc

        def attempt() -> Any:
            nonlocal first
            if first is not None:  # tenacity's attempt 1 is the one already made: same schedule after it
                failed, first = first, None
                raise failed
            return self._once(method, path, params, json_body, timeout, started)

        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(lambda e: isinstance(e, ApiError) and e.transient),
            # The deadline counts from the call's start, the first attempt included.
            stop=lambda state: state.attempt_number >= attempts or time.monotonic() - started >= self.deadline,
            wait=_wait_for(self),
            sleep=self._sleep,
            reraise=True,
        )
        return retrying(attempt)

    def _once(self, method: str, path: str, params: Sequence[tuple[str, str]], json_body: Any,
              timeout: float, started: float) -> Any:
        session = self._session
        # One deadline bounds the whole call, every attempt's connect, head and body included: what is left
        # of it is the transport's `total` (core/transport.py), so no trickle of bytes outlasts it.
        limit = self._limit(timeout)
        left = started + limit - time.monotonic()
        if left <= 0:
            raise ApiError(f"{path}: timed out: no whole answer within {limit:g} s", transient=True)
        timeouts: tuple = (min(timeout, 10.0), timeout, left) if self._bounded else (min(timeout, 10.0), timeout)
        with _failures(path, timeout, limit, self.api_base):
            # What Session.request does, with the preparation kept (`_prepare`) and, since the session
            # never reads the environment (trust_env is off), its own proxies, verify and cert settings.
            response = session.send(self._prepare(method, path, params, json_body),
                                    timeout=timeouts, allow_redirects=False, stream=True,
                                    proxies=session.proxies, verify=session.verify, cert=session.cert)
        return self._answer(response, method, path, timeout, started)

    def _limit(self, timeout: float) -> float:
        """The seconds a call may take from its start, every attempt and body included (a long poll's
        timeout may exceed the deadline)."""
        return max(timeout, self.deadline)

    def _answer(self, response: requests.Response, method: str, path: str, timeout: float, started: float) -> Any:
        """The decoded body of a 2xx answer; any other answer is an ApiError."""
        with response:
            status = response.status_code
            if log.isEnabledFor(logging.DEBUG):
                log.debug("%s %s %s %.0f ms", method, response.request.path_url, status,
                          (time.monotonic() - started) * 1000)
            if 300 <= status < 400:
                raise ApiError(f"{path}: the server redirected ({status}); redirects are never followed",
                               status=status)
            if status == 401:
                raise ApiError(f"{path}: the server at {self.api_base} rejected the token (401)", status=status,
                               fix=TOKEN_FIX)
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

    def _prepare(self, method: str, path: str, params: Sequence[tuple[str, str]],
                 json_body: Any) -> requests.PreparedRequest:
        """requests' own preparation of a request (URL and query, session headers and auth), kept by
        request line for a request without a body: a watch sends the same notify hold and newest-page read
        on every wake, and preparing each again cost about 0.1 ms. Not kept while the session holds a
        cookie, since cookies are part of the preparation; a copy is sent, never the kept one."""
        key = (method, path, tuple(params)) if json_body is None else None
        keep = key is not None and not self._session.cookies
        if keep:
            kept = self._prepared.get(key)
            if kept is not None:
                return kept.copy()
        prepared = self._session.prepare_request(
            requests.Request(method, self.api_base + path, params=list(params), json=json_body))
        if keep:
            if len(self._prepared) >= 64:  # backward pages carry ever new before_id values
                self._prepared.clear()
            self._prepared[key] = prepared
            return prepared.copy()
        return prepared

    def _read_body(self, response: requests.Response, path: str, timeout: float, started: float) -> bytearray:
        """Read at most MAX_BODY_BYTES within the call's time, so a hostile server cannot exhaust us."""
        # One growing buffer, not a list of chunks joined at the end: joining held the body twice, and
        # the watch loop reads two bodies at once (counts and an inbox).
        body = bytearray()
        limit_at = started + self._limit(timeout)
        try:
            for chunk in _arrivals(response, 65536):
                if len(body) + len(chunk) > MAX_BODY_BYTES:
                    raise ApiError(f"{path}: the response is larger than {MAX_BODY_BYTES // 2**20} MiB")
                if time.monotonic() > limit_at:
                    raise DeadlineExceeded()
                body += chunk
        except DeadlineExceeded:
            body.clear()
            raise ApiError(f"{path}: the response took too long to arrive (more than "
                           f"{limit_at - started:g} s)", transient=True) from None
        except (requests.exceptions.RequestException, urllib3.exceptions.HTTPError) as exc:
            body.clear()
            raise ApiError(f"{path}: the response was cut off ({_short_reason(exc)})", transient=True) from None
        except ApiError:
            # The traceback keeps this frame, and tenacity's retry state makes it a reference cycle, so
            # without this the buffer (up to MAX_BODY_BYTES) lived on until the cycle collector ran.
            body.clear()
            raise
        return body


@contextlib.contextmanager
def _failures(path: str, timeout: float, limit: float, base: str) -> Iterator[None]:
    """requests' exceptions from sending a request or reading an answer's head, as ApiError; a failed
    connection names `base`, the API base it was made to."""
    try:
        yield
    except DeadlineExceeded:
        raise ApiError(f"{path}: timed out: no whole answer within {limit:g} s (the server sends too slowly)",
                       transient=True) from None
    except requests.exceptions.ContentDecodingError as exc:
        raise ApiError(f"{path}: {exc} and is not read (an uncompressed one was asked for: the server or a "
                       f"proxy ignores Accept-Encoding: identity)") from None
    except requests.exceptions.Timeout:
        raise ApiError(f"{path}: timed out after {timeout:g} s", transient=True) from None
    except requests.exceptions.ConnectionError as exc:
        reason = _short_reason(exc)
        fix = SANDBOX_FIX if reason == "Connection refused" and _loopback(base) else DOCTOR
        raise ApiError(f"{path}: connection failed ({reason}) to the API base {base}", transient=True,
                       fix=fix) from None
    except requests.exceptions.RequestException as exc:
        raise ApiError(f"{path}: request failed ({type(exc).__name__})") from None


def _loopback(base: str) -> bool:
    host = urllib3.util.parse_url(base).host or ""
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


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
