"""Loader for the LongEmbed hub dataset ``dwzhu/LongEmbed``, from a local copy or from the hub.

Layout of the hub dataset (its dataset card; mteb's ``LEMB*Retrieval`` tasks read it the same way):
one folder per task config, ``narrativeqa``, ``summ_screen_fd``, ``qmsum``, ``2wikimqa``, ``passkey``,
``needle``, each with three jsonl files (the "splits" of the config):

* ``corpus.jsonl``: ``{"doc_id": ..., "text": ...}``
* ``queries.jsonl``: ``{"qid": ..., "text": ...}``
* ``qrels.jsonl``: ``{"qid": ..., "doc_id": ...}`` (relevance 1; a ``score`` field is used if present)

For ``passkey`` and ``needle`` every row also has ``context_length`` (256 ... 32768): the eight lengths
share the files and are told apart by that field (mteb turns them into the splits ``test_256`` ...).

Local copies are looked for at ``<data_dir>/LongEmbed/<config>/`` (e.g. made with
``huggingface-cli download dwzhu/LongEmbed --repo-type dataset --local-dir <data_dir>/LongEmbed``) and,
failing that, at ``<data_dir>/<config>/`` if it holds ``corpus.*``. Each file may be ``.jsonl``,
``.jsonl.gz`` or ``.parquet`` (parquet needs pandas with pyarrow). Field names of the BEIR/mteb style
(``_id``/``id``, ``query-id``, ``corpus-id``, ``score``) are accepted too.

With ``download=True`` and no local copy, the config's folder is fetched with ``huggingface_hub`` at
the revision mteb pins. Off by default: without a network the hub client retries for ~20 s per file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from longembed.errors import MissingExtraError, MissingFileError, UserError
from longembed.tasks.base import RetrievalData, TaskDataMissing, TaskMetadata, check_length, iter_jsonl

HUB_REPO = "dwzhu/LongEmbed"
#: The revision mteb's LongEmbed tasks pin.
HUB_REVISION = "6e346642246bfb4928c560ee08640dc84d074e8c"
#: Folder under ``data_dir`` that holds a local snapshot of the hub dataset.
LOCAL_SUBDIR = "LongEmbed"
SPLITS = ("corpus", "queries", "qrels")
_SUFFIXES = (".jsonl", ".jsonl.gz", ".parquet")
#: The id fields a corpus row may use (LongEmbed's first, then BEIR/mteb's), and a queries row.
DOC_ID_FIELDS = ("doc_id", "corpus-id", "corpus_id", "_id", "id")
QUERY_ID_FIELDS = ("qid", "query-id", "query_id", "_id", "id")
#: The fields of a qrels row that name its query and its document.
QRELS_QUERY_FIELDS = ("qid", "query-id", "query_id")
QRELS_DOC_FIELDS = ("doc_id", "corpus-id", "corpus_id")


def hub_source(config: str) -> str:
    """The 'where to get it' text of a hub task."""
    return (
        f"Hugging Face dataset {HUB_REPO}, config {config!r}: put its folder {config}/ (corpus.jsonl, "
        f"queries.jsonl, qrels.jsonl) at <data_dir>/{LOCAL_SUBDIR}/{config}/, e.g. with `huggingface-cli "
        f"download {HUB_REPO} --repo-type dataset --include '{config}/*' "
        f"--local-dir <data_dir>/{LOCAL_SUBDIR}`"
        ", or pass download=True to fetch it from the hub."
    )


def _open_rows(path: Path) -> Iterator[dict[str, Any]]:
    if path.name.endswith(".parquet"):
        try:
            import pandas as pd
        except ImportError as exc:  # pragma: no cover - pandas is normally installed
            raise MissingExtraError(f"reading {path} needs pandas (and pyarrow)") from exc
        yield from pd.read_parquet(path).to_dict(orient="records")
        return
    for _, row in iter_jsonl(path):
        yield row


def _split_file(config_dir: Path, split: str) -> Path:
    for suffix in _SUFFIXES:
        path = config_dir / f"{split}{suffix}"
        if path.exists():
            return path
    raise MissingFileError(f"{config_dir} has no {split}.jsonl / {split}.jsonl.gz / {split}.parquet")


def id_field(row: dict[str, Any], names: tuple[str, ...], where: Path | str) -> str:
    """The first of the fields ``names`` that ``row`` holds (not null), as text; a ValueError naming
    ``where`` (a file, or file:line) if it holds none."""
    for name in names:
        if name in row and row[name] is not None:
            return str(row[name])
    raise UserError(f"{where}: a row has none of the fields {names}: {sorted(row)}")


def _rows(config_dir: Path, split: str, length: int | None) -> Iterator[tuple[Path, dict[str, Any]]]:
    path = _split_file(config_dir, split)
    for row in _open_rows(path):
        if length is not None:
            if "context_length" not in row:
                raise UserError(f"{path}: rows have no context_length field, cannot select length {length}")
            if int(row["context_length"]) != length:
                continue
        yield path, row


def load_hub_config(config_dir: Path | str, length: int | None = None) -> RetrievalData:
    """Read one config folder of the hub layout; for passkey/needle keep ``context_length == length``."""
    config_dir = Path(config_dir)
    corpus = {id_field(r, DOC_ID_FIELDS, p): str(r["text"]) for p, r in _rows(config_dir, "corpus", length)}
    queries = {
        id_field(r, QUERY_ID_FIELDS, p): str(r["text"]) for p, r in _rows(config_dir, "queries", length)
    }
    qrels: dict[str, dict[str, int]] = {}
    for path, row in _rows(config_dir, "qrels", length):
        qid = id_field(row, QRELS_QUERY_FIELDS, path)
        doc_id = id_field(row, QRELS_DOC_FIELDS, path)
        score = row.get("score", 1)
        qrels.setdefault(qid, {})[doc_id] = 1 if score is None else int(score)
    if not corpus:
        where = f" with context_length {length}" if length is not None else ""
        raise UserError(f"{config_dir}: no documents{where}")
    return RetrievalData(corpus=corpus, queries=queries, qrels=qrels).validate()


def find_local_config(data_dir: Path | str | None, config: str) -> Path | None:
    """The local folder of ``config`` under ``data_dir`` (see the module docstring), or None."""
    if data_dir is None:
        return None
    for candidate in (Path(data_dir) / LOCAL_SUBDIR / config, Path(data_dir) / config):
        if any((candidate / f"corpus{suffix}").exists() for suffix in _SUFFIXES):
            return candidate
    return None


def download_config(config: str, revision: str = HUB_REVISION) -> Path:  # pragma: no cover - needs network
    """Fetch one config folder of ``dwzhu/LongEmbed`` into the Hugging Face cache; return its path."""
    from huggingface_hub import snapshot_download

    root = snapshot_download(
        repo_id=HUB_REPO, repo_type="dataset", revision=revision, allow_patterns=[f"{config}/*"]
    )
    return Path(root) / config


class HubTask:
    """A LongEmbed task read from the hub layout (a local snapshot, or the hub with ``download=True``)."""

    def __init__(
        self,
        metadata: TaskMetadata,
        config: str,
        download: bool = False,
        revision: str = HUB_REVISION,
    ) -> None:
        self.metadata = replace(metadata, source=hub_source(config))
        self.config = config
        self.download = download
        self.revision = revision

    def load(self, data_dir: Path | None, length: int | None = None) -> RetrievalData:
        """Read the config's files (one length for passkey/needle); TaskDataMissing if there are none."""
        check_length(self.metadata, length)
        config_dir = find_local_config(data_dir, self.config)
        if config_dir is None and self.download:
            try:
                config_dir = download_config(self.config, self.revision)
            except Exception as exc:  # pragma: no cover - needs network
                raise TaskDataMissing(
                    f"task {self.metadata.name!r}: download from {HUB_REPO} failed ({exc}). "
                    f"{self.metadata.source}"
                ) from exc
        if config_dir is None:
            looked = f"under {data_dir}" if data_dir is not None else "(no data directory given)"
            raise TaskDataMissing(
                f"task {self.metadata.name!r}: no local copy of {HUB_REPO}/{self.config} {looked}. "
                f"{self.metadata.source}"
            )
        return load_hub_config(config_dir, length)


def hub_task_builder(metadata: TaskMetadata) -> Callable[..., HubTask]:
    """How to build a task that exists only in the hub layout (NarrativeQA, SummScreenFD, 2WikiMultihopQA):
    ``build(download=False)`` reads ``metadata.hub_config`` (``download=True`` fetches it if absent)."""
    if metadata.hub_config is None:
        raise UserError(f"task {metadata.name!r} declares no hub_config to read")
    config = metadata.hub_config

    def build(download: bool = False) -> HubTask:
        return HubTask(metadata, config, download=download)

    return build
