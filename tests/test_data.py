"""Data loaders and the per-worker partition: shapes, determinism, caching, formats, skew."""

import numpy as np
import pytest
import torch

from bench.data import WorkerBatches, load_dataset
from bench.data.cifar10 import CIFAR10_MEAN, CIFAR10_STD
from bench.errors import BenchError

from datafiles import write_cifar, write_imagefolder


# ---------------------------------------------------------------- mnist1d, digits, synthetic
def test_mnist1d_shapes_determinism_and_cache(tmp_path):
    np.random.seed(123)
    expected = np.random.rand()
    np.random.seed(123)
    a = load_dataset("mnist1d", root=str(tmp_path), seed=3, n_train=80, n_test=20)
    assert np.random.rand() == expected  # the global generator is left alone
    assert a.train_x.shape == (80, 40) and a.test_x.shape == (20, 40)
    assert a.train_x.dtype == torch.float32 and a.train_y.dtype == torch.int64
    assert set(a.train_y.tolist()) <= set(range(10)) and a.num_classes == 10
    assert len(list(tmp_path.glob("*.npz"))) == 1 and not list(tmp_path.glob(".*tmp"))
    # read back, not made again: tests/test_cache.py::test_a_data_set_made_while_a_job_waited_is_read_not_made_again
    fresh = load_dataset("mnist1d", root=str(tmp_path / "other"), seed=3, n_train=80, n_test=20)
    assert torch.equal(a.train_x, fresh.train_x)  # regenerated, same seed -> same data
    different = load_dataset("mnist1d", root=str(tmp_path), seed=4, n_train=80, n_test=20)
    assert not torch.equal(a.train_x, different.train_x)


def test_unknown_option_and_bad_sizes_are_bench_errors(tmp_path):
    with pytest.raises(BenchError, match="unknown option 'bogus'.*n_train"):
        load_dataset("mnist1d", root=str(tmp_path), bogus=1)
    with pytest.raises(BenchError, match="multiple of 10"):
        load_dataset("mnist1d", root=str(tmp_path), n_train=41, n_test=10)
    with pytest.raises(BenchError, match="unknown dataset"):
        load_dataset("mnist2d")


def test_digits_split_is_stratified_and_scaled():
    data = load_dataset("digits", seed=1)
    assert len(data.train_y) + len(data.test_y) == 1797
    assert len(data.test_y) == 360  # ceil(0.2 * 1797)
    assert 0.0 <= float(data.train_x.min()) and float(data.train_x.max()) == 1.0
    train_share = torch.bincount(data.train_y, minlength=10) / len(data.train_y)
    test_share = torch.bincount(data.test_y, minlength=10) / len(data.test_y)
    assert torch.allclose(train_share, test_share, atol=0.01)
    other = load_dataset("digits", seed=2)
    assert not torch.equal(data.test_y, other.test_y)


def test_lsq_optimum_is_least_squares_solution():
    data = load_dataset("lsq", seed=5, n_train=200, n_test=50, dim=8, noise=0.3)
    x, y = data.train_x.double(), data.train_y.double()
    grad = x.T @ (x @ data.w_opt - y) / len(y)
    assert grad.norm() < 1e-10  # normal equations hold at w_opt
    assert data.optimum_loss == pytest.approx(0.5 * float(((x @ data.w_opt - y) ** 2).mean()), rel=1e-12)
    # w* itself is worse on the training set (noise), and any perturbation is worse too
    assert 0.5 * float(((x @ data.w_star - y) ** 2).mean()) > data.optimum_loss
    assert data.num_classes == 0 and data.test_x.shape == (50, 8)


def test_logreg_optimum_is_stationary_and_labels_follow_the_model():
    data = load_dataset("logreg", seed=2, n_train=400, n_test=100, dim=5)
    x, y = data.train_x.double(), data.train_y.double()
    p = torch.sigmoid(x @ data.w_opt)
    grad = x.T @ (p - y) / len(y) + data.l2 * data.w_opt
    assert grad.norm() < 1e-9 and data.l2 == pytest.approx(1 / 400)
    assert set(data.train_y.tolist()) == {0, 1} and data.num_classes == 2
    agree = ((x @ data.w_star > 0).long() == data.train_y).double().mean()
    assert agree > 0.75  # labels come from the logistic model around w*


