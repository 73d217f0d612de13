"""The one exception type the command line turns into a one-line message and exit status 2."""


class BenchError(ValueError):
    """Bad input from a person: the message names the bad value and what is allowed."""
