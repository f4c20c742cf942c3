"""Every relative link in every tracked markdown file resolves: the file (or folder) exists and, for a
link into a markdown file with ``#anchor``, a heading of that file makes that anchor (GitHub's rule:
lower case, punctuation dropped, spaces to hyphens).  Results and notebook pages move; this keeps them
reachable."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: [text](target) and ![alt](target), not inside inline code; reference-style [x]: target lines too.
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s*\[[^\]]+\]:\s*(\S+)", re.MULTILINE)
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
CODE = re.compile(r"`[^`\n]*`")
REPO_LINK = "repo:"
EXTERNAL = ("http://", "https://", "mailto:", "ftp://", "data:")


def tracked_markdown() -> list[Path]:
    """The repository's tracked markdown files (README, RESULTS, benchmarks, results, docs, ...)."""
    listed = subprocess.run(["git", "ls-files", "*.md"], cwd=ROOT, capture_output=True, text=True, check=True)
    return [ROOT / line for line in listed.stdout.splitlines() if (ROOT / line).is_file()]


def links(text: str) -> list[str]:
    """The link targets of a markdown text, code blocks and inline code left out."""
    text = CODE.sub("", FENCE.sub("", text))
    return LINK.findall(text) + REFERENCE.findall(text)


def anchors(path: Path) -> set[str]:
    """The anchors a markdown file's headings make (GitHub: a repeated heading gets -1, -2, ...)."""
    seen: dict[str, int] = {}
    found = set()
    for line in FENCE.sub("", path.read_text(encoding="utf-8")).splitlines():
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        slug = re.sub(r"[^\w\- ]", "", match.group(1).strip().lower().replace("`", "")).replace(" ", "-")
        count = seen.get(slug, 0)
        found.add(slug if count == 0 else f"{slug}-{count}")
        seen[slug] = count + 1
    found |= set(re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", path.read_text(encoding="utf-8")))
    return found


def broken_links(path: Path) -> list[str]:
    problems = []
    for target in links(path.read_text(encoding="utf-8")):
        if target.startswith(EXTERNAL) or target.startswith("#") and path.suffix != ".md":
            continue
        file_part, _, anchor = target.partition("#")
        if file_part.startswith(REPO_LINK):  # the docs site's link to a file of the repository (docs/hooks)
            resolved = (ROOT / unquote(file_part.removeprefix(REPO_LINK))).resolve()
            file_part = "repo"
        else:
            resolved = path if not file_part else (path.parent / unquote(file_part)).resolve()
        if not file_part.startswith("/") and not resolved.exists():
            problems.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and resolved.is_file() and anchor.lower() not in anchors(resolved):
            problems.append(f"{target}: no heading makes #{anchor}")
    return problems


def test_the_link_checker_finds_a_missing_file_and_a_missing_anchor(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# Title\n\n## The `x` rule: why (issue 4)\n\ntext\n")
    page = tmp_path / "b.md"
    page.write_text("[ok](a.md#the-x-rule-why-issue-4) [top](#b) [gone](c.md) [bad](a.md#nope) "
                    "`[code](d.md)` [web](https://x.org/y)\n\n```\n[fenced](e.md)\n```\n\n# B\n")
    assert broken_links(page) == ["c.md: no such file", "a.md#nope: no heading makes #nope"]


@pytest.mark.parametrize("path", tracked_markdown(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(path: Path) -> None:
    assert broken_links(path) == []