# ---------------------------------------------------------------- CIFAR-10
@pytest.mark.parametrize("nested", [True, False])
def test_cifar10_reads_python_batches(tmp_path, nested):
    write_cifar(tmp_path / "cifar-10-batches-py")
    root = tmp_path if nested else tmp_path / "cifar-10-batches-py"
    data = load_dataset("cifar10", root=str(root))
    assert data.train_x.shape == (50, 3, 32, 32) and data.test_x.shape == (10, 3, 32, 32)
    assert data.train_y.dtype == torch.int64 and data.num_classes == 10
    assert data.train_x.dtype == torch.uint8  # pixels stay uint8 until a batch is gathered
    first = data.as_float(data.train_x[:1])[0]
    assert first[1, 5, 7].item() == pytest.approx((1.0 - CIFAR10_MEAN[1]) / CIFAR10_STD[1], rel=1e-6)
    assert first[0, 5, 7].item() == pytest.approx(-CIFAR10_MEAN[0] / CIFAR10_STD[0], rel=1e-6)
    assert first[2, 0, 0].item() == pytest.approx(-CIFAR10_MEAN[2] / CIFAR10_STD[2], rel=1e-6)


def test_missing_or_partial_data_names_the_layout(tmp_path):
    write_cifar(tmp_path / "cifar" / "cifar-10-batches-py")
    (tmp_path / "cifar" / "cifar-10-batches-py" / "test_batch").unlink()
    (tmp_path / "wikitext").mkdir()
    (tmp_path / "wikitext" / "wiki.train.tokens").write_text("a\n")
    (tmp_path / "imagenet" / "train").mkdir(parents=True)
    for dataset, root, layout in [
            ("cifar10", "nowhere", r"cifar-10-batches-py/\{data_batch_1\.\.data_batch_5,test_batch\}"),
            ("cifar10", "cifar", "missing test_batch"),
            ("wikitext2", "wikitext", "wiki.train.tokens,wiki.valid.tokens,wiki.test.tokens"),
            ("imagenet", "imagenet", r"ROOT/train/<class>/\*\.JPEG\|jpg\|png")]:
        with pytest.raises(BenchError, match=layout):
            load_dataset(dataset, root=str(tmp_path / root))


# ---------------------------------------------------------------- WikiText-2
@pytest.mark.parametrize("subdir", ["", "wikitext-2"])
def test_wikitext2_vocab_eos_and_unk(tmp_path, subdir):
    folder = tmp_path / subdir if subdir else tmp_path
    folder.mkdir(exist_ok=True)
    (folder / "wiki.train.tokens").write_text("the cat sat\n\n = title =\nthe <unk> ran\n", encoding="utf-8")
    (folder / "wiki.valid.tokens").write_text("the dog sat\n", encoding="utf-8")
    (folder / "wiki.test.tokens").write_text("cat\n", encoding="utf-8")
    data = load_dataset("wikitext2", root=str(tmp_path))
    assert data.vocab == ["the", "cat", "sat", "<eos>", "=", "title", "<unk>", "ran"]
    words = [data.vocab[i] for i in data.train.tolist()]
    assert words == "the cat sat <eos> <eos> = title = <eos> the <unk> ran <eos>".split()
    assert [data.vocab[i] for i in data.valid.tolist()] == ["the", "<unk>", "sat", "<eos>"]
    assert [data.vocab[i] for i in data.test.tolist()] == ["cat", "<eos>"]
    assert data.train.dtype == torch.int64


# ---------------------------------------------------------------- ImageNet (ImageFolder)
def test_imagenet_folder_shapes_labels_and_seeded_crops(tmp_path):
    write_imagefolder(tmp_path)
    data = load_dataset("imagenet", root=str(tmp_path), seed=7, size=16)
    assert data.classes == ["n01", "n02"] and data.num_classes == 2
    assert len(data.train) == 6 and len(data.test) == 6
    assert data.train.targets.tolist() == [0, 0, 0, 1, 1, 1]
    x, label = data.train[4]
    assert x.shape == (3, 16, 16) and x.dtype == torch.float32 and label == 1
    assert data.test[0][0].shape == (3, 16, 16)
    assert torch.equal(data.test[0][0], data.test[0][0])  # evaluation is deterministic

    again = load_dataset("imagenet", root=str(tmp_path), seed=7, size=16)
    assert torch.equal(data.train[4][0], again.train[4][0])  # same seed, same crop
    other_seed = load_dataset("imagenet", root=str(tmp_path), seed=8, size=16)
    crops = [data.train[i][0] for i in range(6)]
    assert any(not torch.equal(c, other_seed.train[i][0]) for i, c in enumerate(crops))
    data.train.set_epoch(1)
    assert any(not torch.equal(c, data.train[i][0]) for i, c in enumerate(crops))


