"""WikiText-2 from local token files: whitespace tokens, ``<eos>`` after every line, train vocabulary."""
from __future__ import annotations

import io
from pathlib import Path

import torch

from ..cache import cache_path
from ..errors import BenchError
from ..files import read_regular_text
from .base import DATASETS, LanguageData

SPLITS = {"train": "wiki.train.tokens", "valid": "wiki.valid.tokens", "test": "wiki.test.tokens"}
LAYOUT = "ROOT/{wiki.train.tokens,wiki.valid.tokens,wiki.test.tokens} or the same under ROOT/wikitext-2/"
EOS, UNK = "<eos>", "<unk>"


def find_token_dir(root: Path) -> Path:
    for candidate in (root, root / "wikitext-2"):
        if all((candidate / f).is_file() for f in SPLITS.values()):
            return candidate
    raise BenchError(f"wikitext2 data not found under {root}; expected {LAYOUT}")


def read_tokens(path: Path) -> list[str]:
    tokens: list[str] = []
    try:
        with io.StringIO(read_regular_text(path), newline=None) as handle:  # lines as open() splits them
            for line in handle:
                # Blank lines also get <eos>, as in PyTorch's word-language-model example the paper follows.
                tokens.extend(line.split())
                tokens.append(EOS)
    except UnicodeDecodeError as err:
        raise BenchError(f"{path} is not UTF-8 text (it holds the byte 0x{err.object[err.start]:02x}: {err.reason}); "
                         f"expected {LAYOUT}") from None
    return tokens


def build_vocab(tokens: list[str]) -> list[str]:
    """Tokens in order of first appearance (dict keeps insertion order); ``<unk>`` appended if absent."""
    vocab = list(dict.fromkeys(tokens))
    if UNK not in vocab:
        vocab.append(UNK)
    return vocab


def encode(tokens: list[str], index: dict[str, int]) -> torch.Tensor:
    unk = index[UNK]
    return torch.tensor([index.get(t, unk) for t in tokens], dtype=torch.int64)


@DATASETS.register("wikitext2")
def load_wikitext2(root: str | None, seed: int) -> LanguageData:
    folder = find_token_dir(Path(root).expanduser() if root else cache_path("wikitext2"))
    tokens = {split: read_tokens(folder / name) for split, name in SPLITS.items()}
    vocab = build_vocab(tokens["train"])
    index = {word: i for i, word in enumerate(vocab)}
    return LanguageData(
        train=encode(tokens["train"], index), valid=encode(tokens["valid"], index),
        test=encode(tokens["test"], index), vocab=vocab, name="wikitext2",
    )
