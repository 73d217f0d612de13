"""The model zoo: parameter counts from closed forms (those the paper's MB column rests on among them), the LSTM's
tying, its trainability on a tiny batch, and make_model's errors. Shapes, the weight-decay mask and a step that lowers
the loss on every task's model: test_tasks.py's test_every_task_example_builds_and_steps; the LSTM's state and its two
paths: test_lstm_vectorised.py."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from bench.errors import BenchError
from bench.models import PAPER_VOCAB, WIKITEXT2_VOCAB, make_model, resnet_cifar


def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())  # parameters() yields a tied tensor once


def lstm_lm_params(vocab: int, emb: int, hidden: int, layers: int, tied: bool) -> int:
    # PyTorch's LSTM layer: W_ih (4H × in), W_hh (4H × H) and two bias vectors b_ih, b_hh (4H each).
    lstm = sum(4 * hidden * ((emb if i == 0 else hidden) + hidden) + 8 * hidden for i in range(layers))
    embedding = vocab * emb
    decoder = (0 if tied else hidden * vocab) + vocab
    return embedding + lstm + decoder


def test_resnet_counts_and_shapes():
    assert n_params(resnet_cifar(8)) == 78_042 and n_params(resnet_cifar(20)) == 272_474
    # ResNet-20 = the zero-padding ("option A") ResNet-20's 269,722 parameters plus two 1×1-conv
    # shortcuts with their BatchNorm: 16·32 + 2·32 and 32·64 + 2·64.
    model = resnet_cifar(20)
    shortcut = sum(p.numel() for name, p in model.named_parameters() if "shortcut" in name)
    assert shortcut == (16 * 32 + 2 * 32) + (32 * 64 + 2 * 64)
    assert n_params(model) - shortcut == 269_722
    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d)]
    assert len(convs) == 19 + 2 and all(c.bias is None for c in convs)
    assert n_params(resnet_cifar(20, num_classes=100)) == 272_474 + 90 * 65
    assert n_params(make_model("resnet50")) == 25_557_032
    # Only the classifier depends on num_classes: 2049 parameters per class.
    assert n_params(make_model("resnet50", num_classes=10)) == 25_557_032 - 990 * 2049


def test_lstm_paper_count_needs_tying_and_a_28869_word_vocabulary():
    paper = lstm_lm_params(PAPER_VOCAB, 650, 650, 3, tied=True)
    assert paper == 28_949_319 and round(paper / 1e6, 2) == 28.95
    assert n_params(make_model("lstm", vocab_size=PAPER_VOCAB)) == paper
    # WikiText-2's standard 33,278-word vocabulary gives 31.82 M tied, 53.45 M untied: not the paper's.
    for tied, millions in [(True, 31.82), (False, 53.45)]:
        expected = lstm_lm_params(WIKITEXT2_VOCAB, 650, 650, 3, tied)
        assert round(expected / 1e6, 2) == millions
    assert n_params(make_model("lstm", vocab_size=50, emb=8, hidden=12, num_layers=2, tie_weights=False)) == \
        lstm_lm_params(50, 8, 12, 2, tied=False)


def test_the_language_model_fits_a_tiny_batch():
    """Adam from a seeded start: the next-token loss on a batch ends five times below where it began (the task
    test's gradient step, which every other model's task takes, leaves the LSTM out)."""
    torch.manual_seed(0)
    model = make_model("lstm", vocab_size=12, emb=16, hidden=16, num_layers=2, dropout=0.0)
    tokens = torch.randint(0, 12, (2, 9))
    x, y = tokens[:, :-1], tokens[:, 1:]  # the next token of a sequence from each one before it

    def loss_fn():
        return F.cross_entropy(model(x)[0].flatten(0, 1), y.flatten())  # forward returns (logits, state)

    opt = torch.optim.Adam(model.parameters(), lr=3e-2)
    first = loss_fn().item()
    for _ in range(80):
        loss = loss_fn()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss_fn().item() < first / 5


@pytest.mark.parametrize("name, options, line", [
    ("vgg", {}, "unknown model 'vgg'; known: linear, mlp, cnn1d, resnet8, resnet20, resnet50, lstm"),
    ("resnet20", {"depth": 32}, "model 'resnet20' has no option 'depth'; allowed: num_classes"),
    ("mlp", {"hiden": (10,)}, "model 'mlp' has no option 'hiden'; allowed: in_features, hidden, num_classes"),
    ("linear", {}, "model 'linear' needs option 'in_features'; allowed: in_features, bias"),
    ("resnet8", {"num_classes": 0}, "num_classes 0 must be a positive integer"),
    ("resnet50", {"num_classes": 0}, "num_classes=0 must be a positive integer"),
    ("mlp", {"hidden": (10, -3)}, "hidden width=-3 must be a positive integer"),
    ("lstm", {"vocab_size": 10, "dropout": 1.5}, "dropout=1.5 must be a number in [0, 1)"),
    ("cnn1d", {"channels": True}, "channels=True must be a positive integer"),
    ("lstm", {"vocab_size": 20, "emb": 8, "hidden": 16}, "tie_weights needs emb == hidden, got emb=8, hidden=16; "
                                                         "set them equal or tie_weights=False"),
])
def test_make_model_errors_name_the_bad_value_and_the_allowed_ones(name, options, line):
    with pytest.raises(BenchError) as info:
        make_model(name, **options)
    assert str(info.value) == line


def test_a_cifar_resnet_s_depth_is_6k_plus_2():
    for depth in (0, 2, 7, 9, 21, -4, 20.0, "20", True):
        with pytest.raises(BenchError, match=r"is not of the form 6k \+ 2"):
            resnet_cifar(depth)
