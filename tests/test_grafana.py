"""The operators' Grafana dashboard (deploy/grafana/kijito-pull.json) and Prometheus alert rules
(deploy/prometheus/kijito-pull-alerts.yml) read only metrics kijito-pull exports: every PromQL expression
in them is parsed for the metric names it reads, and each must be one that core/metrics.py really serves
(a real `Metrics.serve` on a free port, its /metrics scraped over HTTP), or one Prometheus makes itself."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import requests

from kijito_pull.core.metrics import Metrics

REPO = Path(__file__).resolve().parent.parent
DASHBOARD = REPO / "deploy" / "grafana" / "kijito-pull.json"
RULES = REPO / "deploy" / "prometheus" / "kijito-pull-alerts.yml"
PROMETHEUS_OWN = {"up"}  # made by Prometheus for every scrape target
KEYWORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool"}
ALERTS = {"KijitoPullRelayDown", "KijitoPullGroupLagGrowing", "KijitoPullMailParked", "KijitoPullConfirmationsStalled"}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression (or Grafana's label_values(METRIC, LABEL)) reads."""
    expr = re.sub(r"label_values\(([^,()]+),[^)]*\)", r"\1", expr)  # Grafana's: the label is no metric
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', "", expr)  # string literals
    expr = re.sub(r"\{[^}]*\}", "", expr)  # label matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # ranges
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", expr)  # label lists
    names = set()
    for match in re.finditer(r"(?<![\w.])([a-zA-Z_:][\w:]*)(\s*\()?", expr):
        name, call = match.group(1), match.group(2)
        if call or name in KEYWORDS or re.fullmatch(r"\d+[smhdwy]", name):
            continue
        names.add(name)
    return names


def exported() -> set[str]:
    """Every sample name core/metrics.py serves, read from a real /metrics endpoint."""
    pytest.importorskip("prometheus_client")
    ops = Metrics("relay", "relay", 60)
    host, port = ops.serve("127.0.0.1", 0)
    try:
        text = requests.get(f"http://{host}:{port}/metrics", timeout=5).text
    finally:
        ops.stopping()
    names = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, family, kind = line.split()
            if kind == "counter":  # the TYPE line names the family with or without _total, by client version
                base = family[:-len("_total")] if family.endswith("_total") else family
                names |= {f"{base}_total", f"{base}_created"}
            elif kind == "info":  # an older client's TYPE line for an Info: the sample ends in _info
                names.add(family if family.endswith("_info") else f"{family}_info")
            else:
                names.add(family)
    return names


def dashboard_expressions() -> list[str]:
    board = json.loads(DASHBOARD.read_text())
    found = []

    def walk(node):  # noqa: ANN001, ANN202
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("expr", "definition") and isinstance(value, str):
                    found.append(value)
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(board)
    return found


def rule_expressions() -> dict[str, str]:
    import yaml

    rules = yaml.safe_load(RULES.read_text())
    return {r["alert"]: r["expr"] for group in rules["groups"] for r in group["rules"]}


def test_the_reader_finds_metric_names_and_nothing_else():
    assert metric_names('sum by (persona, group) (rate(kijito_pull_x_total{job=~"$job", a="b{c}"}[5m])) > 0.1 '
                        'unless on(instance) increase(other_metric[30m]) > 0 and up == 0') == \
        {"kijito_pull_x_total", "other_metric", "up"}
    assert metric_names("label_values(kijito_pull_build_info, job)") == {"kijito_pull_build_info"}
    assert metric_names("time() - kijito_pull_last_success_timestamp_seconds > 300") == \
        {"kijito_pull_last_success_timestamp_seconds"}


def test_every_metric_the_dashboard_and_the_alerts_read_is_exported():
    names = exported()
    assert {"kijito_pull_messages_relayed_total", "kijito_pull_group_lag", "kijito_pull_messages_confirmed_total",
            "kijito_pull_handovers_held", "kijito_pull_build_info"} <= names
    expressions = dashboard_expressions() + list(rule_expressions().values())
    assert len(expressions) >= 15
    read = set().union(*(metric_names(e) for e in expressions))
    assert read - names - PROMETHEUS_OWN == set()
    # and the dashboard shows every metric kijito-pull exports
    assert {n for n in names if not n.endswith("_created")} - read == set()


def test_the_alerts_cover_relay_down_lag_parked_mail_and_stalled_confirmations():
    rules = rule_expressions()
    assert ALERTS <= set(rules)
    assert "kijito_pull_messages_confirmed_total" in metric_names(rules["KijitoPullConfirmationsStalled"])
    assert "kijito_pull_group_lag" in metric_names(rules["KijitoPullGroupLagGrowing"])
    assert "kijito_pull_messages_parked_total" in metric_names(rules["KijitoPullMailParked"])


def test_a_pass_counts_its_confirmations_and_the_hand_overs_still_held():
    pytest.importorskip("prometheus_client")
    from kijito_pull.core.delivery import PullReport

    ops = Metrics("watch", "watch", 60)
    host, port = ops.serve("127.0.0.1", 0)
    try:
        ops.pulled("river", PullReport("river", delivered=[5], confirmed=[3, 4], held=[5]))
        ops.pulled("river", PullReport("river", confirmed=[5]))
        text = requests.get(f"http://{host}:{port}/metrics", timeout=5).text
    finally:
        ops.stopping()
    assert 'kijito_pull_messages_confirmed_total{persona="river"} 3.0' in text
    assert 'kijito_pull_handovers_held{persona="river"} 0.0' in text
    assert ops.counts["confirmed"] == 3
