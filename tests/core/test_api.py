"""Unit tests of the Kijito API client (kijito_pull/core/api.py) against `responses` mocks.

The contract is kijito-api.md: peek-only inbox requests, a named User-Agent, strict parsing in which
nothing malformed ever reads as "no mail", transient-only retries, no redirects, and a token that
never appears in an error message.
"""

from __future__ import annotations

import json
from urllib.parse import parse_qsl, urlsplit

import pytest
import requests
import responses

from kijito_pull import __version__
from kijito_pull.core import api
from kijito_pull.core.api import KijitoClient
from kijito_pull.core.models import (
    INEXACT,
    NO_ANSWER,
    ApiError,
    Untrustworthy,
    parse_inbox,
    parse_notify,
    parse_personas,
    parse_send,
)

BASE = "https://api.kijito.test"
INBOX = f"{BASE}/api/inbox"
NOTIFY = f"{BASE}/api/notify/pending"
PERSONAS = f"{BASE}/api/personas"
SEND = f"{BASE}/api/send"
TOKEN = "tok-SECRET-7c1f0e9ab3d2"


def row(mid, sender="river", content="hi", read=False, **extra):
    r = {"id": mid, "from": sender, "content": content, "created": "2026-08-01T10:00:00Z", "read": read}
    r.update(extra)
    return r


def envelope(ids=(), *, truncated=False, size_dropped=0, next_before_id=None, unread_not_shown=0, **extra):
    body = {"result": [row(i) for i in ids], "truncated": truncated, "size_dropped": size_dropped,
            "size_truncated": False, "next_before_id": next_before_id, "unread_not_shown": unread_not_shown}
    body.update(extra)
    return body


class Sleeps(list):
    """A recording stand-in for time.sleep, so retry tests are instant and can assert the waits."""

    def __call__(self, seconds):
        self.append(seconds)


@pytest.fixture
def sleeps():
    return Sleeps()


@pytest.fixture
def client(sleeps):
    c = KijitoClient(BASE, TOKEN, attempts=3, sleep=sleeps)
    yield c
    c.close()


@pytest.fixture
def mocked():
    # The client's own transport adapter (core/transport.py) stands where requests' HTTPAdapter would;
    # tests/core/test_transport.py tests that adapter over real sockets.
    with responses.RequestsMock(assert_all_requests_are_fired=False,
                                target="kijito_pull.core.transport.KeepAliveAdapter.send") as rsps:
        yield rsps


def query(call):
    return parse_qsl(urlsplit(call.request.url).query, keep_blank_values=True)


def assert_safe(exc: BaseException):
    """A failure message is one line and never carries the token."""
    text = str(exc)
    assert text
    assert "\n" not in text and "\r" not in text
    assert TOKEN not in text
    assert TOKEN not in repr(exc)
    assert TOKEN[4:] not in text  # not even a fragment of it


# -- request shape ---------------------------------------------------------------------------------

def test_newest_page_request_peeks_and_sends_no_cursor(client, mocked):
    mocked.get(INBOX, json=envelope([1]))
    client.inbox("river")
    assert query(mocked.calls[0]) == [("persona", "river"), ("mark_read", "false")]
    request = mocked.calls[0].request
    assert request.method == "GET" and not request.body
    # 304 is not part of the contract: never ask for it
    assert not {"If-None-Match", "If-Modified-Since"} & set(request.headers)


def test_backward_page_encodes_before_id_and_limit_and_still_peeks(client, mocked):
    mocked.get(INBOX, json=envelope([5]))
    client.inbox("river", before_id=1204, limit=7)
    assert query(mocked.calls[0]) == [("persona", "river"), ("mark_read", "false"),
                                      ("before_id", "1204"), ("limit", "7")]


def test_before_id_zero_is_a_real_cursor_not_the_newest_page(client, mocked):
    mocked.get(INBOX, json=envelope([]))
    page = client.inbox("river", before_id=0)
    assert ("before_id", "0") in query(mocked.calls[0])
    assert page.before_id == 0


def test_every_inbox_request_peeks_including_retries(client, mocked):
    mocked.get(INBOX, status=503)
    mocked.get(INBOX, json=envelope([3]))
    client.inbox("Claude-chat", before_id=9)
    client.inbox("Claude-chat")
    assert len(mocked.calls) == 3
    for call in mocked.calls:
        assert dict(query(call))["mark_read"] == "false"
        assert dict(query(call))["persona"] == "Claude-chat"


def test_persona_is_url_encoded(client, mocked):
    mocked.get(INBOX, json=envelope([]))
    client.inbox("a+b@c d")
    assert "persona=a%2Bb%40c" in mocked.calls[0].request.url
    assert dict(query(mocked.calls[0]))["persona"] == "a+b@c d"


def test_user_agent_is_named_and_versioned(client, mocked):
    mocked.get(INBOX, json=envelope([]))
    mocked.get(NOTIFY, json={"result": []})
    mocked.get(PERSONAS, json={"result": [{"persona": "p"}]})
    mocked.post(SEND, json={"result": {"id": 1, "to": "p"}})
    client.inbox("p")
    client.notify_pending()
    client.personas()
    client.send("p", "hello")
    assert len(mocked.calls) == 4
    for call in mocked.calls:
        assert call.request.headers["User-Agent"] == f"kijito-pull/{__version__}"


