"""``longembed search``: rank an index's documents for a question, or write a run file for many.

    longembed search --index my-index "who founded Y Combinator?" -k 5
    longembed search --index my-index "who founded Y Combinator?" --json
    longembed search --index my-index --queries my-task/queries.jsonl --run out.trec
"""

from __future__ import annotations

import argparse
import json

import longembed.search as search  # a run file's modules (the task readers) load only for --queries
from longembed.errors import UserError
from longembed.search.index import SearchResponse, open_index

#: characters of a passage shown in the plain-text answer
SHOWN_CHARS = 240


def run(args: argparse.Namespace) -> int:
    if (args.queries is None) == (args.query is None):
        raise UserError("give a question, or --queries FILE --run OUT")
    if (args.queries is None) != (args.run is None):
        raise UserError("--queries and --run go together (a run file of every query)")
    if args.k is not None and args.k < 1:
        raise UserError(f"-k must be at least 1, got {args.k}")
    index = open_index(args.index, device=args.device)
    if args.queries is not None:
        k = search.RUN_DEPTH if args.k is None else args.k
        count = search.write_run(index, args.queries, args.run, k=k, exact=args.exact)
        print(f"wrote {args.run}: {count} queries, up to {k} documents each")
        return 0
    response = index.search(args.query, k=10 if args.k is None else args.k, path_prefix=args.path_prefix,
                            exact=args.exact, passages=args.passages)
    print(json.dumps(response.to_dict(), ensure_ascii=False) if args.json else plain_text(response))
    return 0


def plain_text(response: SearchResponse) -> str:
    facts = response.index
    lines = [f"{facts['strategy']} over {facts['documents']} documents ({facts['chunks']} chunks): "
             f"{len(response.results)} results for {response.query!r}"]
    for result in response.results:
        systems = ", ".join(f"{name} #{s['rank']}" if s["rank"] is not None else f"{name} -"
                            for name, s in result.systems.items())
        passage = " ".join(result.passage.text.split())
        shown = passage[:SHOWN_CHARS] + ("..." if len(passage) > SHOWN_CHARS else "")
        lines.append(f"{result.rank:>3}. {result.id}  score {result.score:.4f}  ({systems})")
        where = f"{result.passage.location}, " if result.passage.location else ""
        lines.append(f"     [{where}characters {result.passage.start}-{result.passage.end}] {shown}")
    return "\n".join(lines)