# ---------------------------------------------------------------- partition
# that a seed fixes the deal: the pinned streams below
def _collect(batches, e):
    return torch.stack(list(batches.epoch(e)))  # [steps, workers, batch]


def test_shuffle_uses_every_index_once_per_epoch_and_reshuffles():
    labels = torch.arange(96) % 4
    wb = WorkerBatches(labels, n_workers=4, batch_size=6, scheme="shuffle", seed=1)
    assert wb.steps_per_epoch == 4 and wb.shard_sizes == [24] * 4
    e0, e1 = _collect(wb, 0), _collect(wb, 1)
    assert e0.shape == (4, 4, 6)
    assert sorted(e0.flatten().tolist()) == list(range(96))
    assert sorted(e1.flatten().tolist()) == list(range(96))
    assert torch.equal(e0, _collect(wb, 0))  # an epoch can be replayed (resume)
    assert not torch.equal(e0, e1)
    # under shuffle, the worker holding an index changes across epochs
    owner0 = {i: w for w in range(4) for i in e0[:, w].flatten().tolist()}
    owner1 = {i: w for w in range(4) for i in e1[:, w].flatten().tolist()}
    assert any(owner0[i] != owner1[i] for i in range(96))


def test_split_keeps_shards_fixed_and_disjoint():
    labels = torch.arange(100) % 10
    wb = WorkerBatches(labels, n_workers=3, batch_size=8, scheme="split", seed=0)
    assert wb.shard_sizes == [34, 33, 33] and wb.steps_per_epoch == 4
    shards = [set(s.tolist()) for s in wb.shards()]
    assert set().union(*shards) == set(range(100)) and sum(map(len, shards)) == 100
    for e in (0, 3):
        batches = _collect(wb, e)
        for w in range(3):
            assert set(batches[:, w].flatten().tolist()) <= shards[w]
            assert len(set(batches[:, w].flatten().tolist())) == 32  # no repeats in an epoch
    assert not torch.equal(_collect(wb, 0), _collect(wb, 1))  # order within a shard changes


def test_sorted_gives_each_worker_few_classes():
    labels = torch.arange(200) % 10
    wb = WorkerBatches(labels, n_workers=5, batch_size=10, scheme="sorted", seed=0)
    hist = wb.label_histogram()
    assert hist.shape == (5, 10) and hist.sum().item() == 200
    assert ((hist > 0).sum(dim=1) <= 2).all()
    iid = WorkerBatches(labels, n_workers=5, batch_size=10, scheme="split", seed=0).label_histogram()
    assert ((iid > 0).sum(dim=1) >= 8).all()


def _skew(hist):
    # mean total-variation distance between each worker's label mix and the global mix
    mix = hist.double() / hist.sum(dim=1, keepdim=True)
    overall = hist.sum(dim=0).double() / hist.sum()
    return 0.5 * (mix - overall).abs().sum(dim=1).mean().item()


def test_dirichlet_skew_follows_alpha_and_every_worker_gets_a_batch_of_every_sample_dealt_once():
    """α = 0.01 with 16 workers and 10 classes: no draw gives every worker a batch (each class lands on about one
    worker), so the last draw is topped up from the largest shards: each worker holds at least one batch, every
    sample is dealt once, and a worker still sees about one or two classes (α = 10: all ten; α = 100: barely skewed)."""
    labels = torch.arange(4000) % 10
    tiny = WorkerBatches(labels, 16, 16, "dirichlet:0.01", seed=0)
    assert min(tiny.shard_sizes) >= 16
    dealt = torch.cat(tiny.shards(0))
    assert len(dealt) == 4000 and len(torch.unique(dealt)) == 4000
    classes = (tiny.label_histogram() > 0).sum(dim=1).float()
    flat = WorkerBatches(labels, 16, 16, "dirichlet:10", seed=0)
    assert classes.mean() < 3 and bool((flat.label_histogram() > 0).all())
    large = WorkerBatches(labels, 16, 16, "dirichlet:100", seed=0)
    assert _skew(tiny.label_histogram()) > 0.5 > 0.1 > _skew(large.label_histogram())
    assert torch.equal(tiny.label_histogram(0), tiny.label_histogram(5))  # fixed across epochs
    assert torch.equal(dealt, torch.cat(WorkerBatches(labels, 16, 16, "dirichlet:0.01", seed=0).shards(0)))
    with pytest.raises(BenchError, match="larger than the smallest shard"):  # too few samples: still refused
        WorkerBatches(torch.arange(200) % 10, 16, 16, "dirichlet:0.01", seed=0)


