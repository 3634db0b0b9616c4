"""Hand-derived exact values for the MoE-offload modules (``ahasd_sim/moe/``)."""
