"""Large-model training: tensor, pipeline, data (ZeRO) parallelism of decoder-only transformers.

``spec`` (model shapes, parameter counts) -> ``layer`` (one decoder layer, the embedding and the
LM head captured with the PyTorch profiler per tensor-parallel shard) -> ``layout`` (tp/pp/dp,
microbatches, ZeRO, recompute; memory per GPU) -> ``placement`` (where each parallel group sits
on the fabric and what its collectives cost there) -> ``step`` (1F1B step time) -> ``search``
(``parallelism.placement=auto``). ``estimate.estimate_hybrid`` ties them to a resolved config.
"""
