"""The doctor's checks of a Redis source (`--source`, $KIJITO_PULL_SOURCE, config `source`; docs/fleets.md).

Only with a Redis source configured; then no request goes to Kijito (consumers read the stream and send
Kijito nothing, so the doctor checks what they use) and these run instead, each with a fix:

    source              which source, from where (a URL that is not redis:// or rediss://: FAIL)
    source.redis        PING: reachable, the password accepted (unreachable or AUTH refused: FAIL)
    source.stream       the persona's stream `kijito:{P}:mail` holds mail (none yet: WARN, is the relay
                        running?) and the consumer's group exists (not yet: OK, it is created at 0 on its
                        first read and then gets all the stream holds)
    source.persistence  AOF on with appendfsync always or everysec, the settings docs/fleets.md says make
                        the guarantee hold (else WARN with the CONFIG SET fix; CONFIG refused: WARN)
    source.group        the group's lag, pending entries and parked mail (parked: WARN with the retry)

Read-only: no group is created, nothing is read through a group, nothing acknowledged.
"""

from __future__ import annotations

import time
from typing import Any

from kijito_pull.core import config
from kijito_pull.core.errors import MissingExtra
from kijito_pull.core.findings import FAIL, OK, WARN, Context, Finding
from kijito_pull.core.models import ApiError, first_line
from kijito_pull.doctor.config_checks import resolved

SOURCE_CHECK_IDS = ("source", "source.redis", "source.stream", "source.persistence", "source.group")


def configured(ctx: Context) -> bool:
    """A Redis source is asked for (by a flag, the environment or the config file), usable or not."""
    return resolved(ctx).source_asked[1] is not None


def check_source(ctx: Context) -> list[Finding]:
    """Every source.* finding, in order (SOURCE_CHECK_IDS); [] without a Redis source."""
    if not configured(ctx):
        return []
    from kijito_pull.sources import redis_streams

    settings = resolved(ctx)
    origin = settings.source_asked[1]
    try:
        url = settings.source
        group = settings.consumer
    except config.ConfigError as exc:
        ctx.source = None
        return [Finding("source", FAIL, f"{exc} (from {origin})",
                        "use redis://HOST:PORT/DB (or rediss://), with no password in a command line: "
                        "$KIJITO_PULL_REDIS_PASSWORD, --redis-password-file or redis_password_file"),
                *_not_checked("the source finding")]
    assert url is not None
    where = redis_streams.safe_url(url)
    ctx.source = where
    found = [Finding("source", OK, f"Redis stream source {where} (from {origin}), consumer group {group}; "
                                   f"Kijito is not asked (consumers read the stream)")]
    client = None
    try:
        client = redis_streams.connect(settings.redis_url(url), timeout=ctx.timeout)
        redis = _ping(client, where)
    except config.ConfigError as exc:
        redis = Finding("source.redis", FAIL, f"{where}: the Redis password cannot be read: {exc}",
                        "point --redis-password-file (or redis_password_file) at a mode 0600 file holding only "
                        "the password, or set $KIJITO_PULL_REDIS_PASSWORD")
    except MissingExtra as exc:  # the redis client is not installed
        redis = Finding("source.redis", FAIL, f"{where}: {exc}", "pip install 'kijito-pull[redis]'")
    found.append(redis)
    if redis.verdict == FAIL:
        if client is not None:
            client.close()
        return found + _not_checked("the source.redis finding")
    ctx.source_reachable = True
    try:
        source = redis_streams.RedisSource(client, None, persona=ctx.persona or "", consumer=group, where=where,
                                           claim_after=settings.claim_after)
        if ctx.persona is None:
            nobody = Finding("source.stream", WARN, "no persona to check (see the persona finding)",
                             "pass --persona NAME")
            found += [nobody, _persistence(client, where), Finding("source.group", WARN, nobody.detail, nobody.fix)]
        else:
            found += [_stream(source, client, ctx.persona, group), _persistence(client, where),
                      _group(source, ctx.persona, group, where)]
    finally:
        client.close()
    return found


def _not_checked(why: str) -> list[Finding]:
    return [Finding(check, WARN, "not checked: Redis was not reached", f"fix {why} first")
            for check in SOURCE_CHECK_IDS[2:]]


def _ping(client: Any, where: str) -> Finding:
    import redis

    started = time.monotonic()
    try:
        client.ping()
        version = client.info("server").get("redis_version", "?")
    except redis.AuthenticationError as exc:
        return Finding("source.redis", FAIL, f"{where} refused the password ({first_line(exc)})",
                       "give the right password by $KIJITO_PULL_REDIS_PASSWORD, --redis-password-file FILE or "
                       "redis_password_file (never in a URL on a command line); for an ACL user, put it in the "
                       "URL as redis://USER@HOST:PORT/DB")
    except redis.ResponseError as exc:
        if "NOAUTH" in str(exc) or "WRONGPASS" in str(exc):
            return Finding("source.redis", FAIL, f"{where} requires a password ({first_line(exc)})",
                           "give it by $KIJITO_PULL_REDIS_PASSWORD, --redis-password-file FILE or "
                           "redis_password_file")
        return Finding("source.redis", FAIL, f"{where}: {first_line(exc)}", "check that this is a Redis server")
    except redis.RedisError as exc:
        return Finding("source.redis", FAIL, f"{where} did not answer PING ({first_line(exc)}): consumers exit 1 "
                                             f"and nothing is acknowledged until it does",
                       "start Redis or fix the address (is it bound to this host's network? a firewall?); "
                       "redis-cli -h HOST -p PORT ping should say PONG")
    ms = (time.monotonic() - started) * 1000
    return Finding("source.redis", OK, f"{where} answered PING in {ms:.0f} ms (Redis {version})")


