"""The ``longembed`` command line: ``main`` (the entry point and subcommand table), ``parsers/`` (each
subcommand's flags, light imports only) and one module per subcommand (what it runs)."""
