"""Data files are data: a CIFAR-10 batch whose pickle names a function (os.system, exec, subprocess...) is
refused with one line naming the file and the function, and nothing of it runs; real batches still load."""
import builtins
import os
import pickle
import struct
import subprocess

import numpy as np
import pytest
import torch

from bench.cli import main
from bench.data import load_dataset
from bench.errors import BenchError
from datafiles import write_cifar
from hostile import refused

RUN = ["run", "--task", "cifar10-resnet8", "--algorithm", "choco", "--compressor", "sign", "--topology", "ring",
       "--nodes", "3", "--epochs", "1", "--set", "gamma=0.3", "--set", "batch_size=4", "--set", "eval_every=1",
       "--quiet"]


class _Payload:
    """Unpickling it calls ``call(*args)``: what a crafted file would do."""

    def __init__(self, call, *args):
        self.call, self.args = call, args

    def __reduce__(self):
        return self.call, self.args


def _payloads(marker):
    return {
        "os.system": (_Payload(os.system, f"touch {marker}"), f"{os.system.__module__}.system"),  # posix.system
        "builtins.exec": (_Payload(builtins.exec, f"open({str(marker)!r}, 'w').close()"), "builtins.exec"),
        "subprocess.call": (_Payload(subprocess.call, ["touch", str(marker)]), "subprocess.call"),
    }


def _cifar(tmp_path):
    return write_cifar(tmp_path / "data" / "cifar-10-batches-py", per_batch=8)


def test_the_payloads_would_run_under_a_plain_pickle_load(tmp_path):
    """The check below can fail: each crafted pickle does create its marker when loaded without restriction."""
    for name, (payload, _) in _payloads(tmp_path / "control").items():
        pickle.loads(pickle.dumps(payload))
        assert (tmp_path / "control").exists(), name
        (tmp_path / "control").unlink()


@pytest.mark.parametrize("name", ["os.system", "builtins.exec", "subprocess.call"])
@pytest.mark.parametrize("where", ["whole file", "inside the batch"])
def test_a_batch_that_names_code_is_refused_and_nothing_runs(tmp_path, capsys, name, where):
    folder = _cifar(tmp_path)
    marker = tmp_path / "marker"
    payload, shown = _payloads(marker)[name]
    content = payload if where == "whole file" else {b"data": payload, b"labels": [0]}
    (folder / "data_batch_1").write_bytes(pickle.dumps(content))
    out = tmp_path / "run"
    refused(main, [*RUN, "--set", f"data_root={tmp_path / 'data'}", "--out", str(out)], capsys,
            folder / "data_batch_1", shown, "refused")
    assert not marker.exists() and not out.exists()  # nothing ran, nor was written: no run.json saying running


def test_an_unreadable_or_foreign_batch_is_one_line(tmp_path):
    folder = _cifar(tmp_path)
    for content, word in ((b"\x80\x04garbage", "unreadable pickle"), (pickle.dumps([1, 2, 3]), "needs b'data'"),
                          (pickle.dumps({b"data": np.zeros((2, 10), np.uint8), b"labels": [0, 1]}), "3072"),
                          (pickle.dumps({b"data": np.zeros((2, 3072), np.uint8), b"labels": [0, 10]}), "0..9"),
                          (pickle.dumps({b"data": np.zeros((2, 3072), np.uint8), b"labels": [0]}), "one class")):
        (folder / "test_batch").write_bytes(content)
        with pytest.raises(BenchError, match=word) as caught:
            load_dataset("cifar10", root=str(folder))
        assert str(folder / "test_batch") in str(caught.value) and "\n" not in str(caught.value)


def _python2_batch(data: np.ndarray, labels: list[int]) -> bytes:
    """A batch in the byte layout of the real CIFAR-10 files: Python 2's cPickle at protocol 2, byte-string keys
    (SHORT_BINSTRING), the array by numpy.core.multiarray._reconstruct with ndarray and dtype."""
    def text(value: bytes) -> bytes:
        return b"U" + bytes([len(value)]) + value

    rows = len(data)
    array = (b"cnumpy.core.multiarray\n_reconstruct\ncnumpy\nndarray\nK\x00\x85" + text(b"b") + b"\x87R"
             + b"(K\x01M" + struct.pack("<H", rows) + b"M\x00\x0c\x86"  # version 1, shape (rows, 3072)
             + b"cnumpy\ndtype\n" + text(b"u1") + b"K\x00K\x01\x87R"
             + b"(K\x03" + text(b"|") + b"NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb"  # the dtype's state
             + b"\x89T" + struct.pack("<I", data.nbytes) + data.tobytes() + b"tb")  # C order, the pixels
    label_list = b"](" + b"".join(b"K" + bytes([v]) for v in labels) + b"e"
    return b"\x80\x02}(" + text(b"data") + array + text(b"labels") + label_list + text(b"batch_label") \
        + text(b"training batch 1 of 5") + b"u."