def test_bearer_authorization_by_default(client, mocked):
    mocked.get(INBOX, json=envelope([]))
    client.inbox("p")
    assert mocked.calls[0].request.headers["Authorization"] == f"Bearer {TOKEN}"


def test_custom_auth_header_sends_the_raw_token_and_no_authorization(sleeps, mocked):
    c = KijitoClient(BASE, TOKEN, auth_header="X-Kijito-Key", sleep=sleeps)
    mocked.get(INBOX, json=envelope([]))
    mocked.post(SEND, json={"result": {"id": 1, "to": "p"}})
    c.inbox("p")
    c.send("p", "x")
    for call in mocked.calls:
        assert call.request.headers["X-Kijito-Key"] == TOKEN
        assert "Authorization" not in call.request.headers
        assert all(TOKEN not in v or k.lower() == "x-kijito-key" for k, v in call.request.headers.items())


def test_api_base_trailing_slash_does_not_double(sleeps, mocked):
    c = KijitoClient(BASE + "/", TOKEN, sleep=sleeps)
    mocked.get(INBOX, json=envelope([]))
    c.inbox("p")
    assert urlsplit(mocked.calls[0].request.url).path == "/api/inbox"


def test_repr_has_no_token(client):
    assert TOKEN not in repr(client)
    assert TOKEN not in str(client)
    assert BASE in repr(client)


def test_send_body_and_result(client, mocked):
    mocked.post(SEND, json={"result": {"id": 77, "to": "loom"}})
    result = client.send("loom", "status?", sender="river", urgent=True)
    assert (result.id, result.to) == (77, "loom")
    assert json.loads(mocked.calls[0].request.body) == {"to": "loom", "content": "status?", "urgent": True,
                                                        "from": "river"}


def test_notify_long_poll_params_and_cursor(client, mocked):
    mocked.get(NOTIFY, json={"result": [{"persona": "p", "unread": 2}], "cursor": "c_01"})
    result = client.notify_pending(wait=30, cursor="c_00")
    assert query(mocked.calls[0]) == [("wait", "30"), ("cursor", "c_00")]
    assert result.cursor == "c_01"
    mocked.get(NOTIFY, json={"result": []})
    client.notify_pending()
    assert query(mocked.calls[1]) == []


# -- retries -----------------------------------------------------------------------------------------

TRANSIENT_EXCEPTIONS = [
    requests.exceptions.ConnectionError(f"Connection refused; Authorization: Bearer {TOKEN}"),
    requests.exceptions.ConnectTimeout(f"connect timed out {TOKEN}"),
    requests.exceptions.ReadTimeout(f"read timed out {TOKEN}"),
]


@pytest.mark.parametrize("exc", TRANSIENT_EXCEPTIONS, ids=lambda e: type(e).__name__)
def test_transport_faults_are_retried_up_to_attempts(client, mocked, sleeps, exc):
    mocked.get(INBOX, body=exc)
    with pytest.raises(ApiError) as info:
        client.inbox("p")
    assert len(mocked.calls) == 3
    assert len(sleeps) == 2
    assert info.value.transient
    assert_safe(info.value)


@pytest.mark.parametrize("exc", TRANSIENT_EXCEPTIONS, ids=lambda e: type(e).__name__)
def test_transport_fault_then_success(client, mocked, exc):
    mocked.get(INBOX, body=exc)
    mocked.get(INBOX, json=envelope([4]))
    page = client.inbox("p")
    assert [m.id for m in page.messages] == [4]
    assert len(mocked.calls) == 2


@pytest.mark.parametrize("status", [500, 502, 503, 504, 429])
def test_server_errors_and_429_are_retried_up_to_attempts(client, mocked, sleeps, status):
    mocked.get(INBOX, status=status, body=f"oops {TOKEN}")
    with pytest.raises(ApiError) as info:
        client.inbox("p")
    assert len(mocked.calls) == 3
    assert info.value.status == status
    assert info.value.transient
    assert_safe(info.value)


@pytest.mark.parametrize("attempts", [1, 2, 5])
def test_attempts_is_the_total_number_of_tries(mocked, sleeps, attempts):
    c = KijitoClient(BASE, TOKEN, attempts=attempts, sleep=sleeps)
    mocked.get(INBOX, status=502)
    with pytest.raises(ApiError):
        c.inbox("p")
    assert len(mocked.calls) == attempts
    assert len(sleeps) == attempts - 1


def test_server_error_then_success(client, mocked):
    mocked.get(INBOX, status=500)
    mocked.get(INBOX, status=429)
    mocked.get(INBOX, json=envelope([8]))
    assert client.inbox("p").newest_id == 8
    assert len(mocked.calls) == 3


