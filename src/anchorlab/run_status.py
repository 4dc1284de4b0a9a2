"""The statuses a run ends in: one vocabulary for the trainer, the sweep store and every reader of results.

A run is *completed* when it ran to its end, whatever it found: ``finished`` (all its steps),
``stopped_early`` (its early-stopping rule) or ``diverged`` (a non-finite loss, itself a result: the lr was
too high for the init). It *trained* when it completed without diverging. ``pending``, ``running`` and
``failed`` are the store's other states: nothing to read yet, or an error to report.
"""

from __future__ import annotations

TRAINED = ("finished", "stopped_early")
COMPLETED = (*TRAINED, "diverged")
STATUSES = ("pending", "running", *TRAINED, "failed", "diverged")   # the store's, in its schema's order
