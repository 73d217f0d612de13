"""Helpers of the hostile-input tests (test_bad_input, test_links_and_paths, test_yaml_and_names,
test_analysis_damaged_files): the one-line refusal every bad input must end in, and an alias bomb."""
from __future__ import annotations


def run_cli(main, argv: list[str], capsys) -> tuple[int, str, str]:
    """(status, stdout, stderr) of the command-line entry point ``main(argv)`` in this process (``bench.cli.main``,
    ``analysis.cli.main``): a refusal of argparse itself and ``--help`` end in SystemExit, whose code is the status;
    any other exception escapes and fails the test."""
    try:
        status = main(argv)
    except SystemExit as stop:
        status = stop.code
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def assert_refused(status, err, *words) -> str:
    """Exit 2, one line on stderr, no traceback, and every word of ``words`` in that line (returned)."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert status == 2 and "Traceback" not in err, err
    assert len(lines) == 1, err
    for word in words:
        assert str(word) in lines[0], (word, lines[0])
    return lines[0]


def bomb(levels: int = 9) -> str:
    """A "billion laughs" YAML value: 9 aliases per level, 9^levels strings once expanded."""
    parts, prev = ['&a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]'], "a0"
    for k in range(1, levels):
        parts.append(f"&a{k} [" + ",".join([f"*{prev}"] * 9) + "]")
        prev = f"a{k}"
    return "[" + ", ".join(parts) + "]"
