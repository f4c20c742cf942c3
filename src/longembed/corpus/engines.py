"""How a corpus can be embedded: the engines of ``longembed embed DIR``.

Apart from the modules that use them so that the command line can list them (``--help``) without
importing pyarrow, ray or the encoder.
"""

#: local: this process; ray: a pool of Ray actors (this machine or a cluster).
ENGINES = ("local", "ray")
