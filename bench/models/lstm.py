"""Word-level LSTM language model (embedding → stacked LSTM → linear decoder) as in the paper's
WikiText-2 experiment: 3 layers × 650 units, dropout 0.4, decoder tied to the embedding.

Two implementations of one computation share the parameters of ``self.rnn`` (an ``nn.LSTM``, so
names, shapes and order are PyTorch's): the library kernel (cuDNN on GPU), for evaluation and the
per-worker loop, and the recurrence unrolled into matrix products (``unrolled=True``), which
``torch.func.vmap`` batches over workers (``nn.LSTM`` has no batching rule). Dropout is applied
through explicit masks, so both implementations can be given the same ones.
"""
from __future__ import annotations

import warnings
from collections.abc import Sequence

import torch
from torch import nn

from ..errors import BenchError
from .util import positive_int, probability

# WikiText-2's published vocabulary (train/valid/test share it).
WIKITEXT2_VOCAB = 33_278
# A tied 3 × 650 model has 28.95 M parameters (the paper's count) only with a vocabulary of
# 28,862…28,877 tokens; 28,869 gives 28,949,319. With 33,278 tokens it has 31.82 M (53.45 M untied).
PAPER_VOCAB = 28_869

State = tuple[torch.Tensor, torch.Tensor]
Masks = Sequence[torch.Tensor]


