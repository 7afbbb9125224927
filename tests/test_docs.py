"""Every `kijito-pull ...` command the documentation shows exists, with every flag it uses.

Commands are taken from the code blocks and inline code of README.md and docs/**/*.md. For each, the
subcommand's `--help` (in-process) must succeed and name every `--flag` the line uses; a line with
`--dry-run` is also run. Code blocks fenced as ```kijito-inbox-monitor``` show the old tool's flags
(docs/migrating.md) and are skipped, as are lines that only name the package (`pip install kijito-pull`).
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import re
import shlex
from pathlib import Path

import pytest

from kijito_pull.cli.main import COMMANDS, main
from kijito_pull.core.environment import Environment

REPO = Path(__file__).resolve().parent.parent
DOCS = sorted([REPO / "README.md", *(REPO / "docs").rglob("*.md")])
#: Fence languages whose content is not kijito-pull (the old tool's flags in docs/migrating.md).
EXCLUDED_FENCES = {"kijito-inbox-monitor"}
PROG = "kijito-pull"

_FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([^\s`]*)")
_INLINE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
_SEPARATORS = re.compile(r"\s*(?:&&|\|\||;|\||\$\(|`|\()\s*")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=\S*$")
_CRON_FIELD = re.compile(r"[0-9*/,-]+")
_FLAG = re.compile(r"^(--?[A-Za-z][A-Za-z0-9-]*)")


def _strip_comment(line: str) -> str:
    """Drop a trailing `# comment` (a # that starts a word, outside quotes)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


def _words(segment: str) -> list[str]:
    try:
        return shlex.split(segment)
    except ValueError:
        return segment.split()


def commands_in_line(line: str) -> list[list[str]]:
    """The kijito-pull command lines in one shell line: each as its words after `kijito-pull`."""
    text = _strip_comment(line).strip()
    if text.startswith("$ "):
        text = text[2:]
    out = []
    for segment in _SEPARATORS.split(text):
        words = _words(segment.strip().lstrip("!"))
        if len(words) > 5 and all(_CRON_FIELD.fullmatch(w) for w in words[:5]):
            words = words[5:]  # a crontab line: the schedule, then the command
        while words and (_ASSIGNMENT.match(words[0]) or words[0] in ("exec", "time", "sudo", "env", "eval")):
            words = words[1:]
        if words and (words[0] == PROG or words[0].endswith("/" + PROG)):
            out.append(words[1:])
    return out


def extract(text: str) -> list[tuple[int, list[str]]]:
    """(line number, words after kijito-pull) for every command in code blocks and inline code."""
    found = []
    fence: str | None = None
    language = ""
    for number, line in enumerate(text.splitlines(), 1):
        match = _FENCE.match(line)
        if match:
            if fence is None:
                fence, language = match.group(2), match.group(3).lower()
            elif match.group(2).startswith(fence[0]) and len(match.group(2)) >= len(fence):
                fence, language = None, ""
            continue
        if fence is not None:
            if language not in EXCLUDED_FENCES:
                found.extend((number, words) for words in commands_in_line(line))
            continue
        for span in _INLINE.findall(line):
            found.extend((number, words) for words in commands_in_line(span))
    return found


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    # Nested parsers (`session stop`) print their help to the process's stdout, not the Environment's.
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv, Environment(stdin=io.StringIO(""), stdout=out, stderr=err,
                                      environ={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"}, cwd=str(REPO)))
    return code, out.getvalue(), err.getvalue()


@functools.cache
def help_text(*path: str) -> tuple[int, str]:
    code, out, err = _run([*path, "--help"])
    return code, out + err


def problems(words: list[str]) -> list[str]:
    """Why a documented command line does not match the CLI (empty when it does)."""
    if not words or words[0] in ("-h", "--help", "--version"):
        return []
    if words[0].startswith("-"):
        words = ["pull", *words]  # `kijito-pull --once ...` is `kijito-pull pull --once ...`
    command = words[0]
    if re.fullmatch(r"[A-Z][A-Z_]*", command):
        return []  # a placeholder (`kijito-pull COMMAND --help`), not a command
    if command not in COMMANDS:
        return [f"no such command {command!r}"]
    code, text = help_text(command)
    if code != 0:
        return [f"`kijito-pull {command} --help` exited {code}"]
    shown = command
    # A nested action (`session stop`, `install claude`): its own help, when it has one.
    if len(words) > 1 and not words[1].startswith("-"):
        nested_code, nested = help_text(command, words[1])
        if nested_code == 0 and nested != text:
            text, shown = nested, f"{command} {words[1]}"
    out = []
    for word in words[1:]:
        match = _FLAG.match(word)
        if not match or word in ("-", "--"):
            continue
        flag = match.group(1)
        if not re.search(r"(?<![\w-])" + re.escape(flag) + r"(?![\w-])", text):
            out.append(f"flag {flag} is not in `kijito-pull {shown} --help`")
    return out


def _documented() -> list[tuple[str, int, list[str]]]:
    rows = []
    for path in DOCS:
        for number, words in extract(path.read_text(encoding="utf-8")):
            rows.append((str(path.relative_to(REPO)), number, words))
    return rows


DOCUMENTED = _documented()


def test_the_docs_show_commands():
    assert len(DOCUMENTED) > 50
    files = {row[0] for row in DOCUMENTED}
    for name in ("README.md", "docs/getting-started.md", "docs/configuration.md", "docs/troubleshooting.md"):
        assert name in files, name


@pytest.mark.parametrize("where,line,words", DOCUMENTED,
                         ids=[f"{w}:{n}:{' '.join(ws)[:40]}" for w, n, ws in DOCUMENTED])
def test_documented_command_exists(where, line, words):
    found = problems(words)
    assert not found, f"{where}:{line}: kijito-pull {' '.join(words)}: " + "; ".join(found)


def test_dry_runs_parse_and_run(tmp_path):
    """A documented command with --dry-run is run for real (it changes nothing), in a scratch home."""
    for where, line, words in DOCUMENTED:
        if "--dry-run" not in words or problems(words):
            continue
        out, err = io.StringIO(), io.StringIO()
        home = tmp_path / "home"
        project = tmp_path / "project"
        home.mkdir(exist_ok=True)
        project.mkdir(exist_ok=True)
        argv = [w.replace("~", str(home)) for w in words]
        code = main(argv, Environment(stdin=io.StringIO(""), stdout=out, stderr=err, cwd=str(project),
                                      environ={"PATH": "/usr/bin:/bin", "HOME": str(home),
                                               "KIJITO_PULL_STATE_DIR": str(home / "state"),
                                               "KIJITO_PULL_CONFIG": os.devnull}))
        assert "unrecognized arguments" not in err.getvalue() and "invalid choice" not in err.getvalue(), \
            f"{where}:{line}: {err.getvalue()}"
        assert code != 2 or "error:" not in err.getvalue(), f"{where}:{line}: exit {code}: {err.getvalue()}"


# -- the checker itself ---------------------------------------------------------------------------------


def test_checker_catches_a_flag_that_does_not_exist():
    doc = "Run it:\n\n```sh\nkijito-pull --once --persona river --no-such-flag\n```\n"
    [(number, words)] = extract(doc)
    assert number == 4
    assert problems(words) == ["flag --no-such-flag is not in `kijito-pull pull --help`"]


def test_checker_catches_an_unknown_command_and_inline_code():
    [(_, words)] = extract("Use `kijito-pull frobnicate --now` to frobnicate.")
    assert problems(words) == ["no such command 'frobnicate'"]


def test_checker_reads_nested_actions_and_skips_the_old_tool():
    doc = ("```sh\nkijito-pull session status --all   # every project\n"
           "KIJITO_PULL_MODE=interactive kijito-pull session arm --session-id x && kijito-pull status --json\n```\n"
           "```kijito-inbox-monitor\nkijito-pull --state-file x\n```\n"
           "```sh\nuv tool install kijito-pull      # or: pipx install kijito-pull\n```\n"
           "```text\nkijito-pull: session abc: armed (waker pid 1)\n```\n"
           "```sh\n*/5 * * * * $HOME/.local/bin/kijito-pull --once --quiet >> log\n```\n")
    found = [words for _, words in extract(doc)]
    assert found == [["session", "status", "--all"], ["session", "arm", "--session-id", "x"], ["status", "--json"],
                     ["--once", "--quiet", ">>", "log"]]
    assert all(not problems(words) for words in found)
    assert problems(["session", "stop", "--all"])  # --all belongs to `session status` only


def test_the_token_precedence_the_docs_state_is_the_one_the_code_applies(tmp_path):
    """configuration.md and troubleshooting.md list the token's sources in the order resolve_token uses."""
    from kijito_pull.core.config import resolve_token

    flag_file, config_file = tmp_path / "flag", tmp_path / "config"
    for path, text in ((flag_file, "from-flag"), (config_file, "from-config")):
        path.write_text(text)
        path.chmod(0o600)
    env = {"KIJITOMON_TOKEN": "from-env"}
    sources = {"from-flag": "--token-file", "from-env": "$KIJITOMON_TOKEN", "from-config": "token_file"}
    # The order the code applies, found by offering it every pair of sources.
    applied = [sources[resolve_token(str(flag_file), env, str(config_file))],
               sources[resolve_token(None, env, str(config_file))], sources[resolve_token(None, {}, str(config_file))]]
    assert len(set(applied)) == 3

    def order(text: str) -> list[str]:
        return sorted(sources.values(), key=lambda name: text.index(f"`{name}`"))

    configuration = (REPO / "docs" / "configuration.md").read_text()
    row = next(line for line in configuration.splitlines() if line.startswith("| token |"))
    assert order(row) == applied, row
    troubleshooting = (REPO / "docs" / "troubleshooting.md").read_text()
    sentence = next(line for line in troubleshooting.split("\n\n") if "Precedence:" in line and "token" in line)
    assert order(sentence.split("Precedence:")[1]) == applied, sentence
    for text in (configuration, troubleshooting):
        assert "token file wins over the" not in text and "configured token file wins" not in text


def test_the_readme_says_how_to_run_the_command_the_two_commands_installed():
    """After `dev.py demo` / `dev.py test`, `kijito-pull` is in .venv/bin only: the README says so, and that
    console script (this test runs in the venv dev.py makes) is really there and runs."""
    import subprocess
    import sys

    readme = (REPO / "README.md").read_text()
    try_it = readme.split("## Try it", 1)[1].split("\n## ", 1)[0]
    assert ".venv/bin/kijito-pull --help" in try_it and "source .venv/bin/activate" in try_it
    assert "not put `kijito-pull` on your `PATH`" in try_it
    script = Path(sys.prefix) / "bin" / "kijito-pull"
    ran = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0 and ran.stdout.startswith("kijito-pull "), ran.stderr


def test_the_benchmarks_page_holds_current_figures_each_with_its_command_and_commit():
    """docs/benchmarks.md holds the current figures only (issue 20: at most 400 lines; history is git's):
    every paragraph that dates a run names the commit it ran at, and its section shows the `bench/`
    command."""
    text = (REPO / "docs" / "benchmarks.md").read_text()
    assert len(text.splitlines()) <= 400
    dated = 0
    for section in text.split("\n## ")[1:]:
        runs = [p for p in section.split("\n\n") if re.search(r"20\d\d-\d\d-\d\d \d\d:\d\d", p)]
        for paragraph in runs:
            assert re.search(r"\bat\s+[0-9a-f]{7}\b", paragraph), paragraph
        if runs:
            assert "bench/bench_" in section, section[:80]
        dated += len(runs)
    assert dated >= 8, dated


# -- the reference tables against the code (issue 27) --------------------------------------------------------

def table_after(text: str, heading: str) -> list[list[str]]:
    """The rows (cells, stripped, header and rule dropped) of the first table after `heading`."""
    at = text.index(heading)
    rest = text[text.rindex("\n", 0, at) + 1:] if heading.startswith("|") else text[at:]
    lines = rest[rest.index("|"):].splitlines() if heading.startswith("|") else \
        rest[rest.index("\n|") + 1:].splitlines()
    rows = []
    for line in lines:
        if not line.startswith("|"):
            break
        cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        rows.append(cells)
    return rows[2:]


CONFIGURATION = REPO / "docs" / "configuration.md"


def test_the_config_key_table_is_every_key_the_code_knows():
    from kijito_pull.core.config import KNOWN_KEYS

    rows = table_after(CONFIGURATION.read_text(), "| key | type | read by | meaning |")
    # `[personas.NAME]` `mark_read`: a key of the `personas` table
    keys = {re.sub(r"^\[(\w+)\..*", r"\1", re.findall(r"`([^`]+)`", r[0])[0]) for r in rows}
    assert keys == set(KNOWN_KEYS)


def _variables_the_code_reads() -> set[str]:
    found: set[str] = set()
    for path in (REPO / "kijito_pull").rglob("*.py"):
        found |= set(re.findall(r"[\"'](KIJITO(?:MON)?_[A-Z0-9_]+)[\"']", path.read_text()))
    for path in (REPO / "extensions").rglob("*.ts"):
        found |= set(re.findall(r"\benv\.(KIJITO(?:MON)?_[A-Z0-9_]+)", path.read_text()))
    return found


def test_every_variable_the_code_reads_is_in_the_environment_table():
    read = _variables_the_code_reads()
    assert {"KIJITOMON_TOKEN", "KIJITO_PULL_CONSUMER", "KIJITO_PULL_PI_DEBUG", "KIJITO_PULL_MARK_READ"} <= read
    table = table_after(CONFIGURATION.read_text(), "| variable | meaning |")
    listed = {name for row in table for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", row[0])}
    assert sorted(read - listed) == []


def test_the_readme_configuration_table_names_the_variable_of_each_setting_it_lists():
    """Each README row with a config key names every variable the precedence table gives that key."""
    precedence = table_after(CONFIGURATION.read_text(), "| setting | used by | order (first that is set wins) |")
    variables: dict[str, set[str]] = {}
    for row in precedence:
        for key in re.findall(r"config `([a-z_]+)`", row[2]):
            variables.setdefault(key, set()).update(re.findall(r"`\$([A-Z][A-Z0-9_]+)`", row[2]))
    readme = table_after((REPO / "README.md").read_text(), "| setting | flag | environment | config file key |")
    checked = 0
    for row in readme:
        key = row[3].strip("`")
        if key in variables:
            assert variables[key] <= set(re.findall(r"[A-Z][A-Z0-9_]+", row[2])), row
            checked += 1
    assert checked >= 4 and "KIJITO_PULL_CONSUMER" in variables["consumer"]


def _install_flags() -> dict[tuple[str, str], set[str]]:
    """(action, target) -> the flags its parser takes, from the CLI itself."""
    from kijito_pull.cli.main import build_parser

    def subparsers(parser):
        return next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction").choices

    out = {}
    for action in ("install", "uninstall"):
        for target, parser in subparsers(subparsers(build_parser())[action]).items():
            out[(action, target)] = {o for a in parser._actions for o in a.option_strings
                                     if o.startswith("--") and o != "--help"}
    return out


def test_the_install_targets_and_flags_the_configuration_page_gives_are_the_clis():
    from kijito_pull.harnesses import registry

    text = CONFIGURATION.read_text()
    section = text.split("### install and uninstall", 1)[1].split("\n### ", 1)[0]
    sentence = section[section.index("Targets "):].split(" (", 1)[0]
    assert re.findall(r"`([a-z]+)`", sentence) == list(registry.names())
    documented: dict[tuple[str, str], set[str]] = {}
    for flag_cell, targets, _ in table_after(section, "| flag | targets | meaning |"):
        names = list(registry.names()) if targets == "all" else [
            n for n in re.findall(r"\b([a-z]+)\b", targets.split("(")[0]) if n in registry.names()]
        assert names, flag_cell
        actions = ("install",) if "(install" in targets else ("install", "uninstall")
        for flag in re.findall(r"`(--[a-z-]+)", flag_cell):
            for action in actions:
                for name in names:
                    documented.setdefault((action, name), set()).add(flag)
    actual = _install_flags()
    assert set(actual) == {(a, n) for a in ("install", "uninstall") for n in registry.names()}
    for where, flags in actual.items():
        assert documented.get(where, set()) == flags, where


def _quick_start(title: str) -> list[str]:
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert readme.index("## Quick start") < readme.index("## Install")
    block = section.split(title, 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    return [line.split("  #", 1)[0].strip() for line in block.splitlines() if line.strip()]


def test_the_readme_starts_with_a_five_line_path_for_claude_code(tmp_path):
    import subprocess

    from kijito_pull.harnesses.session import optin

    lines = _quick_start("**I use Claude Code**")
    assert len(lines) == 5
    assert lines[0].startswith("uv tool install") and lines[1].startswith("export KIJITOMON_TOKEN=")
    assert "inbox monitor: raise on start" in lines[2] and "inbox persona:" in lines[2]
    assert lines[3:] == ["kijito-pull install claude --project", "kijito-pull doctor"]
    (tmp_path / ".git").mkdir()
    subprocess.run(["bash", "-c", lines[2]], cwd=tmp_path, check=True)  # the opt-in line, run as written
    found = optin.resolve(str(tmp_path), {"HOME": str(tmp_path)})
    assert found.opted_in and found.persona == "river", found


def test_the_readme_sandbox_path_runs_as_written(tmp_path):
    """The sandbox path's lines after the install, run by bash on a free port: the mail arrives."""
    import socket
    import subprocess
    import sys

    lines = _quick_start("**No account yet: the sandbox**")
    assert len(lines) == 5 and lines[0].startswith("uv tool install")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    script = "\n".join(["set -e", *(line.replace("8765", port) for line in lines[1:3]),
                        "for i in $(seq 100); do kijito-pull send --to river --from loom 'hello' >/dev/null 2>&1 "
                        "&& break; sleep 0.1; done",  # the server is up: the documented send, once it answers
                        *lines[4:], "kill %1"])
    env = {"PATH": f"{Path(sys.prefix) / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path),
           "KIJITO_PULL_STATE_DIR": str(tmp_path / "state"), "KIJITO_PULL_CONFIG": os.devnull}
    assert "kijito-pull send --to river --from loom \"hello\"" in lines[3]
    ran = subprocess.run(["bash", "-c", script], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert "from loom" in ran.stdout and "    hello" in ran.stdout, ran.stdout


def test_the_readme_install_table_has_one_row_per_harness_the_registry_knows():
    """README's "Your harness" table: each harness's `kijito-pull install NAME` and no name the CLI lacks."""
    from kijito_pull.harnesses import registry

    rows = table_after((REPO / "README.md").read_text(), "| harness | install |")
    named = [re.findall(r"kijito-pull install ([a-z]+)", install) for _, install in rows]
    assert sorted(n for found in named for n in found) == sorted(registry.names()), named
    assert all(len(found) == 1 for found in named), named


def test_the_changelog_names_every_harness_install_takes():
    from kijito_pull.harnesses import registry

    text = (REPO / "CHANGELOG.md").read_text()
    [targets] = re.findall(r"`kijito-pull install ([a-z|]+)`", text)
    assert targets.split("|") == list(registry.names())


def test_the_docs_index_links_each_harness_page():
    """docs/README.md lists a page for every harness the registry knows that has one (docs/NAME.md)."""
    from kijito_pull.harnesses import registry

    index = (REPO / "docs" / "README.md").read_text()
    pages = [n for n in registry.names() if (REPO / "docs" / f"{n}.md").exists()]
    assert len(pages) >= len(registry.names()) - 1, pages  # every harness but the daemon has its page
    assert [n for n in pages if f"]({n}.md)" not in index] == []


def test_the_readme_names_the_harness_versions_install_harnesses_pins():
    """README's sentence on the end-to-end tests names each pinned harness version, and no other."""
    script = (REPO / "scripts" / "install-harnesses").read_text()
    block = script.split("# ---- pinned versions", 1)[1].split("\n# ----", 1)[0]
    pins = {name: version for name, version in re.findall(r'^([A-Z0-9_]+)="([^"]+)"', block, re.M)
            if name != "NODE22_VERSION"}  # the Node that runs some of them, not a harness
    assert len(pins) >= 10, pins
    readme = (REPO / "README.md").read_text()
    sentence = readme[readme.index("End-to-end tests that drive the real"):]
    sentence = sentence[:sentence.index("skip when")]
    assert sorted(re.findall(r"\b\d+\.\d+\.\d+\b", sentence)) == sorted(pins.values()), pins
