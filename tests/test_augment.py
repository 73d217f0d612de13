"""Counter-based random streams and the batched crop-and-flip augmentation."""
import torch
import torch.nn.functional as F

from bench.tasks import streams
from bench.tasks.supervised import random_crop_flip


def test_uniform_is_in_range_balanced_and_keyed():
    keys = streams.worker_keys(seed=3, epoch=1, step=7, workers=range(4), purpose=streams.AUGMENT)
    u = streams.uniform(keys, (5000,))
    assert u.shape == (4, 5000) and u.dtype == torch.float32
    assert float(u.min()) >= 0.0 and float(u.max()) < 1.0
    assert abs(float(u.mean()) - 0.5) < 0.01 and abs(float(u.var()) - 1 / 12) < 0.005
    # each decile holds about a tenth of the draws
    counts = torch.bincount((u * 10).long().reshape(-1), minlength=10).float() / u.numel()
    assert float((counts - 0.1).abs().max()) < 0.01
    # workers, steps and purposes draw different numbers; the same key draws the same ones
    assert not torch.equal(u[0], u[1])
    other = streams.uniform(streams.worker_keys(3, 1, 8, range(4), streams.AUGMENT), (5000,))
    assert float((other - u).abs().mean()) > 0.2
    dropout = streams.uniform(streams.worker_keys(3, 1, 7, range(4), streams.DROPOUT), (5000,))
    assert not torch.equal(dropout, u)
    assert torch.equal(streams.uniform(keys, (5000,)), u)
    # neighbouring workers' streams are uncorrelated
    assert abs(float(torch.corrcoef(u[:2])[0, 1])) < 0.05


def test_a_process_draws_what_the_simulation_draws_for_its_workers():
    full = streams.uniform(streams.worker_keys(5, 2, 3, range(8), streams.AUGMENT), (32, 3))
    part = streams.uniform(streams.worker_keys(5, 2, 3, range(4, 6), streams.AUGMENT), (32, 3))
    assert torch.equal(full[4:6], part)
    images = torch.randn(8, 32, 3, 8, 8)
    keys = streams.worker_keys(5, 2, 3, range(8), streams.AUGMENT)
    everything = random_crop_flip(images, keys)
    assert torch.equal(everything[4:6], random_crop_flip(images[4:6], keys[4:6]))


def test_crop_flip_is_a_shift_of_the_zero_padded_image_possibly_mirrored():
    w, b, pad = 3, 40, 4
    images = torch.randn(w, b, 3, 8, 8)
    out = random_crop_flip(images, streams.worker_keys(0, 0, 0, range(w), streams.AUGMENT), pad=pad)
    assert out.shape == images.shape
    flips, shifts = 0, set()
    for i in range(w):
        for j in range(b):
            padded = F.pad(images[i, j], (pad, pad, pad, pad))
            found = [(dy, dx, f) for dy in range(2 * pad + 1) for dx in range(2 * pad + 1) for f in (False, True)
                     if torch.equal(out[i, j], (lambda c: c.flip(-1) if f else c)(padded[:, dy:dy + 8, dx:dx + 8]))]
            assert found, f"image {i},{j} is not a crop of its padded original"
            flips += found[0][2]
            shifts.add(found[0][:2])
    assert 0.3 < flips / (w * b) < 0.7  # about half are mirrored
    assert len(shifts) > 30  # offsets spread over the 9 x 9 possible shifts
