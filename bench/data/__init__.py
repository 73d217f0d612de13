"""Data sets the tasks train on (MNIST-1D, digits, synthetic convex problems, CIFAR-10, WikiText-2,
ImageNet) behind ``load_dataset``, and ``WorkerBatches`` to deal them to n workers."""
from .base import DATASETS, ClassificationData, LanguageData, SyntheticData, load_dataset
from . import cifar10, digits, imagenet, mnist1d, synthetic, wikitext2  # noqa: F401  (importing registers the loaders)
from .imagenet import ImageFolderData, ImageFolderDataset
from .partition import WorkerBatches

__all__ = [
    "DATASETS", "ClassificationData", "LanguageData", "SyntheticData", "ImageFolderData",
    "ImageFolderDataset", "load_dataset", "WorkerBatches",
]
