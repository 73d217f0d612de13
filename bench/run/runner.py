"""The runner's loop: seeding, the step loop, LR schedule, evaluation cadence, divergence, checkpoints,
progress and the records of Contract 2. Algorithms and tasks stay free of all of it. With
``--backend dist`` every process runs this loop on its own workers; rank 0 writes files. Taking the
run directory and launching the loop (one or several processes) is ``launch.py``'s."""
from __future__ import annotations

import errno
import itertools
import math
import signal
import sys
import time
from pathlib import Path

import numpy as np
import torch

from ..compressors import measure_delta
from ..faults.away import kept_rows, restore_rows
from ..faults.straggler import round_factor
from ..errors import BenchError
from ..topology.spectrum import spectrum_summary
from . import failure
from .busy import BusyMeter
from .config import RunConfig
from .driver import DriverWatch
from .identity import FINAL
from .evaluation import Counters, evaluation_row, local_sample
from .outputs import load_checkpoint, now, provenance, save_checkpoint, write_json, write_metrics
from .progress import Progress
from .schedule import lr_at, step_counts
from .setup import Parts

# steps whose losses one collective reads (under dist; the simulator reads at the same points): a diverged loss or
# a signal is acted on at most this many steps after it came
LOSS_READ_EVERY = 10

# write failures of a full or failing disk: the run fails (status 1), unlike a path refused as bad input
OUT_OF_SPACE = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO)


class Interrupted(Exception):
    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def clip_rows_(grads: torch.Tensor, max_norm: float) -> None:
    """Clip each worker's gradient (a row) to ``max_norm`` in place, as clip_grad_norm_ does per model."""
    norms = grads.norm(dim=1, keepdim=True)
    grads.mul_(torch.clamp(max_norm / (norms + 1e-12), max=1.0))


