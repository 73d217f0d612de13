"""Every task builds, deals batches and gives per-worker gradients; vectorised == loop gradients."""
import math

import pytest
import torch

from bench.errors import BenchError
from bench.models import resnet_imagenet, uses_batchnorm
from bench.tasks import TASKS, TaskSetup, check_option_values, make_task, task_option_names

from datafiles import write_cifar, write_imagefolder, write_wikitext


@pytest.fixture(autouse=True)
def narrow_resnet50(monkeypatch):
    """ResNet-50 here at an eighth of its width: the same bottlenecks, strides and BatchNorms (what the task and its
    two gradient paths do with them) with 0.4 M of its 23.5 M parameters; the full model's counts:
    test_models_zoo.py."""
    monkeypatch.setattr(resnet_imagenet, "STAGES", tuple((w // 8, blocks) for w, blocks in resnet_imagenet.STAGES))


def _cifar(root):
    write_cifar(root / "cifar-10-batches-py", per_batch=12)
    return root


# the local data a task's ``dataset`` reads, written tiny in its real format; each gives the task's data root
DATA_FILES = {"cifar10": _cifar, "wikitext2": lambda root: write_wikitext(root / "wt2"),
              "imagenet": lambda root: write_imagefolder(root / "imagenet")}


def setup_for(name, tmp_path, n=None, batch=None, example=0, **options):
    """The task's declared example (its class's ``examples``) as a TaskSetup, its data written under ``tmp_path``;
    ``n``, ``batch`` and ``options`` override the example's."""
    settings = TASKS.get(name).examples[example]
    dataset = getattr(TASKS.get(name), "dataset", None)
    root = DATA_FILES[dataset](tmp_path) if dataset in DATA_FILES else None
    return TaskSetup(n_workers=n or settings.get("nodes", 3), batch_size=batch or settings.get("batch_size", 4),
                     data=settings.get("data", "shuffle"), seed=0, data_root=None if root is None else str(root),
                     options={**settings.get("task_options", {}), **options})


# every registered task and each of its declared examples, so a new task is exercised automatically
NAMES = sorted(TASKS.names())
EXAMPLES = [(name, k) for name in NAMES for k in range(len(TASKS.get(name).examples))]


@pytest.mark.parametrize("name, example", [
    pytest.param(name, k, marks=[pytest.mark.slow] * (name == "imagenet-resnet50")) for name, k in EXAMPLES])
def test_every_task_example_builds_and_steps(name, example, tmp_path):
    task = make_task(name, setup_for(name, tmp_path, example=example))
    x = task.init_params()
    assert x.shape == (task.setup.n_workers, task.d) and sum(task.segments) == task.d
    assert torch.equal(x[0], x[-1])  # every worker starts from the same model
    task.start_epoch(0)
    batch = next(iter(task.batches(0)))
    grads, losses = task.gradients(x, batch)
    assert grads.shape == x.shape and torch.isfinite(grads).all() and grads.abs().sum() > 0
    assert losses.shape == (task.setup.n_workers,) and torch.isfinite(losses).all()
    buffers, mask = task.local_buffers(), task.decay_mask()
    if buffers is not None:  # BatchNorm: each worker's statistics moved with its own batch; evaluation averages them
        assert not torch.equal(buffers[0], buffers[1])
        torch.testing.assert_close(task.averaged_buffers(), buffers.mean(0))
    if mask is not None:  # weight decay spares exactly BatchNorm's scales and shifts, where they lie in x
        bn = {id(p) for m in task.model.modules() if isinstance(m, torch.nn.BatchNorm2d) for p in m.parameters()}
        spared = torch.cat([torch.full((p.numel(),), id(p) in bn) for p in task.model.parameters()])
        assert torch.equal(mask == 0, spared) and uses_batchnorm(task.model) is bool(bn)
    metrics = task.evaluate(x[0], task.averaged_buffers())
    assert set(task.metrics) <= set(metrics)
    assert math.isnan(metrics["test_acc"]) or 0.0 <= metrics["test_acc"] <= 1.0
    if "test_ppl" in task.metrics:  # an untrained model over the 52-word vocabulary is close to uniform
        assert metrics["test_ppl"] == pytest.approx(math.exp(metrics["test_loss"])) and 20 < metrics["test_ppl"] < 120
    # a plain gradient step on worker 0's own batch lowers worker 0's loss on that batch
    stepped = x - 0.05 * grads
    assert task.gradients(stepped, batch)[1][0] < losses[0] + 1e-6 or name == "wikitext2-lstm"


VECTORIZABLE = sorted(name for name in NAMES if TASKS.get(name).vectorizable)


def _state_tensors(task):
    """Every tensor of a task's per-worker state (BatchNorm statistics, hidden states), flattened."""
    out = []

    def walk(value):
        if isinstance(value, torch.Tensor):
            out.append(value.reshape(-1))
        elif isinstance(value, (list, tuple)):
            for v in value:
                walk(v)
        elif isinstance(value, dict):
            for key in sorted(value):
                walk(value[key])

    walk({k: v for k, v in task.state_dict().items() if not k.startswith("gradient_path")})
    return out


@pytest.mark.parametrize("name, example", [
    pytest.param(name, k, marks=[pytest.mark.slow] * (name == "imagenet-resnet50")) for name, k in EXAMPLES
    if name in VECTORIZABLE])
def test_vectorised_and_loop_paths_agree(name, example, tmp_path):
    """Gradients, losses and the carried state (running statistics, hidden states) of the vectorised
    path equal the per-worker loop's over two consecutive steps, to float rounding, on every declared example."""
    # ResNet-50 at 64 px: at 32 px its last BatchNorms see 2 values a channel, which turns rounding into noise
    extra = {"size": 64} if name.startswith("imagenet") else {}
    fast = make_task(name, setup_for(name, tmp_path / "fast", example=example, vectorize=True, **extra))
    slow = make_task(name, setup_for(name, tmp_path / "slow", example=example, vectorize=False, **extra))
    n = fast.setup.n_workers
    x = fast.init_params() + 0.01 * torch.randn(n, fast.d, generator=torch.Generator().manual_seed(0))
    for task in (fast, slow):
        task.prepare(x)
        task.start_epoch(0)
    assert (fast.gradient_path, slow.gradient_path) == ("vmap", "loop")
    batches = iter(fast.batches(0))
    for _, batch in zip(range(2), batches):
        g_fast, l_fast = fast.gradients(x, batch)
        g_slow, l_slow = slow.gradients(x, batch)
        torch.testing.assert_close(l_fast, l_slow, rtol=1e-5, atol=1e-6)
        # relative to the gradient's norm: deep BatchNorm nets at tiny batches amplify rounding entrywise;
        # ResNet-50 at batch 2 is so ill-conditioned that float32 itself is 1.5 % off float64 (the exact
        # equality of the two paths is checked in float64 in test_batchnorm_paths_equal_in_float64)
        # (ResNet-20 at batch 2 on CIFAR: 8.3e-4 on an AMD EPYC, under 1e-4 on the machine this bound was first set on)
        bound = 5e-2 if name.startswith("imagenet") else 2e-3 if name.startswith("cifar10") else 1e-4
        assert float((g_fast - g_slow).norm() / g_slow.norm()) < bound
        state_fast, state_slow = _state_tensors(fast), _state_tensors(slow)
        assert len(state_fast) == len(state_slow)
        for a, b in zip(state_fast, state_slow):
            assert float((a - b).norm()) <= (1e-3 if name.startswith("imagenet") else 1e-5) * float(b.norm()) + 1e-6
        x = x - 0.01 * g_fast


@pytest.mark.parametrize("name", NAMES)  # ResNet-50's quickest test: the fast set keeps it
def test_every_local_model_is_scored_as_if_evaluated_alone(name, tmp_path):
    """evaluate_workers (one vectorised pass for the tasks that have one) gives each row's test loss
    and accuracy as evaluate() of that row alone, BatchNorm statistics included."""
    task = make_task(name, setup_for(name, tmp_path))
    x = task.init_params()
    task.start_epoch(0)
    batch = next(iter(task.batches(0)))
    for _ in range(2):  # the workers drift apart (and their BatchNorm statistics with them)
        grads, _ = task.gradients(x, batch)
        x = x - 0.1 * grads * torch.arange(1, len(x) + 1, dtype=x.dtype).unsqueeze(1)
    buffers = task.local_buffers()
    scores = task.evaluate_workers(x, buffers)
    for i in range(len(x)):
        alone = task.evaluate(x[i], task.worker_buffers(i))
        assert scores["test_loss"][i].item() == pytest.approx(alone["test_loss"], rel=1e-4, abs=1e-6)
        if not math.isnan(alone["test_acc"]):
            assert scores["test_acc"][i].item() == pytest.approx(alone["test_acc"], abs=1e-9)
    assert len(set(scores["test_loss"].tolist())) == len(x)  # different models, different scores


def test_vectorize_auto_takes_the_loop_where_the_vectorised_path_fails(tmp_path, monkeypatch):
    """A model the vectorised path cannot run (an operation without a batching rule: the same failure every
    time) takes the loop and says why; running out of memory is not such a failure."""
    import bench.tasks.supervised as supervised

    def no_batching_rule(*args, **kwargs):
        raise RuntimeError("Batching rule not implemented for aten::something\nmore detail")

    monkeypatch.setattr(supervised, "vmap_gradients", no_batching_rule)
    task = make_task("mnist1d-mlp", setup_for("mnist1d-mlp", tmp_path))
    task.prepare(task.init_params())
    assert task.gradient_path == "loop"
    assert task.gradient_path_info["reason"] == ("task_options.vectorize=auto: the vectorised path fails on this "
                                                 "model (Batching rule not implemented for aten::something)")

    def out_of_memory(*args, **kwargs):
        raise RuntimeError("CUDA out of memory. Tried to allocate 2 GiB")

    monkeypatch.setattr(supervised, "vmap_gradients", out_of_memory)
    with pytest.raises(RuntimeError, match="out of memory"):
        make_task("mnist1d-mlp", setup_for("mnist1d-mlp", tmp_path)).prepare(task.init_params())


@pytest.mark.parametrize("name", [pytest.param(n, marks=[pytest.mark.slow] * (n == "imagenet-resnet50"))
                                  for n in VECTORIZABLE])
def test_auto_s_trial_and_the_warm_up_step_restore_state_and_random_streams(name, tmp_path):
    """vectorize=auto settles on the vectorised path by a rule, with no clock, and a trial step;
    Task.warm_up takes one step on the settled path; both are undone (BatchNorm statistics, hidden states and the
    global generator as before), so the first timed step computes what it would have without them. Every vectorisable
    task; a process holding one worker takes the loop under auto (but where the path is closed-form arithmetic)."""
    task = make_task(name, setup_for(name, tmp_path, n=2))
    x = task.init_params()
    before, rng = [t.clone() for t in _state_tensors(task)], torch.get_rng_state()

    def restored():
        after = _state_tensors(task)
        return len(after) == len(before) and all(torch.equal(a, b) for a, b in zip(after, before))

    for step in (task.prepare, task.warm_up):
        step(x)
        assert restored() and torch.equal(torch.get_rng_state(), rng) and task.gradient_path == "vmap"
    info = task.describe()["gradient_path"]
    assert info["path"] == "vmap" and info["reason"].startswith("task_options.vectorize=auto")
    assert "seconds_per_step" not in info
    # a process of one worker has nothing to map over: the loop, unless the path is closed-form arithmetic
    one = make_task(name, TaskSetup(**{**task.setup.__dict__, "rows": (1, 2)}))
    one.prepare(one.init_params())
    assert one.gradient_path == ("vmap" if TASKS.get(name).vectorized_for_one else "loop"), one.gradient_path_info


def test_cifar_augmentation_is_seeded_and_changes_batches(tmp_path):
    task = make_task("cifar10-resnet8", setup_for("cifar10-resnet8", tmp_path, n=2))
    batch = next(iter(task.batches(0)))
    a, _ = task.fetch(batch)
    b, _ = task.fetch(batch)
    torch.testing.assert_close(a, b)
    plain = task.train_x[batch[2]]
    assert not torch.equal(a, plain)  # crops/flips applied


# a CIFAR ResNet's basic blocks (ResNet-20 is ResNet-8 deeper) and ResNet-50's bottlenecks (narrowed, at 64 px: on
# 32 px its last BatchNorm sees one value a channel and image, and the two paths part at 1e-8)
@pytest.mark.parametrize("model_name,shape", [("resnet8", (3, 32, 32)),
                                              pytest.param("resnet50", (3, 64, 64), marks=pytest.mark.slow)])
def test_batchnorm_paths_equal_in_float64(model_name, shape):
    """In float64 the vectorised BatchNorm path and the per-worker loop are the same computation:
    gradients, losses and running statistics agree to 1e-10."""
    from bench.models import make_model
    from bench.tasks.flat import FlatModel
    from bench.tasks.gradients import loop_gradients, vmap_gradients

    torch.manual_seed(0)
    flat = FlatModel(make_model(model_name, num_classes=10).double())
    n, batch = 2, 4  # two workers: each moves its own statistics; a third adds only time
    gen = torch.Generator().manual_seed(1)
    x = flat.get().repeat(n, 1) + 0.01 * torch.randn(n, flat.d, generator=gen, dtype=torch.float64)
    inputs = torch.randn(n, batch, *shape, generator=gen, dtype=torch.float64)
    targets = torch.randint(0, 10, (n, batch), generator=gen)
    loss = torch.nn.functional.cross_entropy
    buf_v, buf_l = flat.get_buffers().repeat(n, 1), flat.get_buffers().repeat(n, 1)
    g_v, l_v = vmap_gradients(flat, loss, x, inputs, targets, buffers=buf_v)
    g_l, l_l = loop_gradients(flat, x, lambda i: loss(flat.model(inputs[i]), targets[i]), buf_l)
    torch.testing.assert_close(g_v, g_l, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(l_v, l_l, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(buf_v, buf_l, rtol=1e-12, atol=1e-12)
    assert not torch.equal(buf_v[0], buf_v[1])  # each worker's statistics moved with its own batch


def test_a_flat_model_still_loads_a_row_after_double_gives_its_parameters_new_tensors():
    from bench.tasks.flat import FlatModel

    model = torch.nn.Linear(3, 2)
    flat = FlatModel(model)
    model.double()
    row = torch.arange(flat.d, dtype=torch.float64)
    flat.load(row)
    assert torch.equal(flat.get(), row) and torch.equal(model.bias, row[-2:])


# -- what each task declares -------------------------------------------------------------------------------------
def test_every_task_declares_examples_a_run_takes_and_what_a_cluster_job_of_it_asks():
    """Examples of `bench run` settings, and the pipeline's job resources (workflow/rules/common.smk reads them):
    memory, the runtime of one run, GPUs and CPUs, positive whole numbers; the image and language tasks ask a GPU."""
    for name in TASKS.names():
        task = TASKS.get(name)
        assert task.examples and "vectorize" in task_option_names(name), name  # every task takes the common ones
        for example in task.examples:
            assert set(example) <= {"nodes", "batch_size", "data", "task_options"}, name
            options = example.get("task_options", {})
            assert set(options) <= set(task_option_names(name)), name
            check_option_values(name, options)
        res = task.resources
        assert set(res) == {"mem_mb", "runtime", "gpus", "cpus"}, name
        assert all(isinstance(v, int) and v >= 0 for v in res.values()) and res["mem_mb"] > 0 and res["cpus"] >= 1
    assert TASKS.get("cifar10-resnet20").resources["gpus"] == 1 and TASKS.get("lsq").resources["gpus"] == 0


@pytest.mark.parametrize("name, options, line", [
    ("consensus", {}, "task 'consensus' is not a training task: the consensus problem runs with `bench consensus` "
                      "(and Choco's γ is tuned on it with `bench tune-gamma`)"),
    ("nope", {}, f"unknown task 'nope'; known: {', '.join(TASKS.names())}"),
    ("digits-mlp", {"depth": 3}, "unknown option 'depth' for task 'digits-mlp'; allowed: eval_batch, hidden, "
                                 "vectorize"),
    ("mnist1d-mlp", {"vectorize": "maybe"}, "task_options.vectorize='maybe' must be true, false or auto"),
    ("lsq", {"vectorize": "maybe"}, "task_options.vectorize='maybe' must be true, false or auto"),
    ("wikitext2-lstm", {}, "task 'wikitext2-lstm' deals contiguous text shards; use data=split (got 'shuffle')")])
def test_an_unknown_or_retired_task_an_unknown_option_or_a_deal_it_cannot_take_is_one_line(name, options, line):
    with pytest.raises(BenchError) as info:
        make_task(name, TaskSetup(n_workers=2, batch_size=4, options=options))
    assert str(info.value) == line


@pytest.mark.parametrize("task, options, line", [
    ("mnist1d-mlp", {"n_train": 0}, "task_options.n_train=0 must be a whole number >= 1"),
    ("mnist1d-mlp", {"hidden": [64, 0]}, "task_options.hidden=[64, 0] must be a list of whole numbers >= 1, "
                                         "e.g. [100, 100]"),
    ("mnist1d-mlp", {"hidden": 64}, "task_options.hidden=64 must be a list of whole numbers >= 1, e.g. [100, 100]"),
    ("mnist1d-mlp", {"eval_batch": True}, "task_options.eval_batch=True must be a whole number >= 1"),
    ("wikitext2-lstm", {"tie_weights": 1}, "task_options.tie_weights=1 must be true or false"),
    ("wikitext2-lstm", {"dropout": math.inf}, "task_options.dropout=inf must be a finite number"),
    ("wikitext2-lstm", {"dropout": "x"}, "task_options.dropout='x' must be a finite number"),
    ("lsq", {"dim": 2.5}, "task_options.dim=2.5 must be a whole number >= 1")])
def test_a_bad_task_option_value_is_one_line_at_the_dag_and_at_run(task, options, line):
    with pytest.raises(BenchError) as parsed:
        check_option_values(task, options)
    with pytest.raises(BenchError) as built:
        make_task(task, TaskSetup(n_workers=2, batch_size=4, data="split", options=options))
    assert str(parsed.value) == str(built.value) == line