@pytest.mark.parametrize("status", [400, 401, 403, 404, 405, 410, 422])
def test_client_errors_are_never_retried(client, mocked, sleeps, status):
    mocked.get(INBOX, status=status, body=f"denied for {TOKEN}")
    with pytest.raises(ApiError) as info:
        client.inbox("p", before_id=12)
    assert len(mocked.calls) == 1
    assert sleeps == []
    assert info.value.status == status
    assert not info.value.transient
    assert info.value.auth_failed == (status == 401)
    assert_safe(info.value)


@pytest.mark.parametrize("fault", [dict(status=500), dict(status=503), dict(status=429),
                                   dict(body=requests.exceptions.ConnectionError("reset")),
                                   dict(body=requests.exceptions.ReadTimeout("slow"))],
                         ids=["500", "503", "429", "connect", "timeout"])
def test_send_is_never_retried(client, mocked, sleeps, fault):
    mocked.post(SEND, **fault)
    mocked.post(SEND, json={"result": {"id": 1, "to": "p"}})
    with pytest.raises(ApiError) as info:
        client.send("p", "only once")
    assert len(mocked.calls) == 1
    assert sleeps == []
    assert_safe(info.value)


def test_retry_after_is_honoured(client, mocked, sleeps):
    mocked.get(INBOX, status=503, headers={"Retry-After": "4"})
    mocked.get(INBOX, status=429, headers={"Retry-After": "1.5"})
    mocked.get(INBOX, json=envelope([]))
    client.inbox("p")
    assert sleeps == [4.0, 1.5]


def test_retry_after_is_capped_by_the_deadline(mocked, sleeps):
    c = KijitoClient(BASE, TOKEN, attempts=2, deadline=3.0, sleep=sleeps)
    mocked.get(INBOX, status=503, headers={"Retry-After": "600"})
    mocked.get(INBOX, json=envelope([]))
    c.inbox("p")
    assert sleeps == [3.0]


@pytest.mark.parametrize("value", ["soon", "-5", "99999", "Wed, 21 Oct 2015 07:28:00 GMT", "nan"])
def test_unusable_retry_after_falls_back_to_bounded_backoff(client, mocked, sleeps, value):
    mocked.get(INBOX, status=503, headers={"Retry-After": value})
    mocked.get(INBOX, json=envelope([]))
    client.inbox("p")
    assert len(sleeps) == 1
    assert 0 <= sleeps[0] <= 2.0


def test_backoff_between_plain_retries_is_bounded(client, mocked, sleeps):
    mocked.get(INBOX, status=500)
    with pytest.raises(ApiError):
        client.inbox("p")
    assert len(sleeps) == 2 and all(0 < s <= 2.0 for s in sleeps)


# -- redirects ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_redirects_are_never_followed(client, mocked, sleeps, status):
    target = "https://elsewhere.test/api/inbox"
    mocked.get(INBOX, status=status, headers={"Location": target})
    mocked.get(target, json=envelope([1]))
    with pytest.raises(ApiError) as info:
        client.inbox("p")
    assert [c.request.url.split("?")[0] for c in mocked.calls] == [INBOX]
    assert info.value.status == status
    assert not info.value.transient
    assert "redirect" in str(info.value)
    assert sleeps == []
    assert_safe(info.value)


def test_redirect_on_send_is_not_followed(client, mocked):
    mocked.post(SEND, status=307, headers={"Location": "https://elsewhere.test/api/send"})
    with pytest.raises(ApiError):
        client.send("p", "x")
    assert len(mocked.calls) == 1


# -- bodies ------------------------------------------------------------------------------------------

def test_body_larger_than_the_limit_fails(client, mocked, monkeypatch):
    monkeypatch.setattr(api, "MAX_BODY_BYTES", 1000)
    big = json.dumps(envelope([1], pad="x" * 5000))
    mocked.get(INBOX, body=big, content_type="application/json")
    with pytest.raises(ApiError) as info:
        client.inbox("p")
    assert "larger than" in str(info.value)
    assert len(mocked.calls) == 1  # an oversized answer is not fetched again
    assert_safe(info.value)


def test_body_just_under_the_limit_is_read(client, mocked, monkeypatch):
    body = json.dumps(envelope([1]))
    monkeypatch.setattr(api, "MAX_BODY_BYTES", len(body.encode()))
    mocked.get(INBOX, body=body, content_type="application/json")
    assert client.inbox("p").newest_id == 1


@pytest.mark.parametrize("body", ["", "not json", "{\"result\": [", "\x00\x01", "<html>502</html>"])
def test_unparseable_body_is_a_failure_not_no_mail(client, mocked, body):
    mocked.get(INBOX, body=body)
    with pytest.raises(ApiError) as info:
        client.inbox("p")
    assert_safe(info.value)


@pytest.mark.parametrize("status", [200, 201, 203])
def test_any_2xx_with_a_healthy_body_is_accepted(client, mocked, status):
    mocked.get(INBOX, status=status, json=envelope([2]))
    assert client.inbox("p").newest_id == 2


# -- the token never leaks ---------------------------------------------------------------------------

