"""Imported by the fork server of a dist launch alone (bench/run/dist.py ``PRELOAD``): when its launcher exits,
the server ends without tearing torch down (bench/quick_exit.py), half a second the launcher's caller would
otherwise wait on the pipes the server shares. A rank forked from it ends at ``os._exit`` and never runs it. The
server also ends when its launcher does, however that ends (``stop_with_parent``), and its ranks stop with it."""
import signal

from ..quick_exit import end_at_exit
from .dist import stop_with_parent

end_at_exit()
stop_with_parent(signal.SIGKILL)  # the server ends with its launcher, and so its ranks (bench/run/dist.py)
