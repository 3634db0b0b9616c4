"""The recorders' shared work folder (traces/record/workdir.py): the one layout chain, tree and
extend-rollouts recorders resume from."""
import json
import os

from ahasd_sim.traces.record import chain, extend_rollouts, tree, workdir


def test_a_new_folder_gets_its_shards_folder_and_no_saved_settings(tmp_path):
    work = str(tmp_path / "w")
    cfg_path, prm_path = workdir.prepare(work)
    assert os.path.isdir(os.path.join(work, "shards"))
    assert (cfg_path, prm_path) == (os.path.join(work, "config.json"), os.path.join(work, "prompts.json"))
    assert workdir.saved_settings(work) is None
    workdir.prepare(work)                                  # again: an existing folder is fine


def test_a_resumed_folder_returns_what_the_first_run_wrote(tmp_path):
    work = str(tmp_path)
    cfg_path, prm_path = workdir.prepare(work)
    with open(cfg_path, "w") as f:
        json.dump({"mode": "greedy"}, f)
    with open(prm_path, "w") as f:
        json.dump([{"index": 3}], f)
    assert workdir.saved_settings(work) == ({"mode": "greedy"}, [{"index": 3}])


def test_every_recorder_uses_the_one_shard_layout():
    assert workdir.shard_path("W", 7) == os.path.join("W", "shards", "p0007.npz")
    assert workdir.shard_path("W", 12345) == os.path.join("W", "shards", "p12345.npz")
    assert chain.shard_path is tree.shard_path is extend_rollouts.shard_path is workdir.shard_path