FAILURES = {
    "connect": dict(body=requests.exceptions.ConnectionError(f"Authorization: Bearer {TOKEN}")),
    "timeout": dict(body=requests.exceptions.Timeout(f"timed out sending {TOKEN}")),
    "ssl": dict(body=requests.exceptions.SSLError(f"cert for {TOKEN}")),
    "invalid-header": dict(body=requests.exceptions.InvalidHeader(f"bad header value {TOKEN!r}")),
    "other-request-exception": dict(body=requests.exceptions.RequestException(TOKEN)),
    "400": dict(status=400, body=TOKEN),
    "401": dict(status=401, body=f"bad token {TOKEN}"),
    "403": dict(status=403, body=TOKEN),
    "404": dict(status=404, body=TOKEN),
    "500": dict(status=500, body=TOKEN),
    "429": dict(status=429, body=TOKEN, headers={"Retry-After": "0"}),
    "302": dict(status=302, headers={"Location": f"https://evil.test/?t={TOKEN}"}),
    "bad-json": dict(status=200, body=f"{{{TOKEN}"),
    "not-object": dict(status=200, json=[TOKEN]),
    "bad-row": dict(status=200, json={"result": [{"id": TOKEN}]}),
    "bad-from": dict(status=200, json={"result": [{"id": 1, "from": [TOKEN], "content": ""}]}),
}


@pytest.mark.parametrize("kind", sorted(FAILURES))
def test_no_failure_message_contains_the_token(client, mocked, kind):
    mocked.get(INBOX, **FAILURES[kind])
    with pytest.raises(ApiError) as info:
        client.inbox("p")
    assert_safe(info.value)
    assert info.value.__cause__ is None  # no chained exception carrying request details


@pytest.mark.parametrize("kind", ["connect", "500", "401", "302", "bad-json"])
def test_no_failure_message_contains_a_custom_header_token(mocked, sleeps, kind):
    c = KijitoClient(BASE, TOKEN, auth_header="X-Key", sleep=sleeps)
    mocked.get(INBOX, **FAILURES[kind])
    with pytest.raises(ApiError) as info:
        c.inbox("p")
    assert_safe(info.value)


def test_oversized_failure_message_is_safe(client, mocked, monkeypatch):
    monkeypatch.setattr(api, "MAX_BODY_BYTES", 10)
    mocked.get(INBOX, body=TOKEN * 100)
    with pytest.raises(ApiError) as info:
        client.inbox("p")
    assert_safe(info.value)


# -- parse_inbox: healthy vs malformed (kijito-api.md §2.1.2) ---------------------------------------

def test_documented_examples_parse():
    page = parse_inbox({"result": [
        {"id": 1180, "from": "river", "content": "ping", "created": "2026-08-01T10:00:00Z", "read": True},
        {"id": 1204, "from": "loom", "content": "status?", "created": "2026-08-01T10:05:12Z", "read": False}],
        "truncated": False, "size_dropped": 0, "size_truncated": False,
        "next_before_id": None, "unread_not_shown": 0})
    assert [(m.id, m.sender, m.content, m.read) for m in page.messages] == [
        (1180, "river", "ping", True), (1204, "loom", "status?", False)]
    assert page.omission == 0 and page.continuation is None
    assert page.contradiction() is None and page.declares_end and not page.withheld
    assert page.unread_not_shown == 0

    page = parse_inbox({"result": [row(1204), row(1210)], "truncated": True, "size_dropped": 0,
                        "size_truncated": False, "next_before_id": 1204, "unread_not_shown": 3})
    assert page.omission == INEXACT and page.withheld and page.continuation == 1204
    assert page.contradiction() is None and not page.declares_end
    assert page.unread_not_shown == 3


def test_empty_result_is_healthy():
    page = parse_inbox({"result": [], "next_before_id": None})
    assert page.messages == () and page.oldest_id is None and page.newest_id is None
    assert page.declares_end


def test_content_with_control_characters_and_unicode_is_kept_verbatim():
    text = "tab\there\nnew\x00nul \u202e\U0001F600"
    page = parse_inbox({"result": [row(1, content=text)], "next_before_id": None})
    assert page.messages[0].content == text


@pytest.mark.parametrize("body", [None, [], [row(1)], "result", 3, True], ids=repr)
def test_non_object_body_is_malformed(body):
    with pytest.raises(ApiError, match="not a JSON object"):
        parse_inbox(body)


@pytest.mark.parametrize("result", [None, {}, "[]", 0, {"id": 1}], ids=repr)
def test_result_not_a_list_is_malformed(result):
    with pytest.raises(ApiError, match="not a list"):
        parse_inbox({"result": result, "next_before_id": None})


def test_missing_result_is_malformed():
    with pytest.raises(ApiError):
        parse_inbox({"truncated": False, "next_before_id": None})


@pytest.mark.parametrize("bad", [None, 1, "row", [1, "a", "b"], True], ids=repr)
def test_row_not_an_object_is_malformed(bad):
    with pytest.raises(ApiError, match="not an object"):
        parse_inbox({"result": [row(1), bad], "next_before_id": None})


@pytest.mark.parametrize("mid", [True, False, "12", 12.0, 12.5, None, [12], {"n": 12}], ids=repr)
def test_id_must_be_a_real_integer(mid):
    with pytest.raises(ApiError, match="`id`"):
        parse_inbox({"result": [row(mid)], "next_before_id": None})


