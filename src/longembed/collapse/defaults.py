"""The collapse study's default lengths and sample sizes (``longembed collapse``, ``run_collapse``).

Apart from the modules that use them so that the command line can list them (``--help``) without
importing torch.
"""

#: Token lengths of the long-text buckets.
DEFAULT_LENGTHS: tuple[int, ...] = (128, 256, 512, 1024, 2048, 4096)
#: Edges of the short-text buckets, in tokens (0-100, 100-200, ...).
DEFAULT_SHORT_EDGES: tuple[int, ...] = (0, 100, 200, 300, 400, 500)
#: Texts embedded per bucket.
DEFAULT_TEXTS_PER_BUCKET = 32
#: Texts per bucket whose attention sigma_a is computed (costly: one n x n spectrum per layer view).
DEFAULT_SIGMA_A_TEXTS = 8
