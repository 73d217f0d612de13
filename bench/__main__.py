from .cli import main

if __name__ == "__main__":
    from .quick_exit import finish

    finish(main())  # the exit handlers, then no teardown of torch (bench/quick_exit.py)
