"""The operator's view of a long-running command (`relay`, `watch`): Prometheus metrics, `/healthz`, and
systemd's STATUS and watchdog (core/sdnotify.py), fed by one `Metrics` object (docs/fleets.md).

The command reports what happened: `pulled(persona, report)` after each pass (messages delivered,
parked and confirmed, and the hand-overs still held unconfirmed when it closed), `relayed(persona)` for
each message a relay appended, `succeeded()` after each good read of its source, `failed(kind)` after
each failed one, `groups(persona, rows)` with each consumer group's lag
and pending count. `serve(host, port)` then answers on one port:

    /metrics   the Prometheus text format (prometheus_client, the optional extra kijito-pull[metrics]):
               kijito_pull_messages_relayed_total{persona}, kijito_pull_messages_delivered_total{persona},
               kijito_pull_messages_parked_total{persona}, kijito_pull_messages_confirmed_total{persona},
               kijito_pull_handovers_held{persona}, kijito_pull_source_errors_total{kind},
               kijito_pull_group_lag{persona,group}, kijito_pull_group_pending{persona,group},
               kijito_pull_last_success_timestamp_seconds, kijito_pull_build_info{version,command}
    /healthz   200 "ok ..." while the last source success is at most `stale_after` seconds old, else 503
               with the reason in one line (no success yet, or the last error)

Without `serve` nothing needs prometheus_client: the counts feed only the health and the systemd
STATUS line. `available()` tells a command whether the package is installed (asked before it starts).
The watchdog (WATCHDOG=1) is sent only while the loop made progress (a success or a failure recorded)
within `stale_after`: a hung loop stops it, a failing source alone does not. Imports only core/.
"""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterable
from typing import Any

from kijito_pull import __version__
from kijito_pull.core import sdnotify
from kijito_pull.core.models import first_line

PREFIX = "kijito_pull"
STATUS_EVERY = 1.0  # seconds between two STATUS= lines at most


def available() -> bool:
    """True when prometheus_client can be imported (`--metrics-port` needs it)."""
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        return False
    return True


MISSING = "--metrics-port needs prometheus_client: pip install 'kijito-pull[metrics]'"


