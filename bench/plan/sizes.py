"""Data sizes for the plan: the real data sets' sizes, synthetic stand-ins in the real on-disk format
just large enough for one step of a shape, and a run's steps and evaluation cost at the real sizes.

``DataModel`` follows the tasks (SupervisedTask: WorkerBatches over the training set minus a validation
split, evaluation on the test set, a training subset and the validation split; images read from disk:
the test set only; LanguageTask: contiguous shards read in BPTT windows, evaluation on the test text,
a training prefix and the shipped validation text); tests/test_plan.py checks it against the tasks.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from ..data.fake import write_cifar, write_imagenet, write_wikitext
from ..data.partition import WorkerBatches

WORDS_PER_LINE = 12  # synthetic WikiText lines: 12 words and <eos>


@dataclass(frozen=True)
class DataSizes:
    train: int  # images, or tokens for text
    test: int
    valid: int = 0  # a shipped validation split (WikiText-2); image tasks hold theirs out of train


# The real data sets (WikiText-2 tokens counted with an <eos> per line, as the loader reads them).
REAL = {
    "cifar10": DataSizes(train=50_000, test=10_000),
    "wikitext2": DataSizes(train=2_088_628, test=245_569, valid=217_646),
    "imagenet": DataSizes(train=1_281_167, test=50_000),
}


def dataset_of(task_name: str) -> str:
    """The data set a task reads (``wikitext2-lstm`` -> ``wikitext2``)."""
    from ..tasks import TASKS

    return getattr(TASKS.get(task_name), "dataset", task_name.split("-")[0])


def write_synthetic(dataset: str, root: Path, nodes: int, batch_size: int, bptt: int) -> Path | None:
    """Synthetic ``dataset`` under ``root`` with enough training data for every worker to fill a batch
    (None for data sets the task generates itself). Steps past the first epoch start the next one."""
    need = nodes * batch_size
    if dataset == "cifar10":
        # 5 training batches; every worker's shard must hold a batch even with a validation split held out
        return write_cifar(root / "cifar-10-batches-py", per_batch=math.ceil(1.5 * need / 5) + 1, test_size=1000)
    if dataset == "imagenet":
        return write_imagenet(root / "imagenet", train=need + nodes, val=64, classes=10)
    if dataset == "wikitext2":
        from ..models import WIKITEXT2_VOCAB

        tokens = need * (bptt + 2)  # every shard holds one BPTT window
        # every word of the vocabulary appears (so the model has its real size); the loader adds <eos> and <unk>
        return write_wikitext(root / "wikitext-2", lines=math.ceil(tokens / (WORDS_PER_LINE + 1)) + 1,
                              vocab=WIKITEXT2_VOCAB - 2, words_per_line=WORDS_PER_LINE, eval_lines=200,
                              cover_vocab=True)
    return None


def sizes_of(task) -> DataSizes:
    """The sizes of the data a built task read (before any validation hold-out)."""
    data = task.data
    if hasattr(data, "vocab"):
        return DataSizes(len(data.train), len(data.test), len(data.valid))
    if hasattr(data, "train_x"):
        return DataSizes(len(data.train_y), len(data.test_y))
    return DataSizes(len(data.train), len(data.test))


def _held_out(size: int, val_fraction: float) -> int:
    return max(1, round(val_fraction * size)) if val_fraction > 0 else 0


@dataclass(frozen=True)
class DataModel:
    """How a task's steps and evaluations scale with its data, at the given ``sizes``."""

    kind: str  # text | memory (images or vectors held in memory) | disk (images read lazily)
    sizes: DataSizes
    bptt: int = 0
    train_eval: int = 0  # training samples (tokens) evaluated for the training loss

    @classmethod
    def of(cls, task, sizes: DataSizes) -> "DataModel":
        from ..tasks.language import LanguageTask
        from ..tasks.supervised import TRAIN_EVAL_SAMPLES

        if isinstance(task, LanguageTask):
            return cls("text", sizes, bptt=task.bptt, train_eval=int(task.options["train_eval_tokens"]))
        return cls("disk" if getattr(task, "lazy", False) else "memory", sizes, train_eval=TRAIN_EVAL_SAMPLES)

    def steps_per_epoch(self, nodes: int, batch_size: int, val_fraction: float) -> int:
        if self.kind == "text":
            return max(0, ((self.sizes.train // nodes) // batch_size - 1) // self.bptt)
        return WorkerBatches.steps_for(self.sizes.train - _held_out(self.sizes.train, val_fraction), nodes, batch_size)

    def evaluated_units(self, val_fraction: float) -> int:
        """What one evaluation of one model reads (samples or tokens); its cost is proportional to it."""
        s = self.sizes
        if self.kind == "text":
            return s.test + min(self.train_eval, s.train) + (s.valid if val_fraction > 0 else 0)
        if self.kind == "disk":
            return s.test
        held = _held_out(s.train, val_fraction)
        return s.test + min(self.train_eval, s.train - held) + held
