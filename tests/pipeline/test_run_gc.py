"""The run's garbage-collector settings: undone at the end, except another part's freeze."""

from __future__ import annotations

import gc

from streamanon.pipeline.run import lean_gc


def test_a_run_thaws_what_it_froze_and_restores_the_thresholds() -> None:
    gc.unfreeze()
    before = gc.get_threshold()
    with lean_gc(young=12_345):
        assert gc.get_threshold()[0] == 12_345
        assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


def test_a_freeze_made_during_the_run_is_kept() -> None:
    gc.unfreeze()
    with lean_gc():
        frozen_by_the_run = gc.get_freeze_count()
        kept = [[i] for i in range(5_000)]  # long-lived objects another part freezes for good
        gc.freeze()
        with_ours = gc.get_freeze_count()
        assert with_ours > frozen_by_the_run + 4_000
    assert gc.get_freeze_count() > with_ours - 1_000  # not thawed (a thaw leaves 0)
    assert len(kept) == 5_000
    gc.unfreeze()
