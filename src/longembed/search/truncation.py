"""The documents a truncating strategy cut, and by how many tokens: ``INDEX/truncated.json`` (document id ->
tokens past the model's window, never read), kept up to date by every build, so a cut is said in the
build's summary and the index's facts, not only by a tokenizer warning.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

#: the index folder's record of the documents cut (a local index; one on object storage keeps none)
TRUNCATED_FILE = "truncated.json"
#: characters tokenized at a time when counting the tokens of a long text's rest (cut at whitespace)
COUNT_BLOCK_CHARS = 100_000
#: blocks a fast tokenizer counts in one call (bounded memory: about 1.6 MB of text and its encodings)
COUNT_BLOCKS_AT_ONCE = 16


def tokens_after(tokenizer: Any, text: str, start: int) -> int:
    """The tokens of ``text[start:]`` (no special tokens), counted a block of about
    :data:`COUNT_BLOCK_CHARS` characters at a time, each block ending at whitespace (a word is never split
    between two blocks), so a long text is never tokenized whole.  A fast (Rust) tokenizer counts
    :data:`COUNT_BLOCKS_AT_ONCE` blocks per call on every core, without offsets or Python lists (a 200 MB
    rest is about 50M tokens: the per-block Python path took 14 minutes on two busy cores)."""
    count = _rust_counter(tokenizer)
    total, batch = 0, []
    for block in _blocks(text, start):
        batch.append(block)
        if len(batch) == COUNT_BLOCKS_AT_ONCE:
            total, batch = total + count(batch), []
    return total + (count(batch) if batch else 0)


def _blocks(text: str, start: int) -> Iterator[str]:
    """``text[start:]`` in blocks of at most :data:`COUNT_BLOCK_CHARS` characters, each ending at whitespace
    where the block has any."""
    position = start
    while position < len(text):
        end = min(len(text), position + COUNT_BLOCK_CHARS)
        if end < len(text):
            space = max(text.rfind(" ", position, end), text.rfind("\n", position, end))
            end = space + 1 if space > position else end
        yield text[position:end]
        position = end


def _rust_counter(tokenizer: Any) -> Callable[[list[str]], int]:
    """How to count a list of blocks' tokens: the Rust tokenizer's ``encode_batch_fast`` (tokenizers >= 0.21)
    when ``tokenizer`` has one, else the tokenizer's own call, block by block."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None and hasattr(backend, "encode_batch_fast"):
        return lambda blocks: sum(len(e) for e in backend.encode_batch_fast(blocks, add_special_tokens=False))
    return lambda blocks: sum(len(tokenizer(b, add_special_tokens=False, verbose=False)["input_ids"])
                              for b in blocks)


def read_truncated(index: str | Path) -> dict[str, int]:
    """id -> tokens cut, of ``index`` ({} when none was cut, or an index on object storage; a damaged
    record is said in one warning and read as unknown: it says what was cut, searches do not need it)."""
    target = Path(index) / TRUNCATED_FILE
    if "://" in str(index) or not target.is_file():
        return {}
    try:
        return {str(k): int(v) for k, v in json.loads(target.read_text(encoding="utf-8")).items()}
    except (ValueError, TypeError, AttributeError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        warnings.warn(f"{target}: damaged ({exc}); which documents a truncating build cut is unknown until a "
                      "build with --rebuild", stacklevel=2)
        return {}


def update_truncated(index: str | Path, cut: Mapping[str, int], dropped: Iterable[str], fresh: bool) -> dict[str, int]:
    """The index's record after a build: the earlier one (none when the table was ``fresh``ly created)
    without the ``dropped`` documents (deleted, changed, re-embedded), with this build's ``cut`` added;
    written to :data:`TRUNCATED_FILE` and returned."""
    record = {} if fresh else read_truncated(index)
    for doc_id in dropped:
        record.pop(doc_id, None)
    record.update(cut)
    if "://" not in str(index):
        target = Path(index) / TRUNCATED_FILE
        partial = target.with_suffix(".json.partial")
        partial.write_text(json.dumps(dict(sorted(record.items())), indent=1, ensure_ascii=False) + "\n",
                           encoding="utf-8")
        partial.replace(target)
    return record


def truncation_facts(record: Mapping[str, int]) -> dict[str, int]:
    """{"documents": cut, "tokens": tokens not read in all, "largest": the largest cut}."""
    return {"documents": len(record), "tokens": sum(record.values()), "largest": max(record.values(), default=0)}


def truncation_text(facts: Mapping[str, int], window: int | None) -> str:
    """"3 documents cut at the model's 512 tokens: 9,120 tokens not read (the largest cut 7,000) ..."
    (empty when none was cut)."""
    if not facts.get("documents"):
        return ""
    return (f"{facts['documents']:,} document(s) cut at the model's {window or '?'} tokens: {facts['tokens']:,} "
            f"tokens not read (the largest cut {facts['largest']:,}); index with --granularity chunks to read "
            "every token")