def test_batches_as_the_real_files_and_numpy_write_them_load(tmp_path):
    folder = _cifar(tmp_path)
    rng = np.random.default_rng(1)
    data = rng.integers(0, 256, size=(8, 3072), dtype=np.uint8)
    labels = [int(v) for v in rng.integers(0, 10, size=8)]
    (folder / "data_batch_1").write_bytes(_python2_batch(data, labels))
    assert pickle.loads(_python2_batch(data, labels), encoding="bytes")[b"labels"] == labels  # the layout is right
    (folder / "data_batch_2").write_bytes(pickle.dumps({b"data": data, b"labels": labels}, protocol=2))
    (folder / "data_batch_3").write_bytes(pickle.dumps({b"data": data, b"labels": labels}, protocol=5))
    (folder / "data_batch_4").write_bytes(pickle.dumps({b"data": data, b"labels": list(np.array(labels))}))
    loaded = load_dataset("cifar10", root=str(folder))
    for k in range(4):
        assert torch.equal(loaded.train_x[8 * k:8 * (k + 1)], torch.from_numpy(data.reshape(8, 3, 32, 32)))
        assert loaded.train_y[8 * k:8 * (k + 1)].tolist() == labels


# ---- the other loaders: a file that is not what its name says is one line naming it -------------------------
def test_an_imagenet_file_that_is_not_an_image_or_is_a_bomb_is_one_line(tmp_path, monkeypatch):
    from PIL import Image

    from datafiles import write_imagefolder

    root = write_imagefolder(tmp_path / "imagenet")
    data = load_dataset("imagenet", root=str(root), size=8)
    bad = next(i for i, (path, _) in enumerate(data.train.samples) if path.suffix == ".png")
    path = data.train.samples[bad][0]
    path.write_bytes(pickle.dumps(_Payload(os.system, f"touch {tmp_path / 'marker'}")))
    with pytest.raises(BenchError, match="is not an image the suite can read") as caught:
        data.train[bad]
    assert str(path) in str(caught.value) and not (tmp_path / "marker").exists()
    good = next(i for i in range(len(data.train)) if i != bad)
    assert data.train[good][0].shape == (3, 8, 8)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 10)  # every image is then a "decompression bomb"
    with pytest.raises(BenchError, match="is not an image the suite can read"):
        data.train[good]


def test_wikitext_that_is_not_utf8_and_a_damaged_mnist1d_cache_are_one_line(tmp_path):
    from datafiles import write_wikitext

    folder = write_wikitext(tmp_path / "wt2", lines=20)
    (folder / "wiki.valid.tokens").write_bytes(b"fine words\n\xff\xfe not text\n")
    with pytest.raises(BenchError, match="wiki.valid.tokens is not UTF-8 text .it holds the byte 0xff"):
        load_dataset("wikitext2", root=str(folder))
    cache = tmp_path / "mnist1d"
    load_dataset("mnist1d", root=str(cache), n_train=90, n_test=10)
    (stored,) = cache.glob("*.npz")
    for content in (b"", pickle.dumps(_Payload(os.system, f"touch {tmp_path / 'marker'}")), b"PK\x03\x04junk"):
        stored.write_bytes(content)
        with pytest.raises(BenchError, match=f"mnist1d cache {stored} is damaged"):
            load_dataset("mnist1d", root=str(cache), n_train=90, n_test=10)
        assert not (tmp_path / "marker").exists()
    np.savez(stored, x=np.zeros((5, 40), np.float32), y=np.zeros(5, np.int64))
    with pytest.raises(BenchError, match=r"holds arrays of shapes \(5, 40\) and \(5,\), not the 100"):
        load_dataset("mnist1d", root=str(cache), n_train=90, n_test=10)
