from .cli import main

if __name__ == "__main__":  # not when a forked rank's preparation imports the parent's main module
    from .quick_exit import finish

    finish(main())  # the exit handlers, then no teardown of torch (bench/quick_exit.py)
