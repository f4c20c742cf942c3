"""mkdocs hook: links to files of the repository outside docs/ (``[RESULTS.md](repo:RESULTS.md)``).

mkdocs checks links between pages; a file such as RESULTS.md or results/ lives beside docs/, where
it cannot look.  A ``repo:PATH`` link is checked here instead: a PATH that does not exist in the
repository fails the build (so ``mkdocs build --strict`` catches a moved artifact), and an existing
one becomes a link into the repository's web view when ``repo_url`` is set in mkdocs.yml, else the
path itself, as code (the site never links to nowhere).
"""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.exceptions import PluginError

REPO_LINK = re.compile(r"\[(?P<text>[^\]]+)\]\(repo:(?P<path>[^)#\s]+)(?P<anchor>#[^)\s]*)?\)")


def on_page_markdown(markdown, page, config, files):
    root = Path(config.config_file_path).parent
    base = (config.repo_url or "").rstrip("/")

    def resolve(match: re.Match) -> str:
        path = match["path"].rstrip("/")
        target = root / path
        if not target.exists():
            raise PluginError(f"{page.file.src_path}: repo:{path} does not exist in the repository")
        if not base:
            return f"`{path}`" if match["text"].strip("`") == path else f"{match['text']} (`{path}`)"
        kind = "tree" if target.is_dir() else "blob"
        return f"[{match['text']}]({base}/{kind}/main/{path}{match['anchor'] or ''})"

    return REPO_LINK.sub(resolve, markdown)
