"""Large-model training across fabrics (experiment ``llm``, issue #14): best layout per fabric."""

from __future__ import annotations

from estimator.reports.model import Figure, Section, Table
from estimator.reports.plots import line_plot

BEST_SQL = """
SELECT model_name, fabric_name, nodes, layout, iter_time_s, mfu, exposed_comm_share,
       bubble_time_s / iter_time_s AS bubble_share, tp_comm_time_s, pp_p2p_time_s, dp_exposed_time_s,
       memory_total_bytes / 1e9 AS memory_gb
FROM estimates
WHERE parallelism_strategy = 'hybrid' AND parallelism_placement = 'auto'
ORDER BY model_name, nodes, iter_time_s
"""

# Per fabric and point: the parallel dimension whose exposed communication is most below the leaf-spine's
# (the electrical reference) at the same model and GPU count; each side with its own best layout.
HELPS_SQL = """
WITH h AS (
  SELECT model_name, fabric_name, nodes, iter_time_s, tp_comm_time_s AS tp, pp_p2p_time_s AS pp,
         dp_exposed_time_s AS dp
  FROM estimates WHERE parallelism_strategy = 'hybrid' AND parallelism_placement = 'auto'
)
SELECT f.model_name, f.fabric_name, f.nodes, r.iter_time_s / f.iter_time_s AS speedup_vs_leafspine,
       r.tp - f.tp AS tp_saved_s, r.pp - f.pp AS pp_saved_s, r.dp - f.dp AS dp_saved_s,
       CASE WHEN GREATEST(r.tp - f.tp, r.pp - f.pp, r.dp - f.dp) <= 0 THEN 'none'
            WHEN r.tp - f.tp >= GREATEST(r.pp - f.pp, r.dp - f.dp) THEN 'tp'
            WHEN r.dp - f.dp >= r.pp - f.pp THEN 'dp' ELSE 'pp' END AS helps_most
FROM h f JOIN h r ON r.fabric_name = 'nvlink_leafspine' AND r.model_name = f.model_name AND r.nodes = f.nodes
WHERE f.fabric_name <> 'nvlink_leafspine'
ORDER BY f.model_name, f.nodes, speedup_vs_leafspine DESC
"""


MODEL_NAMES = {"gpt3_175b": "GPT-3 175B", "llama2_70b": "Llama-2 70B"}


SECTION = Section(
    key="llm",
    title="Large-model training: best tensor x pipeline x data layout per fabric",
    intro=(
        "GPT-3 175B and Llama-2 70B (one decoder layer per tensor-parallel shard captured with torch.profiler "
        "on the meta device; the presets' Megatron-core / Transformer Engine layer: flash attention, fused "
        "norms and activations), global batch 1536 sequences, A100 80 GB. For every fabric and GPU count the "
        "estimator searches tp, pp, dp, micro-batch size, rank order and sequence parallelism (placement=auto) "
        "for the fastest "
        "layout that fits memory; TP all-reduces, 1F1B pipeline sends and ZeRO-1 gradient reduce-scatter / "
        "all-gather are priced where each group sits: on the leaf-spine inside a node or across nodes, "
        "sharing the node's uplinks; on the OCS each group gets its own circuits on its servers' ports and "
        "pays the MEMS reconfiguration (25 ms) whenever a phase must rewire them; on SiPAC by the switch "
        "levels a group spans; on OPSquare inside a pod or across pods; Lumorph builds circuits per group; "
        "TeraRack shares wavelengths. OPSquare runs at 1,024 nodes only (the paper's largest), SiPAC and BCube "
        "at 8^4 = 4,096 (conf/experiment/llm.yaml). 'ideal' is the default ideal switch (300 GB/s per GPU, "
        "conf/fabric/ideal.yaml), a reference, not a bound: fabrics with more bandwidth per GPU (OPSquare's "
        "3.6 Tb/s channel) beat it. Not modelled: output-port contention between concurrent groups on OPSquare."
    ),
    figures=(
        Figure(name="llm_mfu_vs_gpus", title="MFU of the best layout vs GPUs", sql=BEST_SQL,
               plot=line_plot("nodes", "mfu", ["fabric_name"], xlabel="GPUs (A100 80 GB)",
                              ylabel="model FLOPs utilisation (%)", logy=False, yscale=100, facet="model_name",
                              facet_title=lambda m: MODEL_NAMES.get(m, m)),
               caption="One panel per model, one colour and marker per fabric (a fabric run at one size only is a "
                       "single point). At a fixed global batch, more GPUs mean fewer microbatches per pipeline, so the "
                       "bubble and exposed communication grow."),
    ),
    tables=(
        Table(name="llm_best_layouts", title="Best layout per model, fabric and GPU count", sql=BEST_SQL),
        Table(name="llm_helps_most", title="Which parallel dimension each fabric helps most (vs the leaf-spine)",
              sql=HELPS_SQL),
    ),
    order=60,
)
