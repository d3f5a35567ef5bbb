"""The subcommands of the ``seglog`` command line."""