@pytest.mark.parametrize("mid", [-1, 2**63, 10**20, -(2**63), 10**400],
                         ids=["-1", "2**63", "10**20", "-2**63", "10**400"])
def test_an_id_outside_the_contract_range_makes_the_answer_untrustworthy(mid):
    """Issue 23, item 1 (issue 27: Kijito's ids start at 0): the contract accepts ids 0..2**63-1; anything
    else is not believed (not malformed: the engine pins a cursor on it instead of failing the pull)."""
    with pytest.raises(Untrustworthy, match="outside the contract's range") as caught:
        parse_inbox({"result": [row(5), row(mid)], "next_before_id": None})
    assert len(str(caught.value)) < 200  # a 400-digit id is not echoed whole


@pytest.mark.parametrize("mid", [0, 1, 2**63 - 1])
def test_the_ends_of_the_contract_range_are_accepted(mid):
    assert [m.id for m in parse_inbox({"result": [row(mid)], "next_before_id": None}).messages] == [mid]


@pytest.mark.parametrize("where", ["envelope", "row"])
@pytest.mark.parametrize("stated", ["mallory", "Argus", 7, ""], ids=repr)
def test_an_answer_stating_another_persona_is_untrustworthy(where, stated):
    """Issue 23, item 3: where the server states a persona and it is not the one asked for."""
    rows = [row(1), row(2)]
    envelope = {"result": rows, "next_before_id": None}
    (rows[1] if where == "row" else envelope)["persona"] = stated
    with pytest.raises(Untrustworthy, match="not 'argus' as asked"):
        parse_inbox(envelope, persona="argus")


def test_an_answer_stating_the_persona_asked_for_or_none_is_believed():
    rows = [{**row(1), "persona": "argus"}, {**row(2), "persona": None}, row(3)]
    page = parse_inbox({"result": rows, "persona": "argus", "next_before_id": None}, persona="argus")
    assert [m.id for m in page.messages] == [1, 2, 3]


def test_the_client_checks_the_persona_it_asked_for(client, mocked):
    mocked.get(f"{BASE}/api/inbox", json={"result": [{**row(1), "persona": "mallory"}], "persona": "mallory",
                                          "next_before_id": None})
    with pytest.raises(Untrustworthy, match="mallory"):
        client.inbox("argus")


def test_missing_id_is_malformed():
    r = row(1)
    del r["id"]
    with pytest.raises(ApiError):
        parse_inbox({"result": [r], "next_before_id": None})


def test_huge_ids_within_the_range_are_accepted():
    assert parse_inbox({"result": [row(2**62)], "next_before_id": None}).newest_id == 2**62


def test_duplicate_ids_are_malformed():
    with pytest.raises(ApiError, match="appears twice"):
        parse_inbox({"result": [row(5), row(6), row(5, content="other")], "next_before_id": None})


@pytest.mark.parametrize("field", ["from", "content"])
@pytest.mark.parametrize("value", [None, 1, ["x"], {"a": 1}, True], ids=repr)
def test_from_and_content_must_be_strings(field, value):
    with pytest.raises(ApiError, match=f"`{field}`"):
        parse_inbox({"result": [row(1, **{field: value})], "next_before_id": None})


@pytest.mark.parametrize("field", ["from", "content"])
def test_missing_from_or_content_is_malformed(field):
    r = row(1)
    del r[field]
    with pytest.raises(ApiError):
        parse_inbox({"result": [r], "next_before_id": None})


@pytest.mark.parametrize("value", [1, 0, "false", "true", [], {}], ids=repr)
def test_read_must_be_a_bool(value):
    with pytest.raises(ApiError, match="`read`"):
        parse_inbox({"result": [row(1, read=value)], "next_before_id": None})


def test_absent_read_counts_as_unread():
    r = row(1)
    del r["read"]
    assert parse_inbox({"result": [r], "next_before_id": None}).messages[0].read is False


def test_rows_are_sorted_by_id_whatever_the_server_order():
    ids = [1210, 3, 1204, 999, 40]
    page = parse_inbox({"result": [row(i, created=f"2026-01-0{n + 1}") for n, i in enumerate(ids)],
                        "next_before_id": None})
    assert [m.id for m in page.messages] == sorted(ids)
    assert page.oldest_id == 3 and page.newest_id == 1210


def test_rows_are_ordered_by_id_not_created():
    rows = [row(10, created="2026-08-01T10:00:05Z"), row(9, created="2026-08-01T10:00:09Z")]
    assert [m.id for m in parse_inbox({"result": rows, "next_before_id": None}).messages] == [9, 10]


def test_sender_and_urgent_are_carried():
    page = parse_inbox({"result": [row(1, sender="Loom", urgent=True), row(2, urgent="yes")],
                        "next_before_id": None})
    assert page.messages[0].sender == "Loom" and page.messages[0].urgent is True
    assert page.messages[1].urgent is None


# -- omission ---------------------------------------------------------------------------------------

def omission(**declared):
    return parse_inbox({"result": [row(1)], **declared}).omission


def test_nothing_declared_is_no_omission():
    assert omission() == 0


