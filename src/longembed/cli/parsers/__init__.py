"""One module per subcommand: its flags, built from light imports only (see ``longembed.cli.main``)."""
