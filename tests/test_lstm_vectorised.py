"""The LSTM language model's vectorised path: the unrolled recurrence under vmap equals nn.LSTM
(float64, with and without dropout masks), its hand-written backward passes gradcheck, and the task's
two gradient paths, dropout masks, hidden states and checkpoints agree."""
import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad_and_value, vmap

from bench.models import make_model
from bench.models.lstm import Recurrence
from bench.tasks import TaskSetup, make_task
from bench.tasks.flat import FlatModel
from bench.tasks.gradients import per_parameter

from datafiles import write_wikitext

V, EMB, H, LAYERS, B, T, N = 23, 6, 6, 3, 4, 7, 3


def _objective(logits, h, c, target, weights):
    """Cross-entropy plus terms in the final (h, c), so their gradients are exercised too."""
    ce = F.cross_entropy(logits.reshape(-1, V), target.reshape(-1))
    return ce + (h * weights[0]).sum() + (c * weights[1]).sum()


def _reference(params, tokens, state, masks):
    """The model's computation from nn.LSTM, one single-layer module per layer (masks in between)."""
    x = F.embedding(tokens, params["encoder.weight"])
    x = x * masks[0] if masks is not None else x
    hs, cs = [], []
    for k in range(LAYERS):
        layer = nn.LSTM(EMB if k == 0 else H, H, batch_first=True).double()
        weights = {f"{kind}_l0": params[f"rnn.{kind}_l{k}"]
                   for kind in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")}
        x, (h, c) = functional_call(layer, weights, (x, (state[0][k:k + 1], state[1][k:k + 1])))
        hs.append(h)
        cs.append(c)
        if masks is not None:
            x = x * masks[k + 1]
    return F.linear(x, params["encoder.weight"], params["decoder.bias"]), (torch.cat(hs), torch.cat(cs))


@pytest.mark.parametrize("with_masks", [False, True])
def test_vmapped_unrolled_lstm_equals_nn_lstm_in_float64(with_masks):
    torch.manual_seed(0)
    model = make_model("lstm", vocab_size=V, emb=EMB, hidden=H, num_layers=LAYERS,
                       dropout=0.4 if with_masks else 0.0).double()
    flat = FlatModel(model)
    gen = torch.Generator().manual_seed(1)
    x = flat.get().repeat(N, 1) + 0.1 * torch.randn(N, flat.d, generator=gen, dtype=torch.float64)
    tokens, target = torch.randint(0, V, (2, N, B, T), generator=gen)
    h0, c0 = torch.randn(2, N, LAYERS, B, H, generator=gen, dtype=torch.float64)
    weights = torch.randn(2, LAYERS, B, H, generator=gen, dtype=torch.float64)
    masks = model.dropout_masks(torch.rand(N, B, T, model.mask_width, generator=gen, dtype=torch.float64)) \
        if with_masks else None
    assert masks is None or len(masks) == LAYERS + 1 and 0 < float((masks[1] == 0).double().mean()) < 1

    def worker(params, tokens, target, h, c, *worker_masks):
        logits, (h1, c1) = functional_call(model, params, (tokens, (h, c), list(worker_masks) or None),
                                           {"unrolled": True})
        return _objective(logits, h1, c1, target, weights), (logits, h1, c1)

    model.train()
    grads, (losses, (logits, h1, c1)) = vmap(grad_and_value(worker, has_aux=True))(
        per_parameter(flat, x), tokens, target, h0, c0, *(masks or []))

    for i in range(N):
        leaves = {name: p.detach().requires_grad_() for name, p in flat.views(x[i]).items()}
        worker_masks = None if masks is None else [m[i] for m in masks]
        ref_logits, (ref_h, ref_c) = _reference(leaves, tokens[i], (h0[i], c0[i]), worker_masks)
        ref_loss = _objective(ref_logits, ref_h, ref_c, target[i], weights)
        ref_grads = torch.autograd.grad(ref_loss, list(leaves.values()))
        close = dict(rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(logits[i], ref_logits, **close)
        torch.testing.assert_close((h1[i], c1[i]), (ref_h, ref_c), **close)
        torch.testing.assert_close(losses[i], ref_loss, **close)
        for name, g in zip(leaves, ref_grads):
            torch.testing.assert_close(grads[name][i], g, **close)
        # the module's own path (nn.LSTM fused without masks, its kernel layer by layer with them)
        flat.load(x[i])
        model.zero_grad()
        own_logits, (own_h, own_c) = model(tokens[i], (h0[i], c0[i]), worker_masks)
        _objective(own_logits, own_h, own_c, target[i], weights).backward()
        torch.testing.assert_close((own_logits, own_h, own_c), (ref_logits, ref_h, ref_c), **close)
        torch.testing.assert_close(flat.grad(), torch.cat([g.reshape(-1) for g in ref_grads]), **close)
    assert not torch.allclose(grads["rnn.weight_hh_l1"][0], grads["rnn.weight_hh_l1"][1])  # per-worker gradients


def test_recurrence_backward_passes_gradcheck():
    gen = torch.Generator().manual_seed(2)

    def leaf(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64).requires_grad_()

    inputs = (leaf(2, 4, 4 * 3), leaf(2, 3), leaf(2, 3), leaf(4 * 3, 3))
    # every step's h and c feed the objective, not only the last
    assert torch.autograd.gradcheck(lambda *a: Recurrence.apply(*a)[:2], inputs)


def test_parameters_keep_nn_lstm_names_and_order():
    """The flat vector's layout (and so checkpoints and per-layer compression) is nn.LSTM's."""
    model = make_model("lstm", vocab_size=V, emb=8, hidden=8, num_layers=2)
    rnn = [f"rnn.{kind}_l{k}" for k in range(2) for kind in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
    assert [name for name, _ in model.named_parameters()] == ["encoder.weight", *rnn, "decoder.bias"]


def test_training_mode_without_masks_draws_dropout_from_the_global_generator():
    model = make_model("lstm", vocab_size=V, emb=8, hidden=8, num_layers=2, dropout=0.5)
    tokens = torch.randint(0, V, (3, 10), generator=torch.Generator().manual_seed(0))
    outputs = []
    for seed in (0, 0, 1):
        torch.manual_seed(seed)
        outputs.append(model(tokens)[0])
    assert torch.equal(outputs[0], outputs[1]) and not torch.equal(outputs[0], outputs[2])
    assert not torch.allclose(outputs[0], model.eval()(tokens)[0])


# -- the task ----------------------------------------------------------------------------------
def _task(tmp_path, n=3, rows=None, **options):
    root = tmp_path / "wt2"
    if not root.exists():
        write_wikitext(root)
    options = {"emb": 16, "hidden": 16, "num_layers": 2, "bptt": 5, **options}
    return make_task("wikitext2-lstm", TaskSetup(n_workers=n, batch_size=4, data="split", seed=3,
                                                 data_root=str(root), options=options, rows=rows))


def _start(task, x):
    task.prepare(x)
    task.start_epoch(0)
    return list(task.batches(0))


def test_dropout_masks_are_keyed_by_worker_and_step(tmp_path):
    """(The two gradient paths with and without dropout: test_tasks.py, on the task's two examples.)"""
    assert _task(tmp_path, dropout=0.0).dropout_masks(0, 0) is None
    task = _task(tmp_path, n=4)
    masks = task.dropout_masks(0, 1)
    assert [tuple(m.shape) for m in masks] == [(4, 4, 5, 16)] * 3
    for m in masks:  # kept values scaled by 1 / (1 - p)
        torch.testing.assert_close(m.unique(), torch.tensor([0.0, 1 / (1 - 0.4)]))
    dropped = float(torch.cat([m.reshape(-1) for m in masks]).eq(0).double().mean())
    assert abs(dropped - 0.4) < 0.05
    assert not torch.equal(masks[0][0], masks[0][1])  # workers draw apart
    for other in (task.dropout_masks(0, 2), task.dropout_masks(1, 1)):  # and steps and epochs too
        assert not torch.equal(masks[0], other[0])
    for m, again in zip(masks, task.dropout_masks(0, 1)):
        assert torch.equal(m, again)


@pytest.mark.parametrize("path", ["vmap", "loop"])
def test_a_process_holding_some_workers_computes_their_rows(tmp_path, path):
    """Masks, gradients and hidden states of workers lo..hi-1 in a process that holds only them equal
    those rows of the single-process simulation."""
    full = _task(tmp_path, n=4, vectorize=path == "vmap")
    part = _task(tmp_path, n=4, rows=(1, 3), vectorize=path == "vmap")
    x = full.init_params() + 0.01 * torch.randn(4, full.d, generator=torch.Generator().manual_seed(0))
    batches = _start(full, x)
    _start(part, x[1:3])
    for whole, mine in zip(full.dropout_masks(0, 1), part.dropout_masks(0, 1)):
        assert torch.equal(whole[1:3], mine)
    for batch in batches[:2]:
        (g_full, l_full), (g_part, l_part) = full.gradients(x, batch), part.gradients(x[1:3], batch)
        torch.testing.assert_close(g_part, g_full[1:3], rtol=1e-5, atol=1e-7)
        torch.testing.assert_close(l_part, l_full[1:3])
        torch.testing.assert_close(part.hidden, tuple(s[1:3] for s in full.hidden))


@pytest.mark.parametrize("path", ["vmap", "loop"])
def test_hidden_state_is_carried_detached_reset_and_resumed_exactly(tmp_path, path):
    vectorize = path == "vmap"
    task = _task(tmp_path, vectorize=vectorize)
    x = task.init_params()
    batches = _start(task, x)
    assert [tuple(s.shape) for s in task.hidden] == [(3, 2, 4, 16)] * 2 and not task.hidden[0].any()
    task.gradients(x, batches[0])
    assert all(s.abs().sum() > 0 and s.grad_fn is None and not s.requires_grad for s in task.hidden)
    saved = copy.deepcopy(task.state_dict())
    assert saved["gradient_path"] == path
    later = [task.gradients(x, b) for b in batches[1:3]]

    resumed = _task(tmp_path, vectorize=not vectorize)  # the checkpoint's path wins over the option
    resumed.load_state_dict(saved)
    resumed.prepare(x)
    assert resumed.gradient_path == path
    for batch, (grads, losses) in zip(batches[1:3], later):
        again = resumed.gradients(x, batch)
        assert torch.equal(again[0], grads) and torch.equal(again[1], losses)
    task.start_epoch(1)
    assert not any(s.any() for s in task.hidden)


def test_checkpoint_with_one_state_per_worker_is_read(tmp_path):
    task = _task(tmp_path, vectorize=False)
    pairs = [(torch.full((2, 4, 16), float(i)), torch.full((2, 4, 16), -float(i))) for i in range(3)]
    task.load_state_dict({"hidden": pairs, "gradient_path": "loop"})
    assert task.hidden[0].shape == (3, 2, 4, 16) and torch.equal(task.hidden[1][2], pairs[2][1])
