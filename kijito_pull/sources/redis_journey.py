"""What Redis knows of one Kijito message of a fleet (`--source redis://`): core/journey.py's steps, from the
persona's stream and its consumer groups (sources/redis_streams.py's keys).

For each group (or only `--consumer`'s): not yet relayed into the stream; waiting (the group has not
read that far); handed over (a pending entry: the member, or the agent session whose key is the member's
name, since when by its idle time, how many deliveries); parked (the dead-letter stream); acknowledged
(XACK: the group's receipt, with its time from the acks stream when that still holds it). Every Redis
failure raises core.models.ApiError. Read-only.
"""

from __future__ import annotations

import time
from typing import Any

from kijito_pull.core.journey import REDIS, Step, iso
from kijito_pull.sources.redis_streams import (
    FREE,
    acks_key,
    dead_key,
    failures,
    holders_key,
    ids_key,
    stream_key,
)

_SCAN = 10_000


def _sid(value: str) -> tuple[int, int]:
    ms, _, seq = value.partition("-")
    return int(ms), int(seq or 0)


def steps(client: Any, persona: str, kid: int, group: str | None = None, where: str = "redis") -> list[Step]:
    """One step per consumer group of `persona`'s stream (only `group`, when given) about Kijito message `kid`."""
    stream = stream_key(persona)
    with failures(where):
        sid = client.hget(ids_key(persona), str(kid))
        if not sid:
            return [Step(REDIS, "not_relayed", f"message {kid} is not in {stream} at {where} (not relayed yet)")]
        groups = [g for g in client.xinfo_groups(stream) if group is None or g["name"] == group]
        if not groups:
            named = f"group {group}" if group else "consumer group"
            return [Step(REDIS, "waiting", f"in {stream} as {sid}, but no {named} reads it yet")]
        return [_group_step(client, persona, kid, sid, g) for g in groups]


def _group_step(client: Any, persona: str, kid: int, sid: str, group: dict[str, Any]) -> Step:
    name = group["name"]
    rows = client.xpending_range(stream_key(persona), name, sid, sid, 1)
    if rows:
        row = rows[0]
        member, idle, count = row["consumer"], int(row["time_since_delivered"]), int(row["times_delivered"])
        since = iso(time.time() - idle / 1000)
        if member == FREE:
            return Step(REDIS, "given_back", f"group {name}: handed over {count} time(s), never acknowledged, "
                                             f"unseen again", at=since, consumer=name, extra={"handovers": count})
        raw = client.hget(holders_key(persona, name), sid)
        return Step(REDIS, "handed_over", f"group {name}: handed over to member {member} {count} time(s), not "
                                          f"acknowledged" + ("" if raw else " (a script member, or its record "
                                                                            "expired)"),
                    at=since, consumer=name, holder=member, extra={"handovers": count})
    parked = [f for _d, f in client.xrange(dead_key(persona), "-", "+", count=_SCAN)
              if f.get("kid") == str(kid) and f.get("group") == name]
    if parked:
        f = parked[-1]
        return Step(REDIS, "parked", f"group {name}: parked after {f.get('attempts')} attempts ({f.get('reason', '')})"
                                     f"; `kijito-pull parked --retry {kid}` hands it over again",
                    at=f.get("since"), consumer=name)
    if _sid(str(group.get("last-delivered-id") or "0-0")) >= _sid(sid):
        ack = next(((aid, f) for aid, f in client.xrevrange(acks_key(persona), "+", "-", count=_SCAN)
                    if f.get("sid") == sid and f.get("group") == name), None)
        at = iso(_sid(ack[0])[0] / 1000) if ack else None
        holder = (ack[1].get("holder") or None) if ack else None
        who = f" ({holder}'s record confirmed it)" if holder else ""
        return Step(REDIS, "acknowledged", f"group {name} acknowledged it{who}", at=at, consumer=name, holder=holder)
    return Step(REDIS, "waiting", f"group {name} has not read that far yet", consumer=name)

