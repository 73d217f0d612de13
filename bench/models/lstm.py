"""Word-level LSTM language model (embedding → stacked LSTM → linear decoder) as in the paper's
WikiText-2 experiment: 3 layers × 650 units, dropout 0.4, decoder tied to the embedding."""
from __future__ import annotations

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


class LSTMLanguageModel(nn.Module):
    def __init__(self, vocab_size: int = WIKITEXT2_VOCAB, emb: int = 650, hidden: int = 650,
                 num_layers: int = 3, dropout: float = 0.4, tie_weights: bool = True):
        super().__init__()
        for name, value in [("vocab_size", vocab_size), ("emb", emb), ("hidden", hidden), ("num_layers", num_layers)]:
            positive_int(name, value)
        probability("dropout", dropout)
        if tie_weights and emb != hidden:
            raise BenchError(f"tie_weights needs emb == hidden, got emb={emb}, hidden={hidden}; "
                             "set them equal or tie_weights=False")
        self.num_layers, self.hidden = num_layers, hidden
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(vocab_size, emb)
        # nn.LSTM applies `dropout` between layers only; self.drop covers the input and output.
        self.rnn = nn.LSTM(emb, hidden, num_layers, dropout=dropout if num_layers > 1 else 0.0, batch_first=True)
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

    def forward(self, tokens: torch.Tensor, state: State | None = None) -> tuple[torch.Tensor, State]:
        """tokens [B, T] → logits [B, T, V] and the state after the last step, to carry across BPTT
        windows (detach it between windows to truncate backpropagation)."""
        if state is None:
            state = self.init_state(tokens.shape[0])
        out, state = self.rnn(self.drop(self.encoder(tokens)), state)
        return self.decoder(self.drop(out)), state
