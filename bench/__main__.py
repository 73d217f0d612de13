from .startup import hold

hold()  # no cyclic collection while the command's modules import (bench/startup.py); released before its work
from .cli import main  # noqa: E402

if __name__ == "__main__":
    from .quick_exit import finish

    finish(main())  # the exit handlers, then no teardown of torch (bench/quick_exit.py)