class Metrics:
    """What one long-running command did, for /metrics, /healthz and systemd (the module docstring).
    `command` names it in build info; `what` is the first words of the STATUS line; `stale_after` the
    seconds after which no source success makes /healthz answer 503."""

    def __init__(self, command: str, what: str, stale_after: float, environ: dict | None = None,
                 clock: Any = time.time):
        self.command = command
        self.what = what
        self.stale_after = stale_after
        self.clock = clock
        self.last_success: float | None = None
        self.last_activity = clock()
        self.last_error: str | None = None
        self.counts = {"relayed": 0, "delivered": 0, "parked": 0, "confirmed": 0, "errors": 0}
        self._lock = threading.Lock()
        self._prom: dict[str, Any] | None = None
        self._registry: Any = None
        self._server: http.server.ThreadingHTTPServer | None = None
        self._status_at = 0.0
        self.notifier = sdnotify.Notifier(environ or {})

    @property
    def serving(self) -> bool:
        """True once /metrics is served (gauges worth a Redis round trip to fill)."""
        return self._prom is not None

    # -- what the command reports ------------------------------------------------------------------

    def relayed(self, persona: str, n: int = 1) -> None:
        self._count("relayed", "messages_relayed", persona, n)

    def pulled(self, persona: str, report: Any) -> None:
        """One pass (a core.delivery.PullReport): its delivered, parked and confirmed messages (hand-overs to an
        agent session its harness's record showed the model has), and the hand-overs still held unconfirmed."""
        self._count("delivered", "messages_delivered", persona, len(report.delivered))
        self._count("parked", "messages_parked", persona, len(report.parked))
        self._count("confirmed", "messages_confirmed", persona, len(report.confirmed))
        if self._prom:
            self._prom["held"].labels(persona=persona).set(len(report.held))

    def succeeded(self) -> None:
        with self._lock:
            self.last_success = self.last_activity = self.clock()
            self.last_error = None
        if self._prom:
            self._prom["last_success"].set(self.last_success)
        self._status()

    def failed(self, kind: str, error: object) -> None:
        """A failed read or write of the source; `kind` is a short label (redis, kijito, state)."""
        with self._lock:
            self.last_activity = self.clock()
            self.counts["errors"] += 1
            self.last_error = f"{kind}: {first_line(error)}"
        if self._prom:
            self._prom["errors"].labels(kind=kind).inc()
        self._status()

    def groups(self, persona: str, rows: Iterable[dict]) -> None:
        """Each consumer group of `persona`'s stream: {"group", "lag", "pending"} (RedisSource.lag)."""
        if not self._prom:
            return
        for row in rows:
            if row.get("lag") is not None:
                self._prom["lag"].labels(persona=persona, group=row["group"]).set(row["lag"])
            self._prom["pending"].labels(persona=persona, group=row["group"]).set(row["pending"])

    def _count(self, key: str, name: str, persona: str, n: int) -> None:
        if n <= 0:
            return
        with self._lock:
            self.counts[key] += n
        if self._prom:
            self._prom[name].labels(persona=persona).inc(n)

    # -- health and systemd ------------------------------------------------------------------------

    def health(self) -> tuple[bool, str]:
        """(healthy, one line): healthy while the last source success is at most stale_after old."""
        with self._lock:
            last, error = self.last_success, self.last_error
        now = self.clock()
        if last is None:
            return False, f"no source success yet{f' (last error {error})' if error else ''}"
        age = now - last
        if age > self.stale_after:
            return False, (f"last source success {age:.0f} s ago (more than {self.stale_after:g} s)"
                           f"{f'; last error {error}' if error else ''}")
        return True, f"ok: last source success {age:.0f} s ago"

    def status_line(self) -> str:
        c = self.counts
        done = ", ".join(f"{c[k]} {k}" for k in ("relayed", "delivered", "parked") if c[k])
        ok, why = self.health()
        return f"{self.what}: {done or 'nothing yet'}; {why if ok or self.last_error is None else self.last_error}"

    def _status(self, force: bool = False) -> None:
        now = self.clock()
        if self.notifier.enabled and (force or now - self._status_at >= STATUS_EVERY):
            self._status_at = now
            self.notifier.send(STATUS=self.status_line())

    def ready(self) -> None:
        """The command runs: READY=1 with its first STATUS, and the watchdog thread if systemd asked."""
        self.notifier.send(READY=1, STATUS=self.status_line())
        period = self.notifier.watchdog_period()
        if period:
            threading.Thread(target=self._watchdog, args=(period,), name="sd-watchdog", daemon=True).start()

    def _watchdog(self, period: float) -> None:
        while True:
            if self.clock() - self.last_activity <= max(self.stale_after, period * 2):
                self.notifier.send(WATCHDOG=1)
            time.sleep(period)

    def stopping(self) -> None:
        self.notifier.send(STOPPING=1, STATUS=f"{self.what}: stopping")
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    # -- the HTTP endpoint -------------------------------------------------------------------------

    def serve(self, host: str, port: int) -> tuple[str, int]:
        """Answer /metrics and /healthz on host:port from a daemon thread; the address bound (port 0:
        a free one). OSError when the port cannot be bound; ImportError without prometheus_client."""
        import prometheus_client as prom

        self._registry = registry = prom.CollectorRegistry(auto_describe=True)
        by_persona = ("persona",)
        self._prom = {
            "messages_relayed": prom.Counter(f"{PREFIX}_messages_relayed", "Messages a relay appended to a "
                                             "stream (not counting those another relay appended first)",
                                             by_persona, registry=registry),
            "messages_delivered": prom.Counter(f"{PREFIX}_messages_delivered", "Messages handed to the "
                                               "consumer and acknowledged", by_persona, registry=registry),
            "messages_parked": prom.Counter(f"{PREFIX}_messages_parked", "Messages parked as poison mail "
                                            "(kijito-pull parked lists them)", by_persona, registry=registry),
            "messages_confirmed": prom.Counter(f"{PREFIX}_messages_confirmed", "Hand-overs to an agent session "
                                               "that the harness's own record confirmed (the model has them)",
                                               by_persona, registry=registry),
            "held": prom.Gauge(f"{PREFIX}_handovers_held", "Hand-overs to agent sessions still unconfirmed when "
                               "the persona's last pass closed", by_persona, registry=registry),
            "errors": prom.Counter(f"{PREFIX}_source_errors", "Failed reads or writes of the source, by kind",
                                   ("kind",), registry=registry),
            "lag": prom.Gauge(f"{PREFIX}_group_lag", "Stream entries not yet read by the consumer group",
                              ("persona", "group"), registry=registry),
            "pending": prom.Gauge(f"{PREFIX}_group_pending", "Entries read by the group and not yet "
                                  "acknowledged (hand-overs in flight)", ("persona", "group"), registry=registry),
            "last_success": prom.Gauge(f"{PREFIX}_last_success_timestamp_seconds", "Unix time of the last "
                                       "good read of the source", registry=registry),
        }
        prom.Info(f"{PREFIX}_build", "kijito-pull's version and the command", registry=registry).info(
            {"version": __version__, "command": self.command})
        if self.last_success is not None:
            self._prom["last_success"].set(self.last_success)
        metrics = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    body, code, kind = prom.generate_latest(registry), 200, prom.CONTENT_TYPE_LATEST
                elif path == "/healthz":
                    ok, why = metrics.health()
                    body, code, kind = (why + "\n").encode(), 200 if ok else 503, "text/plain; charset=utf-8"
                else:
                    body, code, kind = b"not found: /metrics or /healthz\n", 404, "text/plain; charset=utf-8"
                self.send_response(code)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:  # no access log on stderr
                pass

        self._server = http.server.ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="metrics", daemon=True).start()
        return self._server.server_address[:2]