@pytest.mark.parametrize("value", [True, 1, 0, "false", "true", None, [], {}], ids=repr)
def test_truncated_true_or_any_non_bool_is_an_inexact_omission(value):
    assert omission(truncated=value) == INEXACT


def test_truncated_false_is_no_omission():
    assert omission(truncated=False) == 0


@pytest.mark.parametrize("n", [0, 1, 3, 250])
def test_size_dropped_int_is_an_exact_count(n):
    assert omission(truncated=False, size_dropped=n) == n
    # size_truncated is ignored when size_dropped is an int: a clipped body is not an omission
    assert omission(truncated=False, size_dropped=n, size_truncated=True) == n
    assert omission(truncated=False, size_dropped=n, size_truncated="weird") == n


def test_truncated_plus_size_dropped_is_still_inexact():
    assert omission(truncated=True, size_dropped=4) == INEXACT


def test_negative_size_dropped_is_no_count():
    assert omission(truncated=False, size_dropped=-1) == INEXACT
    assert omission(truncated=False, size_dropped=-1, size_truncated=False) == INEXACT


@pytest.mark.parametrize("dropped", [True, False, "3", "0", 2.0, [1]], ids=repr)
@pytest.mark.parametrize("clip", [True, "yes", 1, []], ids=repr)
def test_non_int_size_dropped_with_size_truncated_set_is_inexact(dropped, clip):
    assert omission(truncated=False, size_dropped=dropped, size_truncated=clip) == INEXACT


@pytest.mark.parametrize("clip", [True, "yes", 1, 0, {}], ids=repr)
def test_absent_size_dropped_with_size_truncated_true_or_non_bool_is_inexact(clip):
    assert omission(truncated=False, size_truncated=clip) == INEXACT


def test_absent_size_dropped_with_size_truncated_false_is_no_omission():
    assert omission(truncated=False, size_truncated=False) == 0


@pytest.mark.parametrize("dropped", [True, False, "3", "0", 2.0], ids=repr)
def test_non_int_size_dropped_without_size_truncated_fails_closed(dropped):
    # Stricter than the reference (which reads it as no count): an unusable declaration is never
    # read as "nothing withheld", so the page can never prove coverage on its strength.
    assert omission(truncated=False, size_dropped=dropped) == INEXACT
    assert omission(truncated=False, size_dropped=dropped, size_truncated=False) == INEXACT


def test_size_truncated_alone_is_reported_and_is_not_an_omission():
    page = parse_inbox({"result": [row(1300)], "truncated": False, "size_dropped": 0,
                        "size_truncated": True, "next_before_id": None, "unread_not_shown": 0})
    assert page.size_truncated is True
    assert page.omission == 0 and page.declares_end


def test_size_truncated_non_bool_is_not_reported_as_a_clip():
    assert parse_inbox({"result": [], "size_truncated": "yes", "next_before_id": None}).size_truncated is False


# -- continuation ------------------------------------------------------------------------------------

def continuation(**declared):
    return parse_inbox({"result": [row(7)], **declared}).continuation


def test_null_continuation_is_an_affirmed_end():
    assert continuation(next_before_id=None) is None


@pytest.mark.parametrize("n", [0, 7, 10**12])
def test_int_continuation(n):
    assert continuation(next_before_id=n) == n


def test_absent_continuation_is_no_answer():
    assert continuation() is NO_ANSWER


@pytest.mark.parametrize("value", [-1, True, False, "7", 7.0, 7.5, [7], {}], ids=repr)
def test_negative_bool_string_float_continuation_is_no_answer(value):
    assert continuation(next_before_id=value) is NO_ANSWER


@pytest.mark.parametrize("value", [NO_ANSWER])
def test_no_answer_never_proves_completeness(value):
    page = parse_inbox({"result": [row(7)], "truncated": False, "size_dropped": 0})
    assert page.continuation is value
    assert page.contradiction() is not None
    assert not page.declares_end


def test_no_answer_on_an_empty_page_never_proves_completeness():
    page = parse_inbox({"result": []})
    assert page.contradiction() is not None and not page.declares_end


# -- contradictions -----------------------------------------------------------------------------------

def test_withheld_with_null_continuation_is_a_contradiction():
    for declared in ({"truncated": True}, {"size_dropped": 2}, {"size_truncated": True, "size_dropped": None}):
        page = parse_inbox({"result": [row(5), row(6)], "next_before_id": None, **declared})
        assert page.withheld
        assert "null" in page.contradiction()
        assert not page.declares_end


def test_nothing_withheld_with_a_continuation_is_a_contradiction():
    page = parse_inbox({"result": [row(5), row(6)], "truncated": False, "size_dropped": 0, "next_before_id": 5})
    assert not page.withheld
    assert page.contradiction() is not None
    assert not page.declares_end


def test_continuation_must_equal_the_oldest_id():
    ok = parse_inbox({"result": [row(6), row(5)], "truncated": True, "next_before_id": 5})
    assert ok.contradiction() is None
    for wrong in (4, 6, 0, 100):
        page = parse_inbox({"result": [row(6), row(5)], "truncated": True, "next_before_id": wrong})
        assert "oldest" in page.contradiction(), wrong
        assert not page.declares_end


