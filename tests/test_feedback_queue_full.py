"""A one-entry feedback queue must not deadlock AHASD.

A pre-verification result is posted to the feedback queue by the drafter's own process, and the
drafter is the queue's only reader: with the queue full, waiting for room would wait for itself.
Before the fix this window stopped at 75 of 512 committed tokens and ran into run.max_sim_time_s."""
from ahasd_sim.config.loader import load_config
from ahasd_sim.simulation import run_simulation


def test_one_entry_feedback_queue_completes_the_window():
    cfg = load_config("hw_configs/ahasd_mobile.yaml", [
        "ahasd.feedback_queue_entries=1", "run.windows=1", "run.trace_start_prompt=5",
        "run.generated_tokens=512", "run.max_sim_time_s=200"])
    s = run_simulation(cfg).summary
    assert s["generated_tokens"] == 512
    fb = s["mode_stats"]["queues"]["feedback"]
    assert fb["capacity"] == 1 and fb["max_occupancy"] == 1
    assert s["mode_stats"]["tvc"]["successful"] >= 1          # the drafter did post its own verdicts
    assert s["duplicate_drafter_forwards"] == 0


def test_queue_sizes_and_peaks_are_not_summed_over_windows():
    cfg = load_config("hw_configs/ahasd_mobile.yaml", [
        "ahasd.feedback_queue_entries=3", "ahasd.unverified_queue_batches=5", "run.windows=3",
        "run.generated_tokens=256"])
    s = run_simulation(cfg).summary
    q = s["mode_stats"]["queues"]
    assert q["feedback"]["capacity"] == 3 and q["unverified_draft"]["capacity"] == 5
    assert 1 <= q["feedback"]["max_occupancy"] <= 3 and 1 <= q["unverified_draft"]["max_occupancy"] <= 5
