"""BERT (Devlin et al., NAACL 2019) pre-training, built from a ``transformers`` config only.

Assumptions: random initialisation (no download, no hub access); the trained module is
``BertForPreTraining`` (the encoder ``BertModel`` incl. pooler + masked-LM head tied to the word
embeddings + next-sentence head), trained with the paper's two losses: masked LM on 15 % of the
positions (paper Sec. 3.1) and next-sentence prediction. Attention uses the "eager"
implementation (explicit matmul + softmax), so every FLOP is visible to PyTorch's FLOP counter.
Sequences are full (no padding), so no attention mask is passed (the model then skips masking).
The reference numbers (109,482,240 / 335,141,888 parameters) describe the encoder, ``core``.
"""

from __future__ import annotations

import torch
from torch import nn

from estimator.errors import EstimatorError
from estimator.workloads.zoo.common import Inputs, ZooModel, positive_int

MASKED_FRACTION = 0.15  # paper Sec. 3.1: 15 % of WordPiece tokens are masked


class BertPretraining(nn.Module):
    """``BertForPreTraining`` with a positional forward returning (MLM logits, NSP logits)."""

    def __init__(self, config):
        super().__init__()
        from transformers import BertForPreTraining

        self.model = BertForPreTraining(config)

    @property
    def encoder(self) -> nn.Module:
        return self.model.bert

    def forward(self, input_ids, token_type_ids):
        out = self.model(input_ids=input_ids, token_type_ids=token_type_ids)
        return out.prediction_logits, out.seq_relationship_logits


def _config(cfg, where: str):
    from transformers import BertConfig

    keys = ("hidden_size", "num_layers", "num_heads", "intermediate_size", "vocab_size", "max_position")
    hidden, layers, heads, inter, vocab, max_pos = (positive_int(cfg, k, where) for k in keys)
    if hidden % heads:
        raise EstimatorError(f"{where}.hidden_size ({hidden}) must be divisible by num_heads ({heads})")
    return BertConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=inter,
        max_position_embeddings=max_pos,
        attn_implementation="eager",
    )


def build_bert(cfg, where: str = "model") -> ZooModel:
    config = _config(cfg, where)
    seq = positive_int(cfg, "seq_len", where)
    if seq > config.max_position_embeddings:
        raise EstimatorError(f"{where}.seq_len {seq} exceeds max_position {config.max_position_embeddings}")
    vocab = config.vocab_size

    def make_inputs(batch: int, device: torch.device | str = "cpu") -> Inputs:
        gen = torch.Generator().manual_seed(0)
        ids = torch.randint(0, vocab, (batch, seq), generator=gen)
        segments = (torch.arange(seq) >= seq // 2).long().expand(batch, seq).contiguous()
        masked = torch.rand(batch, seq, generator=gen) < MASKED_FRACTION
        masked[:, 0] = True  # at least one masked position per sequence
        mlm_labels = torch.where(masked, ids, torch.full_like(ids, -100))
        nsp_labels = torch.randint(0, 2, (batch,), generator=gen)
        args = tuple(t.to(device) for t in (ids, segments))
        return args, (mlm_labels.to(device), nsp_labels.to(device))

    def loss_fn(output, target) -> torch.Tensor:
        (mlm_logits, nsp_logits), (mlm_labels, nsp_labels) = output, target
        mlm = nn.functional.cross_entropy(
            mlm_logits.reshape(-1, vocab), mlm_labels.reshape(-1), ignore_index=-100
        )
        return mlm + nn.functional.cross_entropy(nsp_logits, nsp_labels)

    module = BertPretraining(config)
    return ZooModel(
        cfg["name"],
        module,
        make_inputs,
        loss_fn,
        core=module.encoder,
        core_kwargs=("input_ids", "token_type_ids"),
        info={"seq_len": seq},
    )
