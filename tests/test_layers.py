"""The package's import graph: layers point one way, no cycles, no imports hidden inside functions.

core (config, loading, quantization, inputs, overflow, encoder and its model runner and its threads, pooling,
batching, chunking, extension, models, and
the package plumbing: lazy exports, library-noise filters, file permissions, durable renames, UTF-8 text
files, document readers, weight-file checks, dataclass fields that are flags) <- export; core <- tasks
<- evaluation <- report / collapse / advice / training <- cli (training also builds on export); core <- serving
(the HTTP server) <- cli; advice / search / serving <- judging (the judging page) <- cli; core <- integrations (mteb, LangChain adapters); core <- corpus (embedding corpora of shards, locally or on Ray) <- cli; ``results`` is plain data that every layer above core may use (its strategies are ``retrieval``'s).
"""

from __future__ import annotations

import ast
from pathlib import Path

import longembed

ROOT = Path(longembed.__file__).resolve().parent
CORE = {
    "config", "loading", "quantization", "precision", "inputs", "overflow", "encoder", "encoder_protocol", "pooling",
    "batching", "model_runner", "threads",
    "chunking", "extension", "models", "lazy", "noise", "permissions", "textfiles", "weight_files", "flag_fields",
    "sentence_transformers_folder", "durable", "diskspace", "file_hashes", "locations", "errors", "documents",
}
#: Which top-level parts each part may import (besides itself and the package root).
ALLOWED = {
    "__init__": CORE,  # the package root exports the encoder API
    **{part: CORE for part in CORE},
    "results": {"permissions", "errors", "retrieval"},  # a run's and an advice's strategy is a retrieval.Strategy
    "tasks": CORE,
    "retrieval": CORE,
    "evaluation": CORE | {"tasks", "results", "retrieval"},
    "report": {"tasks", "results", "errors"},
    "collapse": CORE | {"tasks", "results", "evaluation", "report"},
    "advice": CORE | {"tasks", "results", "evaluation", "report", "retrieval"},
    "export": CORE,
    "training": CORE | {"tasks", "results", "evaluation", "export", "retrieval"},
    "search": CORE | {"retrieval", "results", "tasks", "corpus"},
    "serving": CORE | {"search", "retrieval"},
    "integrations": CORE,
    "judging": CORE | {"tasks", "results", "retrieval", "advice", "search", "serving"},
    "corpus": CORE | {"results"},
    "cli": CORE | {"tasks", "results", "evaluation", "report", "collapse", "advice", "export", "training", "serving",
            "corpus", "search", "retrieval", "judging"},
}


def _part(path: Path) -> str:
    return path.relative_to(ROOT).parts[0].removesuffix(".py")


def _imports(path: Path, source: str | None = None) -> list[tuple[str, int, bool]]:
    """(imported longembed part, line, inside a function) of every import in a module (or in ``source``
    placed at ``path``)."""
    tree = ast.parse(path.read_text() if source is None else source)
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            inside |= {id(n) for n in ast.walk(node) if isinstance(n, ast.Import | ast.ImportFrom)}
    found = []
    rel = path.relative_to(ROOT).parts
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = ("longembed", *rel[: len(rel) - node.level])
                modules = [node.module] if node.module else [a.name for a in node.names]
                names = [".".join((*base, m)) for m in modules]
            elif node.module:
                names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "longembed" and len(parts) > 1:
                found.append((parts[1], node.lineno, id(node) in inside))
    return found


def test_every_part_is_known() -> None:
    """A new top-level part must be placed in a layer here before it can be used."""
    parts = {_part(p) for p in ROOT.rglob("*.py")}
    assert parts <= set(ALLOWED), sorted(parts - set(ALLOWED))


def test_layers_point_one_way_and_no_import_is_hidden_in_a_function() -> None:
    """Every import of another part is allowed by the layers, and none sits inside a function."""
    wrong, hidden = [], []
    for path in sorted(ROOT.rglob("*.py")):
        part = _part(path)
        for target, line, in_function in _imports(path):
            where = f"{path.relative_to(ROOT)}:{line} imports {target}"
            if target not in (part, "__init__", "__version__") and target not in ALLOWED.get(part, set()):
                wrong.append(where)
            if in_function:
                hidden.append(where)
    assert not wrong, "imports against the layers:\n" + "\n".join(wrong)
    assert not hidden, "imports inside functions:\n" + "\n".join(hidden)


def test_no_import_cycle_between_parts() -> None:
    """The graph of parts (package root excluded) has no cycle."""
    graph: dict[str, set[str]] = {}
    for path in ROOT.rglob("*.py"):
        part = _part(path)
        graph.setdefault(part, set()).update(t for t, _, _ in _imports(path) if t not in (part, "__init__"))

    def reaches(start: str, goal: str, seen: frozenset[str] = frozenset()) -> bool:
        return any(n == goal or (n not in seen and reaches(n, goal, seen | {n})) for n in graph.get(start, ()))

    cycles = sorted(f"{a} <-> {b}" for a in graph for b in graph[a] if reaches(b, a))
    assert not cycles, cycles


def test_the_layer_rule_catches_a_wrong_way_import() -> None:
    """The checker itself: a core module importing an outer part inside a function is found as such."""
    source = "import torch\n\ndef f():\n    from longembed.report import tables\n    from . import config\n"
    found = _imports(ROOT / "encoder.py", source)
    assert found == [("report", 4, True), ("config", 5, True)]
    assert "report" not in ALLOWED["encoder"]


def test_tests_mirror_the_package():
    """tests/<part>/ holds the tests of src/longembed/<part>/ (as sentence-transformers' tests do); the
    core modules' tests sit in tests/ itself.  A folder named after no package would hide its tests."""
    tests = Path(__file__).resolve().parent
    packages = {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()}
    folders = {p.name for p in tests.iterdir() if p.is_dir() and not p.name.startswith((".", "__"))}
    assert folders <= packages, f"tests folders that mirror no package: {sorted(folders - packages)}"
    for folder in folders:
        for test_file in (tests / folder).rglob("test_*.py"):
            assert test_file.parent == tests / folder, f"{test_file} is nested deeper than its package's folder"
