"""The one exception type whose message is meant for the user, not a traceback."""


class UserError(Exception):
    """Bad input or environment: the CLI prints the message on one line and exits non-zero."""
