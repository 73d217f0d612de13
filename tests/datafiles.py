"""Tiny data sets in the real on-disk formats for the tests; the generators live in bench.data.fake
(`bench plan` writes its synthetic data with them too)."""
from bench.data.fake import write_cifar, write_imagefolder, write_imagenet, write_wikitext  # noqa: F401
