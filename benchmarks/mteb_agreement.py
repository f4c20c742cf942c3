"""Do longembed's own benchmark and mteb agree? Score one model, method and task with both.

The same encoder object is scored twice on the same local data: by ``evaluate_model`` (longembed's
runner: cosine similarity, trec_eval-style nDCG@10) and by ``mteb.evaluate`` on the task's corpus,
queries and qrels wrapped as an in-memory mteb retrieval task (``longembed.integrations.mteb``).
Both give queries the model's query prompt and documents its document prompt.  Prints both nDCG@10
(percent) and their difference; exit status 1 if they differ by more than --tolerance points.
--max-documents keeps only the first documents and the queries they answer (a quicker check; both
evaluators then score that same subset).

    python benchmarks/mteb_agreement.py --model /work/models/all-MiniLM-L6-v2 --method pi \
        --max-length 2048 --data-dir ../shared/data --task needle --length 256

Nothing is downloaded (HF_HUB_OFFLINE=1 and HF_DATASETS_OFFLINE=1 unless set); longembed's embedding
cache is not used, and mteb's results go to a fresh folder, so both really encode.  Known
differences that can move the last digits: mteb strips each document's surrounding whitespace, and
the two order documents with exactly equal scores differently.  Tasks whose queries search only
their own context (qmsum_passages) have no mteb equivalent and are refused.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import datasets  # noqa: E402 - after the offline switches
import mteb  # noqa: E402

from longembed import load_encoder  # noqa: E402
from longembed.evaluation.runner import evaluate_model  # noqa: E402
from longembed.integrations.mteb import LongEmbedMTEBModel, retrieval_task  # noqa: E402
from longembed.tasks import RetrievalData, Task, TaskMetadata, get_task  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA_DIR = REPO.parent / "shared" / "data"
#: The largest difference (nDCG@10 points, 0-100 scale) the issue allows.
TOLERANCE = 0.1


@dataclass(frozen=True)
class Agreement:
    """nDCG@10 (percent) of one task from both evaluators."""

    task: str
    length: int | None
    documents: int
    queries: int
    longembed: float
    mteb: float

    @property
    def difference(self) -> float:
        return abs(self.longembed - self.mteb)

    def summary(self) -> str:
        where = self.task if self.length is None else f"{self.task}@{self.length}"
        return (f"{where} ({self.documents} documents, {self.queries} queries): nDCG@10 longembed "
                f"{self.longembed:.4f}, mteb {self.mteb:.4f}, difference {self.difference:.4f} points")


@dataclass(frozen=True)
class FirstDocuments:
    """A task cut to its first ``max_documents`` documents and the queries they answer."""

    task: Task
    max_documents: int

    @property
    def metadata(self) -> TaskMetadata:
        return self.task.metadata

    def load(self, data_dir: Path | None, length: int | None = None) -> RetrievalData:
        data = self.task.load(data_dir, length)
        corpus = dict(list(data.corpus.items())[: self.max_documents])
        qrels = {q: {d: r for d, r in judged.items() if d in corpus} for q, judged in data.qrels.items()}
        qrels = {q: judged for q, judged in qrels.items() if any(r > 0 for r in judged.values())}
        return RetrievalData(corpus, {q: data.queries[q] for q in qrels}, qrels).validate()


def longembed_ndcg(
    encoder: Any, task: Task, length: int | None, data_dir: Path, output_dir: Path, batch_size: int
) -> float:
    """nDCG@10 (percent) from longembed's runner, uncached."""
    name = task.metadata.name
    results = evaluate_model(
        encoder, [task], data_dir=data_dir, lengths=None if length is None else [length],
        output_dir=output_dir, batch_size=batch_size, use_cache=False, estimate=False,
        show_progress=False, log=None,
    )
    if name not in results.tasks:
        raise RuntimeError(f"longembed did not score {name}: {results.skipped.get(name, 'no reason given')}")
    return results.tasks[name].metrics["ndcg@10"]


def mteb_ndcg(encoder: Any, name: str, data: RetrievalData, output_dir: Path, batch_size: int) -> float:
    """nDCG@10 (percent) from ``mteb.evaluate`` on ``data`` as an in-memory retrieval task."""
    if data.query_contexts is not None:
        raise ValueError(f"{name}: each query searches only its own context, which mteb cannot express")
    task = retrieval_task(name, data.corpus, data.queries, data.qrels)
    result = mteb.evaluate(
        LongEmbedMTEBModel(encoder, batch_size=batch_size), task, cache=mteb.ResultCache(output_dir),
        overwrite_strategy="always", co2_tracker=False, show_progress_bar=False,
        # show_progress_bar=False reaches encode_kwargs only when none are given: say it again there
        encode_kwargs={"batch_size": batch_size, "show_progress_bar": False},
    )
    if result.exceptions:
        raise RuntimeError(f"mteb failed on {name}: {result.exceptions}")
    (task_result,) = result.task_results
    ((scores,),) = task_result.scores.values()
    return 100.0 * scores["ndcg_at_10"]


def compare(
    encoder: Any,
    task: str,
    length: int | None,
    data_dir: Path,
    work_dir: Path,
    batch_size: int = 16,
    max_documents: int | None = None,
) -> Agreement:
    """Score ``task`` (at ``length`` for passkey/needle; only its first ``max_documents`` documents
    if given) with both evaluators; their files go under work_dir."""
    task_object = get_task(task) if max_documents is None else FirstDocuments(get_task(task), max_documents)
    data = task_object.load(data_dir, length)
    name = f"longembed-{task}" + ("" if length is None else f"-{length}")
    return Agreement(
        task=task,
        length=length,
        documents=len(data.corpus),
        queries=len(data.queries),
        longembed=longembed_ndcg(encoder, task_object, length, data_dir, work_dir / "longembed", batch_size),
        mteb=mteb_ndcg(encoder, name, data, work_dir / "mteb", batch_size),
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="default", help="model folder (default: packaged all-MiniLM-L6-v2)")
    parser.add_argument("--method", default="truncate")
    parser.add_argument("--max-length", type=int, default=None)
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--task", default="needle")
    parser.add_argument("--length", type=int, default=None, help="passkey/needle length (default 256)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-documents", type=int, default=None, help="score only the first N documents")
    parser.add_argument("--tolerance", type=float, default=TOLERANCE, help="allowed difference in points")
    parser.add_argument("--output", type=Path, default=None, help="keep both runs' files here (default: temporary)")
    args = parser.parse_args(argv)
    if args.length is None and get_task(args.task).metadata.lengths is not None:
        args.length = 256
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    datasets.disable_progress_bars()  # mteb maps its in-memory datasets once per run
    encoder = load_encoder(args.model, method=args.method, max_length=args.max_length)
    with tempfile.TemporaryDirectory(prefix="mteb-agreement-") as scratch:
        work_dir = args.output or Path(scratch)
        agreement = compare(encoder, args.task, args.length, args.data_dir, work_dir, args.batch_size,
                            args.max_documents)
    print(agreement.summary())
    if agreement.difference > args.tolerance:
        print(f"DISAGREE: more than {args.tolerance} points apart")
        return 1
    print(f"agree within {args.tolerance} points")
    return 0


if __name__ == "__main__":
    sys.exit(main())