def _stream(source: Any, client: Any, persona: str, group: str) -> Finding:
    import redis

    try:
        if not client.exists(source.stream):
            return Finding("source.stream", WARN, f"{source.stream} does not exist: nothing was relayed for "
                                                  f"{persona} yet",
                           f"run the relay for it: kijito-pull relay --redis {source.where} --persona {persona} "
                           f"(or kijito-pull install daemon --relay --redis {source.where} --persona {persona})")
        length = client.xlen(source.stream)
        groups = [row["group"] for row in source.lag()]
    except (redis.RedisError, ApiError) as exc:  # lag() says a Redis failure as an ApiError
        return Finding("source.stream", WARN, f"{source.stream} could not be read ({first_line(exc)})",
                       "check the Redis user's ACL: it needs the stream commands on kijito:*")
    held = f"{source.stream} holds {length} entr{'y' if length == 1 else 'ies'}"
    if group not in groups:
        return Finding("source.stream", OK, f"{held}; group {group} does not exist yet: the first read creates "
                                            f"it at the start of the stream, so it gets all of them"
                       + (f" (groups now: {', '.join(groups)})" if groups else ""))
    return Finding("source.stream", OK, f"{held}; group {group} exists"
                   + (f" (and {', '.join(g for g in groups if g != group)})" if len(groups) > 1 else ""))


def _persistence(client: Any, where: str) -> Finding:
    import redis

    try:
        appendonly = client.config_get("appendonly").get("appendonly", "")
        appendfsync = client.config_get("appendfsync").get("appendfsync", "")
    except redis.RedisError as exc:
        return Finding("source.persistence", WARN, f"{where}: CONFIG GET was refused ({first_line(exc)}), so "
                                                   f"persistence cannot be told from here",
                       "check the server's redis.conf (or the managed service's settings) for appendonly yes and "
                       "appendfsync always or everysec (docs/fleets.md, Settings that make the guarantee hold)")
    fix = ("redis-cli CONFIG SET appendonly yes; redis-cli CONFIG SET appendfsync always (or everysec); "
           "redis-cli CONFIG REWRITE (so a restart keeps it)")
    if appendonly != "yes":
        return Finding("source.persistence", WARN, f"{where}: AOF is off (appendonly {appendonly or '?'}): a Redis "
                                                   "crash loses what was appended and acknowledged since the last "
                                                   "snapshot (relays that keep running append it again; consumers "
                                                   "get duplicates)", fix)
    if appendfsync == "always":
        return Finding("source.persistence", OK, f"{where}: AOF on with appendfsync always: a crash loses no "
                                                 "append and no acknowledgement")
    if appendfsync == "everysec":
        return Finding("source.persistence", OK, f"{where}: AOF on with appendfsync everysec: a crash can lose "
                                                 "about the last second (a running relay appends it again; lost "
                                                 "acknowledgements come again as duplicates)")
    return Finding("source.persistence", WARN, f"{where}: AOF on but appendfsync {appendfsync or '?'}: the "
                                               "operating system decides when it is written, so a crash can lose "
                                               "more than a second", fix)


def _group(source: Any, persona: str, group: str, where: str) -> Finding:
    from kijito_pull.sources import redis_streams

    try:
        row = next((r for r in source.lag() if r["group"] == group), None)
        parked = [f for f in source.parked() if f.get("group") == group]
    except ApiError as exc:
        return Finding("source.group", WARN, f"group {group} could not be read ({exc})",
                       "check the Redis user's ACL: it needs XINFO, XPENDING and XRANGE on kijito:*")
    if row is None:
        return Finding("source.group", OK, f"group {group} does not exist yet: no lag, nothing pending or parked")
    holders = ", ".join(f"{'given back, for the next pull' if name == redis_streams.FREE else name}: {n}"
                        for name, n in sorted(row["holders"].items()))
    lag = "?" if row["lag"] is None else row["lag"]
    detail = (f"group {group}: lag {lag} (entries not yet read), {row['pending']} pending"
              + (f" ({holders})" if holders else "") + f", {len(parked)} parked")
    if parked:
        ids = ", ".join(f["kid"] for f in parked[:5]) + (" ..." if len(parked) > 5 else "")
        return Finding("source.group", WARN, f"{detail}: message {ids} was refused too often and is kept in "
                                             f"{redis_streams.dead_key(persona)}",
                       f"kijito-pull parked --source {where} --persona {persona} --consumer {group} lists them; "
                       f"add --retry ID to hand one over again to this group")
    return Finding("source.group", OK, detail)
