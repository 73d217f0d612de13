"""The one exception type the command line turns into a one-line message and exit status 2."""


class BenchError(ValueError):
    """Bad input from a person: the message names the bad value and what is allowed."""


def out_of_memory(err: BaseException) -> bool:
    """Sizes (data, model, dim) beyond this machine, as numpy (MemoryError) or torch (RuntimeError) says
    it: the command line turns it into one line and status 2, like bad input."""
    return isinstance(err, MemoryError) or (isinstance(err, RuntimeError) and "can't allocate memory" in str(err))