def test_unequal_shards_keep_a_full_epoch_and_cycle_small_shards():
    # Dirichlet shards differ in size; an epoch is still a pass at the mean shard size (as under
    # shuffle), large shards leave a surplus, small ones are cycled through without early repeats.
    labels = torch.arange(2000) % 10
    wb = WorkerBatches(labels, 8, 16, "dirichlet:0.1", seed=0)
    assert wb.steps_per_epoch == WorkerBatches(labels, 8, 16, "shuffle", seed=0).steps_per_epoch == 15
    assert min(wb.shard_sizes) < 15 * 16 < max(wb.shard_sizes)
    batches = _collect(wb, 3)
    assert batches.shape == (15, 8, 16)
    for w, shard in enumerate(wb.shards()):
        seen = batches[:, w].flatten().tolist()
        assert set(seen) <= set(shard.tolist())
        size = len(shard)
        if size < len(seen):  # cycled: the first pass covers the whole shard before any repeat
            assert sorted(seen[:size]) == sorted(shard.tolist())
        else:
            assert len(set(seen)) == len(seen)


@pytest.mark.parametrize("scheme, labels, batch, message", [
    ("bogus", None, 4, "unknown partition scheme 'bogus'; allowed: shuffle, split, sorted, dirichlet"),
    ("dirichlet:0", None, 4, "must be a number > 0"), ("dirichlet:-1", None, 4, "must be a number > 0"),
    ("dirichlet", None, 4, "must be a number > 0"), ("split:3", None, 4, "unknown partition scheme"),
    ("split", None, 30, "batch_size 30 is larger than the smallest shard \\(25 samples\\)"),
    ("sorted", torch.randn(100), 4, "integer class labels"),
])
def test_bad_partition_input(scheme, labels, batch, message):
    labels = torch.arange(100) % 10 if labels is None else labels
    with pytest.raises(BenchError, match=message):
        WorkerBatches(labels, 4, batch, scheme, seed=0)
    assert WorkerBatches(labels, 4, 4, "shuffle", seed=0).steps_per_epoch == 6  # the same labels deal as a shuffle


@pytest.mark.parametrize("scheme,n,batch,digest", [
    ("shuffle", 8, 16, "500a4c34dfe6a8d2"), ("split", 8, 125, "bcc384d01f824dc1"), ("sorted", 5, 7, "a6e7b19e367609d7"),
    ("dirichlet:0.05", 8, 16, "7221bd4ffc81f56c")])
def test_the_deal_of_every_epoch_is_the_pinned_stream(scheme, n, batch, digest):
    """Every worker's batches of three epochs, hashed: the deal's random stream never changes under a run's feet (a
    change here changes every run's data order). The digests are the deal's before it moved to numpy arrays with
    one tensor per epoch (bench/data/partition.py), which left them unchanged; dirichlet:0.05 cycles short shards.
    split at 1,003 samples has shards of 126 and 125 for batches of 125, so it draws; an epoch of exact full
    batches draws nothing (the test below)."""
    import hashlib

    deal = WorkerBatches(torch.arange(1003) % 10, n, batch, scheme, 3)
    flat = torch.cat([torch.stack(list(deal.epoch(e))).flatten() for e in range(3)])
    assert hashlib.sha256(flat.numpy().tobytes()).hexdigest()[:16] == digest


@pytest.mark.parametrize("scheme", ["split", "sorted", "shuffle"])
def test_a_full_batch_epoch_is_every_shard_in_its_dealt_order_and_draws_nothing(scheme):
    """Full-batch training (one step an epoch, each worker's batch its whole shard): the order inside a batch does
    not change what it holds, so the epoch draws nothing and each row is the worker's shard as dealt; a fixed
    deal gives the very same tensor every epoch, which lets a task keep what it fetched. One sample more than a
    batch in some shard, and the epoch is drawn as before."""
    labels = torch.arange(1000) % 10
    deal = WorkerBatches(labels, 8, 125, scheme, 3)
    assert deal.full_batch
    batches = [list(deal.epoch(e)) for e in range(3)]
    assert all(len(b) == 1 and b[0].shape == (8, 125) for b in batches)
    for e, (batch,) in enumerate(batches):
        assert torch.equal(batch, torch.stack(deal.shards(e)))
    fixed = scheme != "shuffle"
    assert (batches[0][0] is batches[2][0]) == fixed
    if not fixed:
        assert not torch.equal(batches[0][0], batches[1][0])  # shuffle deals again every epoch
    assert not WorkerBatches(torch.arange(1001) % 10, 8, 125, scheme, 3).full_batch
