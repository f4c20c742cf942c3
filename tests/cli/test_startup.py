"""What a command costs before it does anything: imports and library noise.

Import-based, not timed (these machines are shared and noisy; the timings are in
benchmarks/RESULTS.md): help must import neither torch nor transformers, a fully cached ``eval``
rerun must not import transformers' modeling stack (nor torchao, nor read any weights), and the
known library messages must not reach stderr while other warnings still do.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from longembed import noise
from longembed.cli.main import SUBCOMMANDS, main

HEAVY = ("torch", "transformers", "numpy", "fastapi", "sentence_transformers", "datasets", "pyarrow", "ray")


def run_python(code: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter (this process has imported everything already)."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, timeout=600)


@pytest.mark.slow
@pytest.mark.parametrize("command", [None, *SUBCOMMANDS])
def test_help_imports_no_heavy_library(command: str | None) -> None:
    argv = ([command] if command else []) + ["--help"]
    done = run_python(
        "import json, sys\n"
        "from longembed.cli.main import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit as exit:\n"
        "    code = exit.code\n"
        f"print(json.dumps([code, [m for m in {HEAVY!r} if m in sys.modules]]))\n"
    )
    code, heavy = json.loads(done.stdout.strip().splitlines()[-1])
    assert code == 0, done.stderr
    assert heavy == [], f"longembed {' '.join(argv)} imported {heavy}"
    assert "usage: longembed" in done.stdout
    assert done.stderr == ""


@pytest.mark.slow
def test_cached_eval_rerun_imports_no_modeling_stack(tmp_path: Path) -> None:
    """The second, fully cached run reads no weights and imports neither transformers' modeling
    code nor torchao: it costs about an import of torch and transformers (benchmarks/RESULTS.md)."""
    # 5 queries (10 documents): what is checked is the second run's imports, not the size of the first
    args = ["eval", "--model", "default", "--method", "pi", "--max-length", "1024", "--tasks", "passkey",
            "--lengths", "256", "--queries-per-length", "5", "--output", str(tmp_path / "run"),
            "--cache-dir", str(tmp_path / "cache")]

    def probe(argv: list[str]) -> str:
        return (
            "import json, sys\n"
            "from longembed.cli.main import main\n"
            f"code = main({argv!r})\n"
            "heavy = [m for m in ('transformers.modeling_utils', 'torchao', 'bm25s', 'longembed.models.jina_bert')"
            " if m in sys.modules]\n"
            "print(json.dumps([code, heavy]))\n"
        )

    first = run_python(probe([*args, "--no-estimate"]))  # it fills the cache; the rerun estimates as a user's does
    assert json.loads(first.stdout.strip().splitlines()[-1])[0] == 0, first.stderr
    second = run_python(probe(args))
    code, heavy = json.loads(second.stdout.strip().splitlines()[-1])
    assert code == 0, second.stderr
    assert "10 documents (10 cached), 5 queries (5 cached)" in second.stdout
    assert "0 tokens to encode" in second.stdout
    assert heavy == []
    assert (tmp_path / "run" / "results.json").is_file()


@pytest.mark.slow
def test_library_noise_is_filtered_and_real_warnings_are_kept() -> None:
    """Importing the model stack with torchao installed (the test extra has it) prints nothing; a
    warning of the same loggers that is not the known noise still shows."""
    done = run_python(
        "import logging\n"
        "import longembed.noise\n"
        "longembed.noise.silence_known_library_noise()  # what the command line does first\n"
        "import torchao  # noqa: F401  (the quantization extra; transformers imports it too)\n"
        "import transformers.modeling_utils  # noqa: F401\n"
        "from longembed.encoder import load_encoder\n"
        "load_encoder('default').encode(['hello'])\n"
        "logging.getLogger('torchao').warning('torchao has a real problem')\n"
        "logging.getLogger('torch.utils._pytree').warning('pytree has a real problem')\n"
    )
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 2, done.stderr
    assert "torchao has a real problem" in lines[0] and "pytree has a real problem" in lines[1]


@pytest.mark.slow
def test_importing_longembed_leaves_other_libraries_loggers_alone() -> None:
    """A library must not change another library's logging as an import side effect (issue 44):
    the filters are attached by the command line only."""
    names = list(noise.FILTERS)
    done = run_python(
        "import json, logging\n"
        f"names = {names!r}\n"
        "before = [list(logging.getLogger(n).filters) for n in names]\n"
        "import longembed\n"
        "from longembed import load_encoder  # noqa: F401  (the lazy exports, torch and transformers)\n"
        "import longembed.encoder  # noqa: F401\n"
        "after = [list(logging.getLogger(n).filters) for n in names]\n"
        "print(json.dumps(before == after and all(not f for f in after)))\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "true"


def test_the_command_line_attaches_the_filters(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in noise.FILTERS:
        monkeypatch.setattr(logging.getLogger(name), "filters", [])
    with pytest.raises(SystemExit):
        main(["--version"])
    for name, keep in noise.FILTERS.items():
        assert keep in logging.getLogger(name).filters


def _record(logger: str, message: str, *args: object) -> logging.LogRecord:
    return logging.LogRecord(logger, logging.WARNING, __file__, 1, message, args, None)


def test_each_filter_drops_only_its_message(monkeypatch: pytest.MonkeyPatch) -> None:
    kernel = _record("torchao", "Failed to load /v/site-packages/torchao/_C_mxfp8.cpython-310-x86_64-linux-gnu.so: "
                     "Could not load this library: /v/site-packages/torchao/_C_mxfp8.cpython-310-x86_64-linux-gnu.so")
    triton = _record("torchao.kernel.intmm", "Warning: Detected no triton, on systems without Triton certain "
                     "kernels will not work")
    enum = _record("torch.utils._pytree", "%s is an Enum subclass and is now natively supported by torch.compile as "
                   "an opaque value type. Calling register_constant() on Enum subclasses is deprecated", "<enum 'X'>")
    other = _record("torchao", "Failed to load /v/site-packages/other/_C.so: Could not load this library")
    monkeypatch.setattr(noise, "_cuda_available", lambda: False)
    assert not noise.keep_torchao_record(kernel)
    assert not noise.keep_torchao_triton_record(triton)
    assert not noise.keep_pytree_record(enum)
    assert noise.keep_torchao_record(other)
    assert noise.keep_pytree_record(_record("torch.utils._pytree", "some other deprecation"))
    monkeypatch.setattr(noise, "_cuda_available", lambda: True)  # with CUDA, a failed kernel load is real
    assert noise.keep_torchao_record(kernel) and noise.keep_torchao_triton_record(triton)
    assert not noise.keep_pytree_record(enum)


NOISY_RUN = """
import json, sys
from longembed.cli.main import main
print(json.dumps([main(argv) for argv in json.loads(sys.argv[1])]))
"""


@pytest.mark.slow
def test_a_normal_run_prints_no_bm25s_debug_line_and_no_longembed_source(tmp_path: Path) -> None:
    """Issue 41: a BM25 run printed bm25s's "Building index from IDs objects" (bm25s sets its logger to DEBUG
    when imported), and longembed's warnings printed a line of longembed's own source under Python's
    ``file:line: UserWarning:``.  Captured from real commands in a fresh interpreter, as a user sees them."""
    from conftest import build_tiny, words

    from longembed.tasks import RetrievalData, write_task_dir

    documents = {f"d{i}": words(20 + 5 * i, seed=i) for i in range(5)}
    queries = {f"q{i}": " ".join(documents[f"d{i}"].split()[:4]) for i in range(5)}
    folder = write_task_dir(RetrievalData(documents, queries, {f"q{i}": {f"d{i}": 1} for i in range(5)}),
                            tmp_path / "task")
    model = build_tiny("bert", tmp_path / "bert")
    notes = tmp_path / "notes.txt"
    notes.write_text(f"{words(5, seed=1)}\n\n{words(60, seed=2)}\n")
    runs = [
        ["eval", "--model", "bm25", "--task-dir", str(folder), "--output", str(tmp_path / "bm25"),
         "--cache-dir", str(tmp_path / "cache"), "--no-estimate"],
        ["embed", str(notes), "--unit", "line", "-o", str(tmp_path / "v.npy"), "--model", str(model)],
        ["embed", str(notes), "--unit", "line", "-o", str(tmp_path / "w.npy"), "--model", str(model),
         "--method", "pi", "--max-length", "8192"],
    ]
    done = subprocess.run([sys.executable, "-c", NOISY_RUN, json.dumps(runs)], capture_output=True, text=True,
                          timeout=600)
    assert json.loads(done.stdout.splitlines()[-1]) == [0, 0, 0], done.stderr
    printed = done.stdout + done.stderr
    assert "Building index from" not in printed
    assert "warning: " in done.stderr  # the warnings still show: empty line skipped, scale factor
    assert "skipped 1 empty line(s)" in done.stderr and "the papers test scale factors up to" in done.stderr
    assert "UserWarning" not in printed and "warnings.warn" not in printed
    source_lines = {line.strip() for path in Path(noise.__file__).parent.rglob("*.py")
                    for line in path.read_text().splitlines() if len(line.strip()) > 25}
    shown = [line.strip() for line in printed.replace("\r", "\n").splitlines()]
    assert not [line for line in shown if line in source_lines]