def test_withheld_on_an_empty_page_with_a_continuation_is_a_contradiction():
    page = parse_inbox({"result": [], "truncated": True, "next_before_id": 5})
    assert page.contradiction() is not None


@pytest.mark.parametrize("returned", [[50], [49, 50], [51], [10, 60]])
def test_backward_page_returning_an_id_at_or_above_before_id_is_a_contradiction(returned):
    page = parse_inbox({"result": [row(i) for i in returned], "next_before_id": None}, before_id=50)
    assert page.before_id == 50
    assert "50" in page.contradiction()
    assert not page.declares_end


def test_backward_page_below_before_id_is_consistent():
    page = parse_inbox({"result": [row(48), row(49)], "truncated": True, "next_before_id": 48}, before_id=50)
    assert page.contradiction() is None
    end = parse_inbox({"result": [row(48), row(49)], "truncated": False, "size_dropped": 0,
                       "next_before_id": None}, before_id=50)
    assert end.contradiction() is None and end.declares_end


def test_same_ids_on_the_newest_page_are_not_a_before_id_contradiction():
    page = parse_inbox({"result": [row(50)], "next_before_id": None})
    assert page.contradiction() is None


def test_exact_size_dropped_with_matching_continuation_is_consistent():
    page = parse_inbox({"result": [row(9), row(12)], "truncated": False, "size_dropped": 3, "next_before_id": 9})
    assert page.omission == 3 and page.withheld and page.contradiction() is None and not page.declares_end


# -- unread_not_shown ---------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [0, 1, 4, 10**6])
def test_unread_not_shown_statement(n):
    assert parse_inbox({"result": [], "unread_not_shown": n, "next_before_id": None}).unread_not_shown == n


@pytest.mark.parametrize("value", ["absent", None, "3", 3.0, 2.5, -1, True, False, [3]], ids=repr)
def test_unread_not_shown_no_statement(value):
    body = {"result": [], "next_before_id": None}
    if value != "absent":
        body["unread_not_shown"] = value
    assert parse_inbox(body).unread_not_shown is None


# -- the client surfaces parse failures as ApiError ----------------------------------------------------

@pytest.mark.parametrize("body", [
    [], {"result": {}}, {"result": [1]}, {"result": [row(True)]}, {"result": [row(1), row(1)]},
    {"result": [row(1, sender=3)]}, {"result": [row(1, read="no")]},
], ids=range(7))
def test_malformed_inbox_over_http_is_an_error_and_not_retried(client, mocked, sleeps, body):
    mocked.get(INBOX, json=body)
    with pytest.raises(ApiError) as info:
        client.inbox("p")
    assert len(mocked.calls) == 1 and sleeps == []
    assert_safe(info.value)


def test_inbox_over_http_records_the_before_id_for_contradiction_checks(client, mocked):
    mocked.get(INBOX, json={"result": [row(60)], "next_before_id": None})
    page = client.inbox("p", before_id=50)
    assert page.contradiction() is not None


# -- notify, personas, send parsers --------------------------------------------------------------------

def test_parse_notify_rows_and_cursor():
    result = parse_notify({"result": [
        {"persona": "testbot", "unread": 2, "unread_urgent": 1},
        {"persona": "Claude-chat", "unread": 1},
        {"persona": "", "unread": 4},
        {"unread": 4},
        {"persona": 5, "unread": 4},
        "junk",
        {"persona": "odd", "unread": "3", "unread_urgent": -1},
        {"persona": "neg", "unread": -2, "unread_urgent": True},
    ], "cursor": "c_01J9ZK"})
    assert [(c.persona, c.unread, c.unread_urgent) for c in result.counts] == [
        ("testbot", 2, 1), ("Claude-chat", 1, None), ("odd", 0, None), ("neg", 0, None)]
    assert result.cursor == "c_01J9ZK"


@pytest.mark.parametrize("cursor", ["absent", "", None, 5, ["c"]], ids=repr)
def test_parse_notify_unusable_cursor_means_no_long_poll(cursor):
    body = {"result": []}
    if cursor != "absent":
        body["cursor"] = cursor
    assert parse_notify(body).cursor is None


@pytest.mark.parametrize("body", [None, [], {"result": None}, {"result": {}}, {"cursor": "c"}], ids=repr)
def test_parse_notify_malformed(body):
    with pytest.raises(ApiError):
        parse_notify(body)


def test_parse_personas():
    out = parse_personas({"result": [
        {"persona": "testbot", "memory_count": 14, "projects": [{"count": 9}]},
        {"persona": "all", "memory_count": 0},
        {"persona": "nocount"},
        {"persona": "neg", "memory_count": -3},
        {"persona": "flag", "memory_count": True},
        {"persona": ""}, {"memory_count": 2}, "junk",
    ]})
    assert [(p.persona, p.memory_count) for p in out] == [
        ("testbot", 14), ("all", 0), ("nocount", None), ("neg", None), ("flag", None)]


@pytest.mark.parametrize("body", [None, [], {"result": None}, {"result": []}, {"result": [{"persona": ""}]}],
                         ids=repr)
