"""Decentralized deep learning with compressed communication: everything that trains and measures."""

__version__ = "0.1.0"
