"""The model zoo: parameter counts from closed forms (those the paper's MB column rests on among them), shapes,
LSTM state and tying, the weight-decay mask, trainability on a tiny batch, and make_model's errors."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from bench.errors import BenchError
from bench.models import PAPER_VOCAB, WIKITEXT2_VOCAB, make_model, no_weight_decay_mask, resnet_cifar, uses_batchnorm


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
    model = make_model("resnet50")
    assert n_params(model) == 25_557_032
    model.eval()
    with torch.no_grad():
        assert model(torch.randn(1, 3, 64, 64)).shape == (1, 1000)
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


@pytest.mark.parametrize("unrolled", [False, True])  # nn.LSTM fused, or the recurrence the vectorised path maps
def test_lstm_shapes_and_state_carries_over(unrolled):
    torch.manual_seed(0)
    model = make_model("lstm", vocab_size=30, emb=16, hidden=16, num_layers=2, dropout=0.3).eval()
    tokens = torch.randint(0, 30, (3, 10))
    with torch.no_grad():
        whole, (h, c) = model(tokens, unrolled=unrolled)
        first, state = model(tokens[:, :4], unrolled=unrolled)
        second, state2 = model(tokens[:, 4:], state, unrolled=unrolled)
        fused = model(tokens)
    assert whole.shape == (3, 10, 30) and h.shape == c.shape == (2, 3, 16)
    torch.testing.assert_close(torch.cat([first, second], dim=1), whole)
    torch.testing.assert_close(state2, (h, c))
    torch.testing.assert_close((whole, (h, c)), fused, rtol=1e-5, atol=1e-6)
    # A fresh state is what forward assumes when given none.
    with torch.no_grad():
        again, _ = model(tokens, model.init_state(3))
    torch.testing.assert_close(again, whole)


def test_weight_tying_shares_storage_and_untied_does_not():
    tied = make_model("lstm", vocab_size=20, emb=8, hidden=8, num_layers=1)
    assert tied.decoder.weight is tied.encoder.weight  # one tensor: what the encoder learns, the decoder uses
    untied = make_model("lstm", vocab_size=20, emb=8, hidden=8, num_layers=1, tie_weights=False)
    assert untied.decoder.weight.data_ptr() != untied.encoder.weight.data_ptr()
    with pytest.raises(BenchError, match="emb == hidden"):
        make_model("lstm", vocab_size=20, emb=8, hidden=16)


def test_small_model_shapes():
    assert make_model("mlp")(torch.randn(5, 40)).shape == (5, 10)
    assert make_model("mlp", in_features=64, hidden=(), num_classes=10)(torch.randn(5, 8, 8)).shape == (5, 10)
    assert n_params(make_model("mlp")) == 40 * 100 + 100 + 100 * 100 + 100 + 100 * 10 + 10
    assert make_model("cnn1d")(torch.randn(5, 40)).shape == (5, 10)
    assert make_model("linear", in_features=7)(torch.randn(5, 7)).shape == (5,)
    assert make_model("resnet8")(torch.randn(2, 3, 32, 32)).shape == (2, 10)


@pytest.mark.parametrize("name, has_bn", [("resnet20", True), ("resnet8", True), ("resnet50", True),
                                          ("mlp", False), ("cnn1d", False), ("lstm", False)])
def test_no_weight_decay_mask_marks_exactly_batchnorm(name, has_bn):
    options = {"vocab_size": 20, "emb": 8, "hidden": 8} if name == "lstm" else {}
    model = make_model(name, **options)
    assert uses_batchnorm(model) is has_bn
    bn_ids = {id(p) for m in model.modules() if isinstance(m, nn.BatchNorm2d) for p in m.parameters()}
    mask = no_weight_decay_mask(model)
    params = list(model.parameters())
    assert len(mask) == len(params)
    assert mask == [id(p) in bn_ids for p in params]
    assert any(mask) is has_bn
    # BN parameters are the 1-D scale/shift vectors; convolution kernels stay decayed.
    assert all(p.dim() == 1 for p, m in zip(params, mask) if m)


def _classes(shape):
    return torch.randn(16, *shape), torch.arange(16) % 10


def _tokens():  # the next token of a sequence from each one before it
    tokens = torch.randint(0, 12, (2, 9))
    return tokens[:, :-1], tokens[:, 1:]


def _lm_loss(out, target):
    return F.cross_entropy(out[0].flatten(0, 1), target.flatten())  # forward returns (logits, state)


# d > n for the linear model: both of its problems are exactly (or separably) fittable
FITS = {"mlp": ({}, lambda: _classes((40,)), F.cross_entropy, 60, 1e-2, 10),
        "cnn1d": ({}, lambda: _classes((40,)), F.cross_entropy, 60, 1e-2, 10),
        "resnet8": ({}, lambda: _classes((3, 32, 32)), F.cross_entropy, 15, 1e-2, 2),
        "linear-lsq": ({"in_features": 12}, lambda: (torch.randn(8, 12), torch.randn(8)), F.mse_loss, 60, 5e-2, 10),
        "linear-logistic": ({"in_features": 12}, lambda: (torch.randn(8, 12), (torch.rand(8) < 0.5).float()),
                            F.binary_cross_entropy_with_logits, 60, 5e-2, 10),
        "lstm": ({"vocab_size": 12, "emb": 16, "hidden": 16, "num_layers": 2, "dropout": 0.0}, _tokens, _lm_loss, 80,
                 3e-2, 5)}


@pytest.mark.parametrize("case", FITS)
def test_every_model_fits_a_tiny_batch(case):
    """Adam from a seeded start: the loss on the batch ends ``factor`` times below where it began."""
    options, data, loss_fn, steps, lr, factor = FITS[case]
    torch.manual_seed(0)
    model = make_model(case.split("-")[0], **options)
    x, y = data()
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    first = loss_fn(model(x), y).item()
    for _ in range(steps):
        loss = loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss_fn(model(x), y).item() < first / factor


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
])
def test_make_model_errors_name_the_bad_value_and_the_allowed_ones(name, options, line):
    with pytest.raises(BenchError) as info:
        make_model(name, **options)
    assert str(info.value) == line


def test_a_cifar_resnet_s_depth_is_6k_plus_2():
    for depth in (0, 2, 7, 9, 21, -4, 20.0, "20", True):
        with pytest.raises(BenchError, match=r"is not of the form 6k \+ 2"):
            resnet_cifar(depth)
    with pytest.raises(BenchError, match="num_classes"):
        resnet_cifar(20, num_classes=0)
