"""The README a newcomer reads in ten minutes (issue 54): short, the two set-up commands, every
subcommand in its command table, and no relative link in README.md or docs/*.md that leads nowhere."""

from __future__ import annotations

import argparse
import glob
import os
import re
import unicodedata

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(REPO_ROOT, "README.md")
MAX_README_LINES = 400
# Where the walkthrough on your own data must have reached `fedgen-debug app`.
WALKTHROUGH_BY_LINE = 120


def read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def outside_code_blocks(text: str) -> list[str]:
    """The lines of `text` with those inside ``` fences blanked (a `# comment` there is no heading)."""
    lines, fenced = [], False
    for line in text.split("\n"):
        if line.startswith("```"):
            fenced = not fenced
            lines.append("")
        else:
            lines.append("" if fenced else line)
    return lines


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped (hyphens and underscores
    kept), spaces as hyphens."""
    text = re.sub(r"[`*]", "", heading).strip().lower()
    text = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LN")
    return text.replace(" ", "-")


def anchors(path: str) -> set[str]:
    found, seen = set(), {}
    for line in outside_code_blocks(read(path)):
        match = re.match(r"^#{1,6}\s+(.*?)\s*$", line)
        if match:
            anchor = github_anchor(match.group(1))
            found.add(anchor if anchor not in seen else f"{anchor}-{seen[anchor]}")
            seen[anchor] = seen.get(anchor, 0) + 1
    return found


def relative_links(path: str) -> list[str]:
    text = "\n".join(outside_code_blocks(read(path)))
    return [target for target in re.findall(r"\]\(([^)\s]+)\)", text) if not re.match(r"^[a-z]+:", target)]


def test_the_readme_is_short_and_starts_with_the_two_commands():
    text = read(README)
    assert len(text.splitlines()) <= MAX_README_LINES
    assert "make demo" in text and "make test" in text
    first_block = re.search(r"```sh\n(.*?)```", text, re.S).group(1)
    assert [line.split()[:2] for line in first_block.splitlines()] == [["make", "demo"], ["make", "test"]]


def test_the_walkthrough_on_your_own_data_reaches_the_app_early():
    lines = read(README).splitlines()[:WALKTHROUGH_BY_LINE]
    for step in ("fedgen-debug train-lm", "fedgen-debug train-gan", "fedgen-debug analyze-lm",
                 "fedgen-debug analyze-gan", "fedgen-debug app"):
        assert any(line.startswith(step) for line in lines), step


def test_the_command_table_names_every_subcommand():
    from fedgen_debug.cli.main import _build_parser

    def subcommands(parser) -> dict:
        actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        return actions[0].choices if actions else {}

    table = "\n".join(line for line in read(README).splitlines() if line.startswith("| `"))
    commands = subcommands(_build_parser())
    assert len(commands) >= 14
    for name, parser in commands.items():
        assert re.search(rf"\| `{re.escape(name)}[ `]", table), name
        for action in subcommands(parser):
            assert f"{name} {action}" in table or f"{name} [{action}]" in table, (name, action)


def test_every_relative_link_in_the_readme_and_docs_resolves():
    pages = [README] + sorted(glob.glob(os.path.join(REPO_ROOT, "docs", "*.md")))
    assert len(pages) > 1
    broken = []
    for page in pages:
        for target in relative_links(page):
            file, _, anchor = target.partition("#")
            destination = os.path.normpath(os.path.join(os.path.dirname(page), file)) if file else page
            if not os.path.exists(destination):
                broken.append(f"{os.path.relpath(page, REPO_ROOT)}: {target}: no such file")
            elif anchor and anchor not in anchors(destination):
                broken.append(f"{os.path.relpath(page, REPO_ROOT)}: {target}: no such anchor")
    assert not broken, "\n".join(broken)


def test_the_anchor_rule_matches_githubs():
    assert github_anchor("Scenario 1: the tokenization bug (DP word- and char-LMs)") == \
        "scenario-1-the-tokenization-bug-dp-word--and-char-lms"
    assert github_anchor("What `make demo` does and prints") == "what-make-demo-does-and-prints"
    assert github_anchor("Selection criteria T1–T6") == "selection-criteria-t1t6"
