"""Real GPU measurements that the simulator's GPU models are checked against (docs/validation.md, docs/moe_offload.md).

``python -m ahasd_sim measure gpu`` times decode/verify steps of dense models, host-to-device
copies and the device's ceilings (:mod:`.gpu`, written to ``validation/h200_measured.csv``);
``python -m ahasd_sim measure moe`` times expert copies and MoE layer steps (:mod:`.moe_gpu`,
``validation/h200_moe_measured.csv``). ``python -m ahasd_sim validate`` reads those files.

PyTorch is an optional extra (``pip install 'ahasd_sim[measure]'``): the planning, the CSV
writing and the timing loops here import nothing heavy, and the modules that build tensors
(:mod:`.gpu_torch`, :mod:`.moe_torch`) are imported only once a run has checked that torch is
there (:func:`.common.require_torch`). Nothing here imports the simulator.
"""
