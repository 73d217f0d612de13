"""Imported first by the fork server of a dist launch, and by it alone (bench/run/dist.py ``PRELOAD``): the server
imports torch and the training code with the cyclic collector held (bench/startup.py); each rank forked from it
releases it as its run starts (bench/run/launch.py)."""
from ..startup import hold

hold()
