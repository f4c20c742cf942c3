"""Record, or compare against a record, the vectors every method gives on fixed texts.

Why: a refactor of the encoder must not change a single bit of any vector (results in RESULTS.md
were computed with the old code and their cache is keyed on the code's hash).  Run it on the old
commit with ``--save``, on the new one with ``--compare``; it exits 1 on any difference.

    python benchmarks/golden_vectors.py --models-dir /work/models --save /tmp/golden-old.npz
    python benchmarks/golden_vectors.py --models-dir /work/models --compare /tmp/golden-old.npz

Cases: all-MiniLM-L6-v2 (APE: truncate, pcw, gp, rp, pi with per-document scale, apply_to all,
log-n, temperature and length decay), multilingual-e5-small (APE with offset positions, prompts),
nomic-embed-text-v1.5 (RoPE: gp, pi, ntk, yarn, selfextend; texts up to ~2.6k tokens), and the
tiny ModernBERT, Llama and JinaBERT models the tests build (seeded).  Also sigma_a of the last
layer, as ``longembed collapse`` measures it.  Takes about 3 minutes on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

from longembed import load_encoder

ROOT = Path(__file__).resolve().parents[1]
ESSAYS = ROOT.parent / "shared" / "data" / "paul_graham_essays" / "PaulGrahamEssays"


def essay_texts() -> list[str]:
    """Four texts of about 60, 400, 900 and 2,000 words, cut from the essays."""
    words = " ".join(p.read_text(encoding="utf-8") for p in sorted(ESSAYS.glob("*.txt"))[:12]).split()
    return [" ".join(words[a : a + n]) for a, n in ((0, 60), (500, 400), (3000, 900), (9000, 2000))]


def sigma_a(encoder, texts: list[str]) -> np.ndarray:
    """sigma_a of the last layer per text, through whichever API this version of longembed has."""
    if hasattr(encoder, "attention_sigma_a"):
        return np.asarray(encoder.attention_sigma_a(texts))
    from longembed.collapse.sigma import attention_sigma_a

    return np.asarray(attention_sigma_a(encoder, texts))


def cases(models_dir: Path, tiny_dir: Path):
    """(name, model, load options, encode options, texts) of every case."""
    texts = essay_texts()
    minilm, e5, nomic = (models_dir / n for n in ("all-MiniLM-L6-v2", "multilingual-e5-small", "nomic-embed-text-v1.5"))
    for method in ("truncate", "pcw", "gp", "rp", "pi"):
        options = {} if method == "truncate" else {"max_length": 2048}
        yield f"minilm-{method}", minilm, {"method": method, **options}, {}, texts[:3]
    for name, options in (
        ("gp-per-document", {"scale": "per_document"}),
        ("pi-all-logn", {"apply_to": "all", "attention_scale": "logn"}),
        ("pi-tau0.8", {"temperature": 0.8}),
        ("pi-decay", {"temperature_decay": 1.0, "temperature_reference": 256}),
    ):
        method = name.split("-")[0]
        yield f"minilm-{name}", minilm, {"method": method, "max_length": 2048, **options}, {}, texts[:3]
    for method in ("truncate", "pcw", "gp", "rp", "pi"):
        options = {} if method == "truncate" else {"max_length": 2048}
        yield f"e5-{method}", e5, {"method": method, **options}, {"prompt_name": "query"}, texts[:3]
    for method in ("truncate", "pcw", "gp", "pi", "ntk", "yarn", "selfextend"):
        options = {} if method == "truncate" else {"max_length": 4096}
        yield f"nomic-{method}", nomic, {"method": method, **options}, {"prompt_name": "document"}, [texts[0], texts[3]]
    sys.path.insert(0, str(ROOT / "tests"))
    from conftest import LO, build_tiny, words  # the tests' seeded tiny models

    tiny_texts = [words(20, seed=1), words(100, seed=2), words(110, seed=3)]
    for family, methods in (
        ("modernbert", ("gp", "pi", "ntk", "yarn", "selfextend")),
        ("llama", ("pi", "selfextend")),
        ("jina", ("native",)),
    ):
        folder = build_tiny(family, tiny_dir / family)
        for method in methods:
            pooling = {"pooling": "last"} if family == "llama" else {}
            yield f"tiny-{family}-{method}", folder, {"method": method, "max_length": 4 * LO, **pooling}, {}, tiny_texts


def compute(models_dir: Path) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    with tempfile.TemporaryDirectory() as tiny:
        for name, model, load_options, encode_options, texts in cases(models_dir, Path(tiny)):
            encoder = load_encoder(model, **load_options)
            out[name] = encoder.encode(texts, batch_size=2, **encode_options)
            out[name + "/raw"] = encoder.encode(texts[:2], normalize_embeddings=False, **encode_options)
            if name in ("minilm-pi", "minilm-pcw", "nomic-selfextend", "tiny-jina-native"):
                out[name + "/sigma_a"] = sigma_a(encoder, texts[:2])
            print(f"{name}: {out[name].shape}", flush=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models-dir", type=Path, required=True, help="folder built by materialize.py")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--save", type=Path, help="write the vectors to this .npz")
    action.add_argument("--compare", type=Path, help="compare with this .npz; exit 1 on any difference")
    args = parser.parse_args()
    vectors = compute(args.models_dir)
    if args.save:
        np.savez(args.save, **vectors)
        print(f"saved {len(vectors)} arrays to {args.save}")
        return 0
    old = dict(np.load(args.compare))
    differ = [k for k in sorted(set(old) | set(vectors)) if k not in old or k not in vectors
              or old[k].shape != vectors[k].shape or not np.array_equal(old[k], vectors[k])]
    for key in differ:
        a, b = old.get(key), vectors.get(key)
        detail = "missing" if a is None or b is None else f"max |diff| {np.abs(a - b).max():.3g}"
        print(f"DIFFERENT {key}: {detail}")
    print(f"{len(vectors) - len(differ)} of {len(set(old) | set(vectors))} arrays bit-for-bit identical")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
