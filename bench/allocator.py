"""The C allocator of a command-line process: freed memory kept for the next allocation.

glibc's malloc serves every request above 32 MB (and, by default, many smaller ones) with a fresh ``mmap`` and
unmaps it when it is freed. A tensor of the state's size made anew every round (|x| for top-k, QSGD's
uniforms and levels, a gathered batch) then page-faults on every 4 kB page it touches: at n = 64, d = 10⁶ a
[n, d] float32 temporary is 65,536 faults, which took top-k's Choco round from about 240 to 430 ms on this
2-core machine (docs/performance.md, b). ``keep_freed_memory`` has malloc take large blocks from its heap too
(``M_MMAP_MAX`` = 0) and keep what is freed there (``M_TRIM_THRESHOLD`` at its maximum), so the next round's
temporary reuses pages already mapped. The peak resident memory is unchanged (a process that frees a block
and asks for it again holds it once); what the process freed is returned to the system when it exits, not
before. A command-line entry point (``python -m bench``, a dist rank and its fork server) calls it; a library
caller keeps its own allocator settings. Nothing where the C library has no ``mallopt`` (not glibc)."""
from __future__ import annotations

M_TRIM_THRESHOLD = -1
M_MMAP_MAX = -4
_applied = False


def keep_freed_memory() -> bool:
    """Set glibc's malloc as above for this process (and what it forks); whether it was set."""
    global _applied
    if _applied:
        return True
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    _applied = bool(mallopt(M_MMAP_MAX, 0)) and bool(mallopt(M_TRIM_THRESHOLD, 2**31 - 1))
    return _applied
