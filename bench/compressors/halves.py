"""Row work split in two halves, one on a helper thread: numpy releases the GIL inside its loops, so the two halves
of a CPU pass over independent rows run at once on two cores (random-k's subsets, top-k's candidates)."""
from __future__ import annotations

import threading
from typing import Callable


def in_halves(work: Callable[[int, int], None], rows: int, split: bool) -> None:
    """``work(lo, hi)`` over rows [0, rows): the first half on a helper thread (a thread per call: no pool to
    outlive a fork) and the rest on this one where ``split`` and there are two rows or more, else all here. A
    failure on the helper is raised here, after both halves have stopped."""
    if not split or rows < 2:
        work(0, rows)
        return
    failed: list[BaseException] = []

    def first_half() -> None:
        try:
            work(0, rows // 2)
        except BaseException as err:  # re-raised on the calling thread
            failed.append(err)

    helper = threading.Thread(target=first_half)
    helper.start()
    try:
        work(rows // 2, rows)
    finally:
        helper.join()
    if failed:
        raise failed[0]