class Loop:
    def __init__(self, cfg: RunConfig, out: Path, parts: Parts, device: torch.device, previous: dict | None,
                 threads: str | None = None):
        self.cfg, self.out, self.p, self.device = cfg, out, parts, device
        self.threads = threads  # why the process runs the intra-op threads it does (bench/run/threads.py)
        self.writer = parts.rank == 0
        task = parts.task
        self.spe = task.steps_per_epoch
        self.total, self.eval_every, _ = step_counts(cfg.epochs, self.spe, cfg.eval_every)
        # stop_at pauses the run part-way (successive halving continues it later from its checkpoint)
        self.stop = self.total if cfg.stop_at is None else min(self.total, max(1, round(cfg.stop_at * self.spe)))
        self.ckpt_every = max(1, round(cfg.checkpoint_every * self.spe))
        self.local_workers = local_sample(cfg.nodes, cfg.eval_local_workers)
        self.straggler = parts.faults.straggler  # slow workers stretch a round's compute
        suffix = f"-rank{parts.rank}" if cfg.backend == "dist" else ""
        self.checkpoint = out / f"checkpoint{suffix}.pt"
        self.counters = Counters()
        self.caught: list[int] = []
        self.signalled = False  # under dist: a signal reached some process by the last read of the losses
        self.driver = DriverWatch()  # a pipeline job stops, as on SIGTERM, when its driver is gone
        self._pending: list[torch.Tensor] = []  # the steps' losses [local workers, 1] not read yet
        self.diverged_at: int | None = None  # the step whose loss said diverged
        out.mkdir(parents=True, exist_ok=True)
        state = load_checkpoint(self.checkpoint, device) if self.checkpoint.exists() else None
        if state is not None and state["fingerprint"] != cfg.fingerprint():
            raise BenchError(f"{self.checkpoint} belongs to other settings; remove it or use another --out")
        if cfg.backend == "dist":  # before either branch's collectives: a rank without a checkpoint is at step 0
            self._same_step_on_every_rank(state["counters"]["global_step"] if state is not None else 0)
        if state is not None:
            parts.algo.load_state_dict(state["algo"])
            task.load_state_dict(state["task"])
            parts.generator.set_state(state["generator"].cpu())
            self.counters = Counters(**state["counters"])
            parts.comm.round = self.counters.global_step  # a time-varying graph resumes at its phase
        else:
            spread = ((parts.x0 - parts.comm.global_mean(parts.x0)) ** 2).sum(1, keepdim=True)
            self.counters.initial_distance = float(parts.comm.global_mean(spread))
        self._settle_gradient_path()
        self.record = self._record(previous)
        if self.writer:
            write_json(out / "run.json", self.record)
        self.started = time.perf_counter()
        self.busy = BusyMeter(cfg, parts.comm, self.counters, device, cfg.backend == "dist")  # others' CPU share
        self.progress = Progress(self.total, self.counters.global_step, self.spe, quiet=cfg.quiet or not self.writer)

    def _same_step_on_every_rank(self, step: int) -> None:
        """Under dist every rank resumes from its own checkpoint (``step``: its step, 0 without one): a process
        stopped between two ranks' saves leaves them at different steps, and the ranks would train on from models
        that never met. One line instead (every rank sees the same means, so all refuse alike)."""
        step, rows = float(step), self.p.algo.x.shape[0]  # a row per worker: the mean is over the n workers
        mean, square = self.p.comm.global_mean(
            torch.tensor([[step, step * step]] * rows, dtype=torch.float64, device=self.device)).tolist()
        if square != mean * mean:  # integer steps: exact in float64, equal only when every rank has the same
            if self.p.rank != 0:
                raise SystemExit(2)  # rank 0 says it, once
            raise BenchError(f"{self.out}: the ranks' checkpoints are at different steps (a process stopped between "
                             f"two ranks' saves); remove {self.out}/checkpoint-rank*.pt to start the run again")

    def _settle_gradient_path(self) -> None:
        """The gradient path (by option and rule, never timing; vectorised only where it runs on every
        process), then one untimed, undone step on it: no one-off set-up in the first timed step."""
        task = self.p.task
        task.prepare(self.p.algo.x)
        if self.cfg.backend == "dist":
            agreed = "loop" if self._agreed(task.gradient_path != "vmap") else "vmap"
            task.use_path(agreed, "loop: the path of at least one process" if agreed == "loop"
                          else "vmap: the path of every process")
        if self.counters.global_step < self.stop:
            task.warm_up(self.p.algo.x, self.counters.global_step // self.spe)

    def _record(self, previous: dict | None) -> dict:
        cfg, p = self.cfg, self.p
        gen = torch.Generator(device=self.device).manual_seed(cfg.seed + 2)
        sample = torch.randn(min(cfg.nodes, 4), p.task.d, generator=gen, device=self.device)
        return {
            "run_id": cfg.run_id(), "fingerprint": cfg.fingerprint(), "status": "running", "config": cfg.to_dict(),
            "topology": {k: v for k, v in p.topology.describe().items()
                         if k in ("name", "n", "weights", "spectral_gap", "beta", "max_degree", "num_edges", "digest",
                                  "time_varying", "period", "gap_of")}
                         | spectrum_summary(p.topology),  # spectrum, spectrum_of, n_eff, n_eff_of
            "compressor": {**p.compressor.describe(), "delta_measured": measure_delta(
                p.compressor, sample, gen, p.task.segments if cfg.per_layer else None)},
            **p.resolved,  # how knobs left to auto were found: {"gamma": {"value", "source"}}
            "algorithm": type(p.algo).describe_with(p.algo.options),
            "task": p.task.describe(),
            "evaluation": {"every_steps": self.eval_every, "local_workers": self.local_workers,
                           "local_models": "each worker's own model on the whole test set (the paper's Table 1 "
                                           "metric: local_test_acc_mean); all n at the final evaluation",
                           "averaged_model_buffers": "mean of the workers' BatchNorm running statistics"
                           if p.task.local_buffers() is not None else None,
                           "train_loss": "averaged model on a fixed training subset; train_loss_workers: "
                                         "mean minibatch loss of the workers since the previous evaluation"},
            "steps_per_epoch": self.spe, "total_steps": self.total, "network": p.comm.network.describe(),
            # how bits_per_worker counts: what a worker put on its links (one copy per link; on a broadcast medium
            # one transmission per gossip message); bits_paper_per_worker: the paper's one payload per message
            "bits_count": "broadcast" if p.comm.network.broadcast else "links",
            # the unreliable network, when there is one (bench/faults): its schedule, seeded by the run's seed,
            # and the method's rule for a lost message; the totals are final.messages_sent/_dropped
            **({"faults": {**faults.to_dict(), "seed": cfg.seed, "rule": type(p.algo).fault_rule,
                            **({"late_rule": type(p.algo).late_rule} if faults.delays else {})}}
               if (faults := p.faults).present else {}),
            "runtime": {"backend": cfg.backend, "processes": p.world, "workers_per_process": p.task.setup.local_workers},
            "provenance": {**provenance(self.device), **({"torch_threads_reason": self.threads} if self.threads else {})},
            "start_time": (previous or {}).get("start_time") or now(),
        }

    # -- pieces of the loop ----------------------------------------------------------------
    def wall(self) -> float:
        return self.counters.wall_s + time.perf_counter() - self.started

    def epoch_now(self) -> float:
        return self.counters.global_step / self.spe

    def add_row(self, final: bool = False) -> None:
        p = self.p
        xbar = p.comm.global_mean(p.algo.x)
        row = evaluation_row(p.task, p.algo.x, xbar, self.counters, self.epoch_now(), lr_at(self.cfg, self.epoch_now()),
                             self.local_workers, self.wall(), p.comm, self.writer, final=final)
        self.counters.rows.append(row)
        self.progress.evaluated(row)

    def save(self) -> None:
        self.counters.wall_s = self.wall()
        p = self.p
        self.busy.fold(p.algo.x.shape[0])
        save_checkpoint(self.checkpoint, {"fingerprint": self.cfg.fingerprint(), "algo": p.algo.state_dict(),
                                          "task": p.task.state_dict(), "generator": p.generator.get_state(),
                                          "counters": self.counters.state()})
        self.started = time.perf_counter()

    def _agreed(self, flag: bool) -> bool:
        """The same decision on every process (a signal may reach only some of them)."""
        if self.cfg.backend != "dist":
            return flag
        return bool(self.p.comm.global_mean(torch.tensor([[float(flag)]], device=self.device)) > 0)

    def _losses_read(self) -> list[float]:
        """The mean over all workers of each step's loss since the last read, in order, from one collective:
        under dist one global sum (through rank 0: ``DistributedCommunicator._star_sum``) every ``LOSS_READ_EVERY`` steps
        (and at every evaluation, checkpoint and stop)
        instead of one a step, which on a machine with fewer cores than ranks cost as much as the gossip itself
        (docs/performance.md, h); it also carries whether a signal has reached any process
        (``self.signalled``). The simulator reads the same steps at the same points."""
        if not self._pending:
            return []
        rows = torch.cat(self._pending, dim=1)  # [local workers, steps]
        self._pending = []
        dist = self.cfg.backend == "dist"
        if dist:
            rows = torch.cat([rows, torch.full_like(rows[:, :1], float(bool(self.caught)))], dim=1)
        means = self.p.comm.global_mean(rows).tolist()
        if dist:
            self.signalled = means.pop() > 0
        return means

    def _stop_asked(self, caught: list[int], at_end: bool) -> bool:
        """Whether every process stops for a signal after this step. Under dist: as the last read of the losses
        said (a signal is seen at the next read, at most LOSS_READ_EVERY steps on), or, after the last step, by
        one more collective."""
        if self.cfg.backend != "dist":
            return bool(caught)
        return self.signalled or (at_end and self._agreed(bool(caught)))

    def step(self, batch) -> None:
        """One training step; its loss is read later, with the next ones (``_after_step``)."""
        cfg, p, c = self.cfg, self.p, self.counters
        lr = lr_at(cfg, self.epoch_now())
        p.algo.start_round()  # what the round sends regardless of the gradient goes out first (dist: while it computes)
        p.algo.epoch = self.epoch_now()
        tick = time.perf_counter()
        grads, losses, taken = self._gradients(batch)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        computed = time.perf_counter() - tick
        away = self._away_rows(c.global_step)
        workers = p.task.setup.hi - p.task.setup.lo
        kept = kept_rows(p.algo.worker_state(), away, workers) if away is not None else None
        self._pending.append(losses.detach().reshape(-1, 1))  # read with the next ones (_losses_read)
        traffic = p.algo.step(grads, lr)
        if away is not None:  # a worker that sat the round out neither stepped nor mixed: its state is as it was
            restore_rows(p.algo.worker_state(), away, kept, workers)
        base = computed if cfg.compute_time == "measured" else float(cfg.compute_time)
        # a synchronous round waits for its slowest worker (faults.straggler; 1 without); a method with a clock
        # of its own (AD-PSGD) says how far the step moved it
        units = p.algo.compute_units()
        c.time_compute_s += base * taken * (units if units is not None
                                            else round_factor(self.straggler, cfg.nodes, cfg.seed, c.global_step))
        c.global_step += 1
        c.time_comm_s += traffic.comm_time_s
        c.add_bits(traffic)

    def _gradients(self, batch) -> tuple[torch.Tensor, torch.Tensor, int]:
        """The round's gradients and losses at the method's point, clipped as the run asks, and how many gradients
        each worker computed for them: one, or more where the method asks for them (DoCoM: a second at its
        previous model on the same batch, and at the first step the mean over the epoch's first batches). The
        extra ones leave BatchNorm's running statistics as the first left them."""
        p, clip = self.p, self.cfg.grad_clip
        grads, losses = p.task.gradients(p.algo.gradient_point(), batch)
        if clip is not None:
            clip_rows_(grads, clip)
        first = p.algo.initial_batches() if self.counters.global_step == 0 else 1
        second = p.algo.second_gradient_point()
        if first == 1 and second is None:
            return grads, losses, 1
        buffers = p.task.local_buffers()
        kept = None if buffers is None else buffers.clone()
        taken = 1
        if first > 1:  # the mean gradient at the same point over the first batches (this one included)
            for more in itertools.islice(p.task.batches(0), 1, first):
                extra, _ = p.task.gradients(p.algo.gradient_point(), more)
                if clip is not None:
                    clip_rows_(extra, clip)
                grads.add_(extra)
                taken += 1
            grads.div_(taken)
        if second is not None:
            extra, _ = p.task.gradients(second, batch)
            if clip is not None:
                clip_rows_(extra, clip)
            p.algo.take_second_gradient(extra)
            taken += 1
        if kept is not None:
            buffers.copy_(kept)
        return grads, losses, taken

    def _away_rows(self, step: int) -> torch.Tensor | None:
        """This process's rows of the workers that sit out round ``step`` (faults.active/absent), or None."""
        schedule = self.p.comm.faults
        if schedule is None or not schedule.spec.away:
            return None
        lo, hi = self.p.task.setup.lo, self.p.task.setup.hi
        away = schedule.away(step)
        self.counters.workers_absent += int(away.sum())
        rows = np.flatnonzero(away[lo:hi])
        return torch.as_tensor(rows, device=self.device) if rows.size else None

    # -- the loop ----------------------------------------------------------------------------
    def run(self) -> int:
        try:
            return self._loop()
        except OSError as err:  # a write failed (a full disk): the run fails, not the program
            return failure.write_failed(self, err)
        except Exception as err:  # anything else, foreseen or not: failed with its reason, never left running
            return failure.crashed(self, err)

    def _loop(self) -> int:
        """Train with SIGTERM/SIGINT caught (a checkpoint, then status interrupted), then conclude."""
        self.caught = caught = []  # the signals caught, in order; the next read of the losses carries it under dist
        handlers = {s: signal.signal(s, lambda n, _f: caught.append(n)) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            status = self._train(caught)
        except Interrupted as stop:
            return self._interrupted(stop.signum)
        except RuntimeError as err:
            if self.cfg.backend != "dist":
                raise
            return self._peer_failed(err)
        finally:
            for s, handler in handlers.items():
                signal.signal(s, handler)
        return self._conclude(status)

    def _train(self, caught: list[int]) -> str:
        """Epochs until stop_at or the end ("completed") or a diverged loss ("diverged")."""
        if not self.counters.rows:
            self.add_row()
        while self.counters.global_step < self.stop:
            done = self._epoch(caught)
            if done:
                return done
        return "completed"

    def _epoch(self, caught: list[int]) -> str | None:
        """The rest of the current epoch's batches; the status that ends training, else None."""
        epoch, first = divmod(self.counters.global_step, self.spe)
        if first == 0:
            self.p.task.start_epoch(epoch)
        for batch in itertools.islice(self.p.task.batches(epoch), first, None):
            self.step(batch)
            done = self._after_step(caught)
            if done:
                return done
        return None

    def _after_step(self, caught: list[int]) -> str | None:
        """One step's bookkeeping: the losses read every LOSS_READ_EVERY steps and wherever they are needed
        (divergence, progress), the evaluation and checkpoint cadence, a caught signal (raises Interrupted on
        every process). The status that ends training ("diverged", or "completed" at stop_at or the end), else
        None. A diverged loss is seen when read: the run stops there, and run.json names the step it came from."""
        c = self.counters
        at_end = c.global_step in (self.stop, self.total)
        evaluate = c.global_step % self.eval_every == 0 or at_end
        save = c.global_step % self.ckpt_every == 0 or at_end
        if (c.global_step % LOSS_READ_EVERY == 0 or evaluate or save) and self._fold_losses():
            return "diverged"
        if evaluate:
            self.add_row(final=c.global_step == self.total)
        if save:
            self.save()
        if not caught and self.driver.gone():  # the pipeline driver that started this run was killed
            caught.append(signal.SIGTERM)
        if self._stop_asked(caught, at_end):
            # the steps since the last read go into the window the checkpoint keeps (else the resumed run's
            # train_loss_workers would average fewer steps than an uninterrupted run's); none under dist when
            # this step read them, on every process alike
            if self._fold_losses():
                return "diverged"
            self.save()
            raise Interrupted(caught[0] if caught else signal.SIGTERM)
        return "completed" if c.global_step >= self.stop else None

    def _fold_losses(self) -> bool:
        """The losses of the steps since the last read into the evaluation window (and the progress bar); True
        when one diverged (the run stops there: run.json names its step)."""
        c = self.counters
        losses = self._losses_read()
        first = c.global_step - len(losses) + 1
        for k, loss in enumerate(losses):
            c.window_loss_sum += loss
            c.window_steps += 1
            if not (loss <= self.cfg.divergence_loss):  # NaN compares False
                self.diverged_at = first + k
                if c.rows[-1]["step"] != c.global_step:
                    self.add_row(final=True)
                return True
        if losses:
            self.progress.step(self.epoch_now(), losses[-1], steps=len(losses))
        return False

    def _interrupted(self, signum: int) -> int:
        """A signal: the checkpoint is saved, run.json says interrupted; the same command resumes."""
        step = self.counters.global_step
        self.progress.close()
        self._finish("interrupted", {"interrupted_at_step": step})
        if self.writer:
            print(f"{self.out}: interrupted at step {step}; the same command resumes it", file=sys.stderr)
        return 128 + signum

    def _peer_failed(self, err: RuntimeError) -> int:
        """A peer process died or timed out (dist): stop with a clear line, keep what was measured."""
        rank = self.p.rank
        self.progress.close()
        message = str(err).splitlines()[0] if str(err) else type(err).__name__
        self._finish("failed", {"error": f"rank {rank}: {message}"})
        print(f"bench: error: rank {rank} stopped at step {self.counters.global_step}: {message}", file=sys.stderr)
        return 1

    def _conclude(self, status: str) -> int:
        """Paused at stop_at (the checkpoint stays) or completed/diverged (it goes); the closing line."""
        c = self.counters
        self.progress.close()
        self.busy.fold(self.p.algo.x.shape[0])  # a diverged run's last span (the others end on a checkpoint)
        if status == "completed" and c.global_step < self.total:
            status = "paused"
            self._finish(status, {"paused_at_step": c.global_step})
        else:
            self._finish(status, {"end_time": now(), **({"diverged_at_step": self.diverged_at}
                                                         if status == "diverged" and self.diverged_at else {})})
            if self.checkpoint.exists():
                self.checkpoint.unlink()
        last = c.rows[-1]
        if not self.cfg.quiet and self.writer:
            print(f"{self.out}: {status} at step {c.global_step} (epoch {self.epoch_now():.2f}); "
                  f"test_acc={last['test_acc']:.4f}, consensus_distance={last['consensus_distance']:.3g}",
                  file=sys.stderr)
        return 0

    def _finish(self, status: str, extra: dict) -> None:
        """Rank 0 writes the metrics and run.json for the whole run; the other ranks only print."""
        if not self.writer:
            return
        write_metrics(self.out / "metrics.parquet", self.counters.rows)
        write_json(self.out / "run.json", self._final_record(status, extra))

    def _final_record(self, status: str, extra: dict) -> dict:
        c, p = self.counters, self.p
        record = {**self.record, "status": status, **extra, "timing": self.busy.timing()}
        if c.rows:
            last = c.rows[-1]
            accs = [r["test_acc"] for r in c.rows if not math.isnan(r["test_acc"])]
            record["final"] = {**last, "best_test_acc": max(accs) if accs else math.nan}
        if c.local_all is not None and c.rows and c.local_all["step"] == c.rows[-1]["step"]:
            record["final_local"] = c.local_all  # every worker's own model at the last evaluation
        runtime = p.comm.describe_runtime(c.global_step)  # the communicator says what it measured
        if runtime:
            runtime.update(measured_comm_s=c.time_comm_s, measured_comm_per_round_s=c.time_comm_s / max(c.global_step, 1))
            record["runtime"] = {**record["runtime"], **runtime}
        return record