class LSTMLanguageModel(nn.Module):
    def __init__(self, vocab_size: int = WIKITEXT2_VOCAB, emb: int = 650, hidden: int = 650,
                 num_layers: int = 3, dropout: float = 0.4, tie_weights: bool = True):
        super().__init__()
        for name, value in [("vocab_size", vocab_size), ("emb", emb), ("hidden", hidden), ("num_layers", num_layers)]:
            positive_int(name, value)
        self.dropout = probability("dropout", dropout)
        if tie_weights and emb != hidden:
            raise BenchError(f"tie_weights needs emb == hidden, got emb={emb}, hidden={hidden}; "
                             "set them equal or tie_weights=False")
        self.num_layers, self.emb, self.hidden = num_layers, emb, hidden
        self.encoder = nn.Embedding(vocab_size, emb)
        # the LSTM's own between-layer dropout stays off: every dropout (input, between layers,
        # output) is one of the masks of dropout_masks, applied by forward
        self.rnn = nn.LSTM(emb, hidden, num_layers, batch_first=True)
        self.decoder = nn.Linear(hidden, vocab_size)
        # Small uniform init of the (shared) word vectors, as in the AWD/PyTorch word LM recipes.
        nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)
        if tie_weights:
            # Tying (Press & Wolf 2017; Inan et al. 2017) shares one V × H matrix, one tensor.
            self.decoder.weight = self.encoder.weight
        else:
            nn.init.uniform_(self.decoder.weight, -0.1, 0.1)

    def init_state(self, batch: int) -> State:
        """Zero (h, c), each [num_layers, batch, hidden], on the model's device and dtype."""
        like = self.decoder.bias
        shape = (self.num_layers, batch, self.hidden)
        return like.new_zeros(shape), like.new_zeros(shape)

    # -- dropout -------------------------------------------------------------------------------
    @property
    def mask_width(self) -> int:
        """Uniforms per token that dropout_masks needs: the input, the num_layers − 1 gaps, the output."""
        return self.emb + self.num_layers * self.hidden

    def dropout_masks(self, uniform: torch.Tensor) -> list[torch.Tensor]:
        """Uniforms ``[..., B, T, mask_width]`` in [0, 1) → keep-masks scaled by 1/(1 − p), in the
        model's dtype: one ``[..., B, T, emb]`` for the embeddings, then ``num_layers`` of
        ``[..., B, T, hidden]`` (after each layer; the last one feeds the decoder)."""
        if uniform.shape[-1] != self.mask_width:
            raise BenchError(f"dropout uniforms have {uniform.shape[-1]} values per token; the model needs "
                             f"mask_width={self.mask_width}")
        keep = (uniform >= self.dropout).to(self.decoder.bias.dtype) / (1.0 - self.dropout)
        return list(keep.split([self.emb] + [self.hidden] * self.num_layers, dim=-1))

    # -- forward -------------------------------------------------------------------------------
    def forward(self, tokens: torch.Tensor, state: State | None = None, masks: Masks | None = None,
                unrolled: bool = False) -> tuple[torch.Tensor, State]:
        """tokens [B, T] → logits [B, T, V] and the state after the last step, to carry across BPTT
        windows (detach it between windows to truncate backpropagation).

        ``masks``: dropout keep-masks from dropout_masks; without them a module in training mode
        draws its own from the global generator (as nn.Dropout would). ``unrolled``: the
        recurrence as matrix products, which torch.func.vmap can batch over workers."""
        if state is None:
            state = self.init_state(tokens.shape[-2])
        if masks is None and self.training and self.dropout > 0:
            masks = self.dropout_masks(torch.rand(*tokens.shape, self.mask_width, device=tokens.device))
        x = self.encoder(tokens)
        if masks is not None:
            x = x * masks[0]
        between = masks[1:-1] if masks is not None else None
        if unrolled:
            out, state = self._unrolled(x, state, between)
        elif between:
            out, state = self._per_layer(x, state, between)
        else:
            out, state = self.rnn(x, state)
        if masks is not None:
            out = out * masks[-1]
        return self.decoder(out), state

    def _layer_weights(self, k: int) -> list[torch.Tensor]:
        return [getattr(self.rnn, f"{kind}_l{k}") for kind in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]

    def _per_layer(self, x: torch.Tensor, state: State, between: Masks) -> tuple[torch.Tensor, State]:
        """The library kernel one layer at a time, masks applied in between: nn.LSTM's fused
        multi-layer call cannot take our masks, but each layer still runs in the kernel nn.LSTM uses
        (cuDNN on GPU, oneDNN's fused layer on CPU), which for one worker is far faster than the
        unrolled recurrence (on this project's 2-core CPU it beats even the vectorised path; see
        Recurrence). torch._VF.lstm is the call nn.LSTM.forward makes; PyTorch has no public
        functional LSTM taking given weights. On GPU, the weights of a layer after the first do not
        start nn.LSTM's flat cuDNN buffer, so cuDNN copies them into its layout per call and warns
        that they are not one contiguous chunk; that copy is small next to the layer's work."""
        h0, c0 = state
        hs, cs = [], []
        for k in range(self.num_layers):
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=".*weights are not part of single contiguous chunk")
                x, h, c = torch._VF.lstm(x, (h0[k:k + 1], c0[k:k + 1]), self._layer_weights(k), True, 1, 0.0,
                                         self.training, False, True)
            hs.append(h)
            cs.append(c)
            if k < self.num_layers - 1:
                x = x * between[k]
        return x, (torch.cat(hs), torch.cat(cs))

    def _unrolled(self, x: torch.Tensor, state: State, between: Masks | None) -> tuple[torch.Tensor, State]:
        """Per layer one product for the inputs of all time steps, then the recurrence (Recurrence)."""
        h0, c0 = state
        hs, cs = [], []
        for k in range(self.num_layers):
            w_ih, w_hh, b_ih, b_hh = self._layer_weights(k)
            from_input = torch.addmm(b_ih + b_hh, x.flatten(0, 1), w_ih.T).view(*x.shape[:2], 4 * self.hidden)
            x, c_seq, _, _ = Recurrence.apply(from_input, h0[k], c0[k], w_hh)
            hs.append(x[:, -1])
            cs.append(c_seq[:, -1])
            if between and k < self.num_layers - 1:
                x = x * between[k]
        return x, (torch.stack(hs), torch.stack(cs))


