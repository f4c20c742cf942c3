"""trafilatura vs inscriptis on real HTML pages: headings kept, navigation leaked, words, seconds.

Why longembed.documents reads HTML with inscriptis (see its module docstring).  Pages: a ``mkdocs build``
of this site (``mkdocs build -d /tmp/docsite``) and Debian's Texinfo and DocBook manuals under
/usr/share/doc.  Run: ``python benchmarks/html_readers.py [/tmp/docsite]`` (needs trafilatura too).
"""

from __future__ import annotations

import glob
import re
import sys
import time
from pathlib import Path

import lxml.html
import trafilatura
from inscriptis import Inscriptis
from inscriptis.model.config import ParserConfig

from longembed.documents import read_document

RULES = {f"h{i}": ["h"] for i in range(1, 7)}


def pages(site: str) -> list[str]:
    found = sorted(glob.glob(f"{site}/*/*/index.html"))[:6] + sorted(glob.glob("/usr/share/doc/libffi8/html/*.html"))[:3]
    return found + [p for p in ["/usr/share/doc/base-passwd/users-and-groups.html"] if Path(p).is_file()]


def main() -> None:
    site = sys.argv[1] if len(sys.argv) > 1 else "/tmp/docsite"
    seconds = {"trafilatura": 0.0, "inscriptis": 0.0}
    for page in pages(site):
        html = Path(page).read_text(encoding="utf-8")
        tree = lxml.html.fromstring(html)
        headings = len(tree.xpath("//h1|//h2|//h3|//h4|//h5|//h6"))
        start = time.perf_counter()
        xml = trafilatura.extract(html, output_format="xml", include_tables=True, favor_recall=True) or ""
        middle = time.perf_counter()
        converter = Inscriptis(lxml.html.fromstring(html), ParserConfig(annotation_rules=RULES))
        converter.get_text()
        end = time.perf_counter()
        seconds["trafilatura"] += middle - start
        seconds["inscriptis"] += end - middle
        ours = read_document(page)
        words = len(re.sub("<[^>]+>", " ", xml).split())
        print(f"{page[-45:]:45s} headings {headings:2d}: trafilatura {len(re.findall('<head', xml)):2d}, "
              f"inscriptis {len(converter.get_annotations()):2d}, longembed {len(ours.locations):2d}; words: "
              f"trafilatura {words:5d}, longembed {len(ours.text.split()):5d}; "
              f"'Skip to content' in trafilatura {'Skip to content' in xml}")
    print({name: round(value, 3) for name, value in seconds.items()})


if __name__ == "__main__":
    main()
