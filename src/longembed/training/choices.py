"""The training commands' choices: precisions, tunable methods, Jina recipe stages, pair sources.

Apart from the modules that use them so that the command line can list them (``--help``) without
importing torch, transformers or sentence-transformers.
"""

#: Trainer precisions (fp16 needs CUDA).
PRECISIONS = ("fp32", "bf16", "fp16")
#: Extension methods whose new position rows ``longembed tune`` trains (LongEmbed Fig. 6a: PI > RP).
TUNABLE_METHODS = ("pi", "rp")
#: What ``longembed tune`` trains the new rows for (``training.tune_objectives``).
TUNE_OBJECTIVES = ("contrastive", "distill", "both")
#: The Jina v2 recipe's stages: MLM pre-training, pairs, hard negatives.
STAGES = ("mlm", "pairs", "negatives")
#: Benchmark-safe sources of training pairs (``training.data``).
SOURCES = ("squad", "hotpotqa")
#: What ``longembed retrofit`` can put in place of a BERT's position table (bidirectional ALiBi, Jina's slopes).
RETROFIT_POSITIONS = ("alibi",)
