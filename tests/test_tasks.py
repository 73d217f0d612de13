"""Every task builds, deals batches and gives per-worker gradients; vectorised == loop gradients."""
import math

import pytest
import torch

from bench.errors import BenchError
from bench.tasks import TASKS, TaskSetup, make_task

from datafiles import write_cifar, write_imagefolder, write_wikitext


def setup_for(name, tmp_path, n=3, batch=4, **options):
    root = None
    data = "shuffle"
    if name.startswith("cifar10"):
        write_cifar(tmp_path / "cifar-10-batches-py", per_batch=12)
        root = str(tmp_path)
    elif name.startswith("wikitext2"):
        write_wikitext(tmp_path / "wt2")
        root, data = str(tmp_path / "wt2"), "split"
        options = {"emb": 16, "hidden": 16, "num_layers": 2, "bptt": 5, **options}
    elif name.startswith("imagenet"):
        write_imagefolder(tmp_path / "imagenet")
        root, batch, n = str(tmp_path / "imagenet"), 2, 2
        options = {"size": 32, **options}
    elif name.startswith("mnist1d"):
        options = {"n_train": 200, "n_test": 100, **options}
    return TaskSetup(n_workers=n, batch_size=batch, data=data, seed=0, data_root=root, options=options)


# every registered task must appear here, so a new task is exercised automatically
NAMES = sorted(TASKS.names())


@pytest.mark.parametrize("name", NAMES)
def test_task_gives_gradients_and_metrics(name, tmp_path):
    task = make_task(name, setup_for(name, tmp_path))
    x = task.init_params()
    assert x.shape == (task.setup.n_workers, task.d) and sum(task.segments) == task.d
    if name != "consensus":
        assert torch.equal(x[0], x[-1])  # every worker starts from the same model
    task.start_epoch(0)
    batch = next(iter(task.batches(0)))
    if not task.has_gradient:
        return
    grads, losses = task.gradients(x, batch)
    assert grads.shape == x.shape and torch.isfinite(grads).all() and grads.abs().sum() > 0
    assert losses.shape == (task.setup.n_workers,) and torch.isfinite(losses).all()
    metrics = task.evaluate(x[0], task.averaged_buffers())
    assert set(task.metric_names) <= set(metrics)
    assert math.isnan(metrics["test_acc"]) or 0.0 <= metrics["test_acc"] <= 1.0
    # a plain gradient step on worker 0's own batch lowers worker 0's loss on that batch
    stepped = x - 0.05 * grads
    assert task.gradients(stepped, batch)[1][0] < losses[0] + 1e-6 or name == "wikitext2-lstm"


@pytest.mark.parametrize("name", ["mnist1d-mlp", "mnist1d-cnn", "lsq", "logreg"])
def test_vectorised_and_loop_gradients_agree(name, tmp_path):
    fast = make_task(name, setup_for(name, tmp_path, n=4))
    slow = make_task(name, setup_for(name, tmp_path, n=4, vectorize=False))
    assert fast.vectorized and not slow.vectorized
    x = fast.init_params() + 0.01 * torch.randn(4, fast.d, generator=torch.Generator().manual_seed(0))
    batch = next(iter(fast.batches(0)))
    g_fast, l_fast = fast.gradients(x, batch)
    g_slow, l_slow = slow.gradients(x, batch)
    torch.testing.assert_close(l_fast, l_slow, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(g_fast, g_slow, rtol=1e-4, atol=1e-6)


def test_batchnorm_models_keep_per_worker_statistics_and_average_them(tmp_path):
    task = make_task("cifar10-resnet8", setup_for("cifar10-resnet8", tmp_path, n=3))
    assert not task.vectorized and task.buffers.shape[0] == 3
    x = task.init_params()
    task.gradients(x, next(iter(task.batches(0))))
    # each worker saw its own batch, so its running statistics moved differently
    assert not torch.equal(task.buffers[0], task.buffers[1])
    torch.testing.assert_close(task.averaged_buffers(), task.buffers.mean(0))
    mask = task.decay_mask()
    bn = sum(p.numel() for m in task.model.modules() if isinstance(m, torch.nn.BatchNorm2d) for p in m.parameters())
    assert int((mask == 0).sum()) == bn and mask.numel() == task.d


def test_cifar_augmentation_is_seeded_and_changes_batches(tmp_path):
    task = make_task("cifar10-resnet8", setup_for("cifar10-resnet8", tmp_path, n=2))
    batch = next(iter(task.batches(0)))
    a, _ = task.fetch(batch)
    b, _ = task.fetch(batch)
    torch.testing.assert_close(a, b)
    plain = task.train_x[batch[2]]
    assert not torch.equal(a, plain)  # crops/flips applied


def test_language_task_carries_hidden_state_and_reports_perplexity(tmp_path):
    task = make_task("wikitext2-lstm", setup_for("wikitext2-lstm", tmp_path))
    x = task.init_params()
    task.start_epoch(0)
    batches = iter(task.batches(0))
    task.gradients(x, next(batches))
    h_after_one = [h[0].clone() for h in task.hidden]
    assert all(h.abs().sum() > 0 for h in h_after_one)
    metrics = task.evaluate(x[0])
    assert metrics["test_ppl"] == pytest.approx(math.exp(metrics["test_loss"]))
    # an untrained model over a 52-word vocabulary is close to uniform
    assert 20 < metrics["test_ppl"] < 120


def test_language_task_needs_split_data(tmp_path):
    setup = setup_for("wikitext2-lstm", tmp_path)
    with pytest.raises(BenchError, match="split"):
        make_task("wikitext2-lstm", TaskSetup(**{**setup.__dict__, "data": "shuffle"}))


def test_unknown_task_option_is_refused():
    with pytest.raises(BenchError, match="depth.*allowed"):
        make_task("digits-mlp", TaskSetup(n_workers=2, batch_size=4, options={"depth": 3}))
