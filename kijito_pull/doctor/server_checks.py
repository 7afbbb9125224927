"""The doctor's server checks: `reachability` (exactly one peek request, `GET /api/inbox` with
`mark_read=false` and `limit=1`: address, TLS and token) and `persona` (the account's directory, read
only once the peek was accepted). The client is built by the composition root with one attempt: the
doctor reports what a single request meets, it does not retry it away."""

from __future__ import annotations

import time
from typing import Any

from kijito_pull.core import config
from kijito_pull.core.findings import FAIL, OK, WARN, Context, Finding
from kijito_pull.doctor.config_checks import resolved


def _client(ctx: Context) -> Any:
    assert ctx.api_base is not None and ctx.token is not None
    from kijito_pull.context import Context as Wiring

    factory = None
    if ctx.client_factory is not None:  # tests: (api_base, token, auth_header, timeout)
        fake = ctx.client_factory

        def factory(api_base: str, token: str, *, auth_header: str | None, timeout: float, **_: Any) -> Any:
            return fake(api_base, token, auth_header, timeout)
    # One attempt: the doctor reports what a single request meets, it does not retry it away.
    return Wiring(resolved(ctx), attempts=1, deadline=ctx.timeout, client_factory=factory).new_client()


def check_reachability(ctx: Context) -> Finding:
    """Exactly one peek request (`GET /api/inbox?persona=P&mark_read=false&limit=1`): address, TLS and token.
    `ctx.reachable` is True once the server accepted the token, False when the peek failed, None when it
    was not sent; a rejected token (401) is the token's problem (`ctx.token_refused`: run_checks turns the
    token finding into a FAIL), not the network's."""
    missing = [what for what, bad in (("token", ctx.token is None), ("valid API base", ctx.api_base is None),
                                      ("persona", ctx.persona is None)) if bad]
    if missing:
        return Finding("reachability", WARN, f"not checked: no {' and no '.join(missing)} (see the findings above)",
                       "fix the token, api_base or persona finding first")
    from kijito_pull.core.models import ApiError

    client = _client(ctx)
    started = time.monotonic()
    try:
        page = client.inbox(ctx.persona, limit=1)
    except ApiError as exc:
        ctx.reachable = False
        return _unreachable(ctx, exc)
    finally:
        client.close()
    ctx.reachable = True
    ms = (time.monotonic() - started) * 1000
    newest = f"newest message {page.newest_id}" if page.newest_id is not None else "the inbox is empty"
    return Finding("reachability", OK, f"{ctx.api_base} accepted the token and answered a peek of "
                                       f"{ctx.persona}'s inbox in {ms:.0f} ms ({newest}; nothing was marked read)")


def refused_token(ctx: Context, token: Finding) -> Finding:
    """The token finding once the server rejected the token (401): a FAIL, with what the token check found."""
    return Finding("token", FAIL, f"{token.detail}; but {ctx.api_base} rejected it (401)",
                   "check the token (is it for this API base? expired or revoked?); get a new one and put it "
                   f"in ${config.TOKEN_ENV} or the token file")


def _unreachable(ctx: Context, exc: Any) -> Finding:
    text = str(exc)
    status = getattr(exc, "status", None)
    where = ctx.api_base
    if status == 401:
        ctx.token_refused = True
        return Finding("reachability", OK, f"{where} answered, but rejected the token (401): see the token finding")
    if status == 403:
        return Finding("reachability", FAIL, f"{where} refused the request (403): the API's firewall rejects "
                                             "some clients, or this token may not read this persona",
                       "check that nothing rewrites the request (a proxy, a wrapper changing the User-Agent; "
                       "kijito-pull sends its own), and that the token belongs to the account of persona "
                       f"{ctx.persona}")
    if status == 404:
        return Finding("reachability", FAIL, f"{where}/api/inbox does not exist (404): not a Kijito API, or the "
                                             "inbox is disabled on this server",
                       f"check the API base (the default is {config.DEFAULT_API_BASE})")
    if status is not None and 300 <= status < 400:
        return Finding("reachability", FAIL, f"{text}",
                       "use the final URL as the API base (kijito-pull never follows redirects, so the token "
                       "cannot be carried elsewhere)")
    if status is not None:
        return Finding("reachability", FAIL, f"{where}: {text}",
                       "the server is failing; retry later (nothing is lost: mail is delivered once it answers)")
    if "SSL" in text or "certificate" in text.lower():
        return Finding("reachability", FAIL, f"{where}: TLS failed ({text})",
                       "check the system clock and the certificate store; kijito-pull verifies certificates "
                       "and ignores proxy and CA-bundle environment variables")
    if "timed out" in text:
        return Finding("reachability", FAIL, f"{where}: {text}",
                       "check the network, or raise --timeout; a firewall may be dropping the connection")
    if "connection failed" in text or "cut off" in text:
        return Finding("reachability", FAIL, f"{where}: {text}",
                       "check the network and the API base (is the server running? for the sandbox, is "
                       "`kijito-pull sandbox` still up and is KIJITO_BASE its URL?)")
    return Finding("reachability", FAIL, f"{where}: {text}",
                   "the answer cannot be trusted; check that the API base is a Kijito API")


def check_persona(ctx: Context) -> Finding:
    """The persona is in the account's directory (`GET /api/personas`); inbox names are case-sensitive."""
    if ctx.persona is None:
        if ctx.persona_problem and not ctx.persona_problem.startswith("no persona"):
            return Finding("persona", FAIL, ctx.persona_problem,
                           "use 1-128 letters, digits and . _ @ + -, starting with a letter or digit")
        return Finding("persona", WARN, "no persona to check (none given, no opted-in project, no $KIJITO_PERSONA)",
                       f"pass --persona NAME, run the doctor in an opted-in project, or set ${config.PERSONA_ENV}")
    if ctx.token_refused:
        return Finding("persona", WARN, f"{ctx.persona} (from {ctx.persona_source}); not looked up: the server "
                                        "rejected the token", "fix the token finding")
    if not ctx.reachable:
        return Finding("persona", WARN, f"{ctx.persona} (from {ctx.persona_source}); not looked up: the server "
                                        "was not reachable", "fix the reachability finding")
    from kijito_pull.core import directory
    from kijito_pull.core.models import ApiError, EmptyDirectory

    client = _client(ctx)
    try:
        names = [p.persona for p in client.personas()]
    except EmptyDirectory:
        # Readable, and nobody is in it: a new account or sandbox. Nothing to fix, nothing to compare with.
        return Finding("persona", OK, f"{ctx.persona} (from {ctx.persona_source}); the account's persona "
                                      f"directory is empty (a new account: no persona has been sent mail yet), so "
                                      f"the name cannot be checked; it appears there once someone sends it mail")
    except ApiError as exc:
        return Finding("persona", WARN, f"{ctx.persona} (from {ctx.persona_source}); the persona directory could "
                                        f"not be read ({exc})",
                       "retry later; the inbox itself answered, so mail can still be pulled")
    finally:
        client.close()

    found = directory.look_up(ctx.persona, names)
    if found.listed:
        return Finding("persona", OK, f"{ctx.persona} (from {ctx.persona_source}) is in the account's directory")
    if found.variants:
        return Finding("persona", FAIL, f"{ctx.persona} (from {ctx.persona_source}) {found.variant_clause()}",
                       f"use the directory's spelling: 'inbox persona: {found.variants[0]}' or --persona "
                       f"{found.variants[0]}")
    return Finding("persona", WARN, f"{ctx.persona} (from {ctx.persona_source}) {found.unlisted_clause()}",
                   "check the spelling against the directory; it appears there once someone sends it mail")
