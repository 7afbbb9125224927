#!/usr/bin/env python3
"""Take docs/dashboard.png: `kijito-pull dashboard` in headless Chromium (tests/browser.py) over a small,
busy account on the sandbox, built through the real commands: a Claude Code session (its hooks, with a
transcript as Claude Code writes it) that confirmed one hand-over and holds two more, a script's cursor,
poison mail parked by a `watch` whose command always fails, a wake measured while the page was open, and
unread mail across the account.

    .venv/bin/python scripts/dashboard_screenshot.py            # writes docs/dashboard.png
    .venv/bin/python scripts/dashboard_screenshot.py --out /tmp/d.png --width 1280 --height 800
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from kijito_pull.sandbox import Sandbox  # noqa: E402
from tests.browser import chromium  # noqa: E402
from tests.dashboard.running import dashboard, environ  # noqa: E402
from tests.harnesses.claude.conftest import OPT_IN  # noqa: E402
from tests.harnesses.claude.test_confirmed_handover import Session  # noqa: E402
from tests.harnesses.claude.test_hooks import TOKEN, Hooks  # noqa: E402

OTHERS = ("argus", "juniper", "heron", "marlow", "sable", "quill")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "dashboard.png")
    parser.add_argument("--width", type=int, default=1366)
    parser.add_argument("--height", type=int, default=860)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="dashboard-shot-"))
    project = tmp / "proj"
    project.mkdir()
    (project / ".git").mkdir()
    (project / "AGENTS.md").write_text(OPT_IN)
    state = tmp / "state"
    with Sandbox(token=TOKEN).start() as sb:
        hooks = Hooks(sb, project, state, KIJITO_PULL_MAX_STOP_BLOCKS="100")
        sb.send(to="river", sender="loom", content="standup notes are in the doc")
        assert hooks.cli("--once", "--persona", "river")[0] == 0
        for i, name in enumerate(OTHERS[:-1]):
            for j in range(i % 3 + 1):
                sb.send(to=name, sender="loom", content=f"note {j}", urgent=(name == "juniper" and j == 0))
        assert hooks.cli("--once", "--persona", "argus", "--consumer", "ci-script")[0] == 0
        # poison mail: a watch whose command always fails parks it after one refusal
        sb.send(to="quill", sender="argus", content="a message no consumer takes")
        watch = subprocess.Popen([sys.executable, "-m", "kijito_pull", "watch", "--persona", "quill", "--emit",
                                  "exec-per-event", "--exec", "false", "--max-attempts", "1"],
                                 env=environ(sb.url, TOKEN, state), stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        with dashboard(sb.url, TOKEN, state) as dash, chromium(args.width, args.height) as browser:
            browser.get(dash.url)
            browser.wait_for("return document.querySelector('tr[data-persona=\"river\"]') !== null")
            session = Session(hooks, "6f1c2d9e", tmp)
            sb.send(to="river", sender="argus", content="the build is red on main")
            time.sleep(0.6)
            session.run("claude-session-start", source="startup")
            time.sleep(0.6)  # the page sees it pending
            session.run("claude-stop")  # confirmed
            sb.send(to="river", sender="heron", content="review please: PR 412")
            sb.send(to="river", sender="loom", content="deploy window moved to 15:00")
            time.sleep(0.6)
            session.run("claude-stop", stop_hook_active=True, record=False)  # handed over, not yet confirmed
            dash.wait(lambda s: s["parked"] and s["pending"] and s["confirmations"]["rows"] and s["wakes"]["rows"],
                      timeout=20)
            time.sleep(2.5)  # ages tick past zero
            height = browser.script("return document.documentElement.scrollHeight;")
            browser.size(args.width, max(args.height, height + 140))  # the window's frame takes some
            time.sleep(0.5)
            browser.screenshot(args.out)
        watch.terminate()
        watch.wait(15)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
