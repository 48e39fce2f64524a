"""The one exception type whose message is meant for the user, not a traceback."""


class UserError(Exception):
    """Bad input or environment: the CLI prints the message on one line and exits non-zero.

    Messages quote what users give (a column name, a line of a file), which may hold line breaks:
    they are written as escapes, so the message stays the one line the CLI promises."""

    def __init__(self, message: object = "", *args: object):
        text = str(message)
        for character, escape in LINE_BREAKS.items():
            text = text.replace(character, escape)
        super().__init__(text, *args)


LINE_BREAKS = {
    "\r": "\\r",
    "\n": "\\n",
    "\x0b": "\\x0b",
    "\x0c": "\\x0c",
    "\x1c": "\\x1c",
    "\x1d": "\\x1d",
    "\x1e": "\\x1e",
    "\x85": "\\x85",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}  # every character str.splitlines() breaks at