class Recurrence(torch.autograd.Function):
    """One LSTM layer over time, given its input projections ``[B, T, 4H]`` (biases included), the
    initial ``h0, c0 [B, H]`` and ``w_hh [4H, H]``; returns every step's h and c ``[B, T, H]`` (and the
    gate activations, for the backward). PyTorch's gate order i, f, g, o.

    Every operation is a plain tensor operation, so torch.func can vmap it over workers
    (``generate_vmap_rule``). The backward is written out because autograd's own, through the unrolled
    steps, forms the gradient of ``w_hh`` as T products with an inner dimension of only B, summed one
    step at a time into a worker-stacked ``[n, 4H, H]`` buffer: 2.2x slower (n = 32, H = 256, B = 8, one
    CPU thread). Here the backward loop carries only (dh, dc), and ``w_hh``'s gradient is one product over
    all T·B rows at the end."""

    generate_vmap_rule = True

    @staticmethod
    def forward(from_input, h0, c0, w_hh):
        H = h0.shape[-1]
        w_hh_t = w_hh.T
        h, c = h0, c0
        hs, cs, sigmoids, g_tanhs = [], [], [], []
        for step_input in from_input.unbind(1):
            gates = torch.addmm(step_input, h, w_hh_t)
            sig = gates.sigmoid()  # i, f and o; the g quarter is taken through tanh instead
            i, f, _, o = sig.chunk(4, dim=-1)
            g = gates.narrow(-1, 2 * H, H).tanh()
            c = torch.addcmul(f * c, i, g)
            h = o * c.tanh()
            hs.append(h)
            cs.append(c)
            sigmoids.append(sig)
            g_tanhs.append(g)
        return torch.stack(hs, 1), torch.stack(cs, 1), torch.stack(sigmoids, 1), torch.stack(g_tanhs, 1)

    @staticmethod
    def setup_context(ctx, inputs, output):
        _, h0, c0, w_hh = inputs
        hs, cs, sigmoids, g_tanhs = output
        ctx.mark_non_differentiable(sigmoids, g_tanhs)
        ctx.save_for_backward(h0, c0, w_hh, hs, cs, sigmoids, g_tanhs)

    @staticmethod
    def backward(ctx, d_hs, d_cs, _d_sigmoids, _d_g_tanhs):
        h0, c0, w_hh, hs, cs, sigmoids, g = ctx.saved_tensors
        i, f, _, o = sigmoids.chunk(4, dim=-1)
        tanh_c = cs.tanh()
        c_prev = torch.cat([c0.unsqueeze(1), cs[:, :-1]], 1)
        # d gates = [dc, dc, dc, dh] * (partner * slope of the activation), the latter for all steps at once:
        # c = f c_prev + i g and h = o tanh(c) pair i with g, f with c_prev, g with i, o with tanh(c)
        slope = torch.cat([i * (1 - i), f * (1 - f), 1 - g * g, o * (1 - o)], -1)
        per_gate = (torch.cat([g, c_prev, i, tanh_c], -1) * slope).unbind(1)
        h_to_c = (o * (1 - tanh_c * tanh_c)).unbind(1)  # dc/dh at the same step
        forget = f.unbind(1)
        dh_next, dc_next = torch.zeros_like(h0), torch.zeros_like(c0)
        d_gates = []
        for t, (dh_out, dc_out) in reversed(list(enumerate(zip(d_hs.unbind(1), d_cs.unbind(1))))):
            dh = dh_out + dh_next
            dc = torch.addcmul(dc_next + dc_out, dh, h_to_c[t])
            d_gate = torch.cat([dc, dc, dc, dh], -1) * per_gate[t]
            dc_next = dc * forget[t]
            dh_next = d_gate @ w_hh
            d_gates.append(d_gate)
        d_gates = torch.stack(d_gates[::-1], 1)
        h_prev = torch.cat([h0.unsqueeze(1), hs[:, :-1]], 1)
        d_w_hh = d_gates.flatten(0, 1).T @ h_prev.flatten(0, 1)
        return d_gates, dh_next, dc_next, d_w_hh
