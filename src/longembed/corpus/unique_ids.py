"""Ids are unique across a corpus, not only within a shard: an id found in two shards is an error that
names both places, before anything is embedded.

The vectors of a corpus are looked up by id; the same id in two shards would be written twice, with
two different vectors, and which one a reader gets would depend on file order.  The ids of a shard
already embedded (its output current) come from the output's id column, which is cheap; the others are
read from the shard.  A shard whose documents cannot be read is left to fail on its own when it is
embedded (with the error that names its bad line); its ids up to that line still count.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from longembed.corpus.shards import Shard, ShardReader
from longembed.corpus.writer import read_ids
from longembed.errors import UserError


def check_unique_ids(
    pending: Iterable[Shard],
    done: Iterable[tuple[Shard, Path]],
    text_field: str = "text",
    id_field: str = "id",
    unit: str | None = None,
) -> None:
    """A ValueError naming both places of the first id that two shards share (``unit``: how text shards are
    split, as :class:`~longembed.corpus.shards.ShardReader` takes it)."""
    sources: list[tuple[Shard, Iterator[str]]] = [(s, _output_ids(target)) for s, target in done]
    sources += [(s, _shard_ids(s, text_field, id_field, unit)) for s in pending]
    sources.sort(key=lambda source: source[0].name)
    owner: dict[str, int] = {}
    for index, (shard, ids) in enumerate(sources):
        for doc_id in ids:
            first = owner.setdefault(doc_id, index)
            if first != index:
                other = sources[first][0]
                raise UserError(
                    f"id {doc_id!r} is in two shards: {_where(other, doc_id, text_field, id_field, unit)} and "
                    f"{_where(shard, doc_id, text_field, id_field, unit)}; ids key the vectors and must be unique across "
                    "the corpus: rename or remove one of them"
                )


def _output_ids(target: Path) -> Iterator[str]:
    yield from read_ids(target)


def _shard_ids(shard: Shard, text_field: str, id_field: str, unit: str | None) -> Iterator[str]:
    """The shard's ids, as far as the shard reads (its own error is reported when it is embedded)."""
    try:
        for _, doc_id in ShardReader(shard, text_field, id_field, unit).ids():
            yield doc_id
    except ValueError:
        return


def _where(shard: Shard, doc_id: str, text_field: str, id_field: str, unit: str | None) -> str:
    """The file and line (or row) of ``doc_id`` in ``shard``."""
    try:
        for where, found in ShardReader(shard, text_field, id_field, unit).ids():
            if found == doc_id:
                return where
    except ValueError:
        pass
    return str(shard.path)