def test_parse_personas_malformed_or_empty_is_an_error(body):
    with pytest.raises(ApiError):
        parse_personas(body)


def test_parse_send():
    result = parse_send({"result": {"id": 1205, "to": "loom"}})
    assert (result.id, result.to) == (1205, "loom")


@pytest.mark.parametrize("body", [
    None, [], {}, {"result": None}, {"result": []}, {"result": {"id": "1", "to": "x"}},
    {"result": {"id": True, "to": "x"}}, {"result": {"id": 1}}, {"result": {"id": 1, "to": 2}},
], ids=repr)
def test_parse_send_malformed(body):
    with pytest.raises(ApiError):
        parse_send(body)


def test_client_personas_and_notify_over_http(client, mocked):
    mocked.get(PERSONAS, json={"result": [{"persona": "river", "memory_count": 3}]})
    mocked.get(NOTIFY, json={"result": [{"persona": "river", "unread": 1}]})
    assert [p.persona for p in client.personas()] == ["river"]
    assert client.notify_pending().counts[0].unread == 1


# -- other endpoints fail safely too ---------------------------------------------------------------------

ENDPOINT_CALLS = {
    "notify": (responses.GET, NOTIFY, lambda c: c.notify_pending()),
    "notify-long-poll": (responses.GET, NOTIFY, lambda c: c.notify_pending(wait=20, cursor=TOKEN[:3])),
    "personas": (responses.GET, PERSONAS, lambda c: c.personas()),
    "send": (responses.POST, SEND, lambda c: c.send("p", f"body mentioning {TOKEN}")),
}


@pytest.mark.parametrize("kind", ["connect", "timeout", "401", "500", "302", "bad-json", "not-object"])
@pytest.mark.parametrize("endpoint", sorted(ENDPOINT_CALLS))
def test_every_endpoint_fails_with_a_safe_one_line_message(client, mocked, endpoint, kind):
    method, url, call = ENDPOINT_CALLS[endpoint]
    mocked.add(method, url, **FAILURES[kind])
    with pytest.raises(ApiError) as info:
        call(client)
    assert_safe(info.value)


def test_timeouts_passed_to_the_transport(client, mocked):
    mocked.get(INBOX, json=envelope([]))
    mocked.get(NOTIFY, json={"result": []})
    client.inbox("p")
    client.notify_pending(wait=30)
    # (connect, read, total): what is left of the call's 15 s deadline bounds the whole exchange
    connect, read, total = mocked.calls[0].request.req_kwargs["timeout"]
    assert (connect, read) == (5.0, 5.0) and 14.0 < total <= 15.0
    # a long poll is held by the server for `wait` seconds: the read timeout is wait + 10, and so is its deadline
    connect, read, total = mocked.calls[1].request.req_kwargs["timeout"]
    assert read == 40.0 and 0 < connect <= 10.0 and 39.0 < total <= 40.0


# -- a request sent again (a watch's notify hold and newest-page read on every wake) ------------------

def test_a_request_sent_again_is_byte_for_byte_the_same(client, mocked):
    """The preparation is kept by request line: the second, third, ... request is the same as the first
    (URL, method, headers, no body), and a different line is prepared on its own."""
    mocked.get(INBOX, json=envelope([1]))
    for _ in range(3):
        client.inbox("river")
    client.inbox("loom")
    first, *again = [c.request for c in mocked.calls]
    for request in again[:2]:
        assert (request.method, request.url, request.body) == (first.method, first.url, first.body)
        assert dict(request.headers) == dict(first.headers)
    assert query(mocked.calls[3]) == [("persona", "loom"), ("mark_read", "false")]
    assert mocked.calls[3].request.headers["Authorization"] == f"Bearer {TOKEN}"


def test_a_kept_request_is_sent_as_a_copy(client, mocked):
    """A hook or adapter that changes the request it was given cannot change what is sent next time."""
    mocked.get(INBOX, json=envelope([1]))
    client.inbox("river")
    mocked.calls[0].request.headers["X-Changed"] = "yes"
    client.inbox("river")
    assert "X-Changed" not in mocked.calls[1].request.headers


def test_cookies_the_session_holds_are_still_sent(client, mocked):
    """Cookies are part of requests' preparation, so a session holding one prepares each request afresh."""
    mocked.get(INBOX, json=envelope([1]))
    client.inbox("river")
    client._session.cookies.set("edge", "abc", domain=urlsplit(BASE).hostname, path="/")
    client.inbox("river")
    assert "Cookie" not in mocked.calls[0].request.headers
    assert mocked.calls[1].request.headers["Cookie"] == "edge=abc"


def test_a_single_attempt_call_fails_once_without_a_wait(mocked, sleeps):
    """A notify hold is one attempt: a transient failure is reported at once, not retried."""
    c = KijitoClient(BASE, TOKEN, attempts=3, sleep=sleeps)
    mocked.get(BASE + "/api/notify/pending", status=503)
    with pytest.raises(ApiError) as info:
        c.notify_pending(wait=50)
    assert info.value.transient and info.value.status == 503
    assert len(mocked.calls) == 1 and sleeps == []
