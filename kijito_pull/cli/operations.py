"""`--metrics-port`, `--metrics-host` and `--stale-after` of the long-running commands (`relay`, `watch`):
one `core.metrics.Metrics` per run, its endpoint started before the loop, READY=1 told to systemd once the
loop runs (docs/fleets.md, "Operating a fleet")."""

from __future__ import annotations

import argparse
import threading
from typing import Any

from kijito_pull.cli import options
from kijito_pull.core import errors, metrics
from kijito_pull.core.config import ConfigError
from kijito_pull.core.environment import Environment
from kijito_pull.core.exitcodes import ExitCode


def add(parser: argparse.ArgumentParser, stale_default: str) -> None:
    group = parser.add_argument_group("operations (Prometheus, health, systemd; docs/fleets.md)")
    group.add_argument("--metrics-port", type=_port, default=None, metavar="PORT",
                       help="serve Prometheus metrics at http://HOST:PORT/metrics and a health check at "
                            "/healthz (200, or 503 with the reason) on this port; needs "
                            "pip install 'kijito-pull[metrics]'")
    group.add_argument("--metrics-host", default="127.0.0.1", metavar="HOST",
                       help="address the metrics port listens on (default 127.0.0.1; 0.0.0.0 for every "
                            "interface: the metrics name personas, never mail or secrets)")
    group.add_argument("--stale-after", type=options.non_negative_float, default=None, metavar="SECONDS",
                       help=f"/healthz answers 503 when the last good read of the source is older than this "
                            f"(default {stale_default}); under systemd the watchdog stops too when the loop "
                            f"itself stops making progress")


def _port(text: str) -> int:
    value = options.non_negative_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError("a port is 0 to 65535")
    return value


def start(args: argparse.Namespace, env: Environment, command: str, what: str,
          stale_after: float) -> metrics.Metrics:
    """The run's Metrics; its endpoint listening when --metrics-port was given. ConfigError (exit 2,
    one line) when prometheus_client is missing or the port cannot be bound."""
    ops = metrics.Metrics(command, what, args.stale_after or stale_after, environ=dict(env.environ))
    if args.metrics_port is None:
        return ops
    if not metrics.available():
        raise ConfigError(metrics.MISSING)
    try:
        host, port = ops.serve(args.metrics_host, args.metrics_port)
    except OSError as exc:
        raise ConfigError(f"--metrics-port: cannot listen on {args.metrics_host}:{args.metrics_port} "
                          f"({exc.strerror or exc})") from None
    env.stderr.write(f"kijito-pull: {command}: metrics at http://{host}:{port}/metrics, health at /healthz\n")
    env.stderr.flush()
    return ops


def run_watcher(watcher: Any, ops: metrics.Metrics, env: Environment,
                beside: threading.Thread | None = None) -> ExitCode:
    """The loop of `watch` and `relay`: READY told, `beside` started (the relay's guard), the watch loop
    (watch/loop.py's Watcher) run until its stop, then STOPPING told and `beside` joined. A persona
    directory that cannot be listed at the start is exit 1 with one line (raised: cli/main.py says it)."""
    try:
        ops.ready()
        if beside is not None:
            beside.start()
        with errors.about("cannot list the account's personas", "name them with --persona"):
            watcher.run()
    finally:
        watcher.stop.set()
        ops.stopping()
        if beside is not None and beside.is_alive():
            beside.join(10)
    return ExitCode.OK
