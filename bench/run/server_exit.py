"""Imported by the fork server of a dist launch alone (bench/run/dist.py ``PRELOAD``): when its launcher exits,
the server ends without tearing torch down (bench/quick_exit.py), half a second the launcher's caller would
otherwise wait on the pipes the server shares. A rank forked from it ends at ``os._exit`` and never runs it."""
from ..quick_exit import end_at_exit

end_at_exit()
