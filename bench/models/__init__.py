"""Neural network models the tasks train."""
from .resnet_cifar import resnet_cifar

__all__ = ["resnet_cifar"]
