"""The server's overflow names (``longembed.overflow``): what happens to an input longer than Lo.

Apart from the modules that use them so that the command line can list them (``--help``) without
importing the encoder and the web stack.
"""

from longembed.overflow import overflow_names

#: extend (run it with the extension method, up to Lt), truncate (cut it to Lo), error (refuse the
#: request), then the policies' own names (truncate_to_max, truncate_to_window, error_over_window).
OVERFLOW_POLICIES = overflow_names("server")
