"""The server's overflow policies: what happens to an input longer than the encoder's max_length.

Apart from the modules that use them so that the command line can list them (``--help``) without
importing the encoder and the web stack.
"""

#: extend (run it with the extension method), truncate (cut it to Lo), error (refuse the request).
OVERFLOW_POLICIES = ("extend", "truncate", "error")
