from .cli import main

if __name__ == "__main__":  # not when a forked rank's preparation imports the parent's main module
    raise SystemExit(main())
