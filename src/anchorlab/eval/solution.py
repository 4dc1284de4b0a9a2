"""A run's solution of the held-out pair, read on both mappings at once.

The one label every study uses for a single run (final metrics, or any one evaluation): the journal
calls OOD accuracy >= 50% the reasoning phase; a run that fits the seen pairs answers the held-out pair
by composing (the inferential target) or by memorizing (the mirror's, symmetric target), or neither.
"""

from __future__ import annotations

SOLUTIONS = ("composes", "memorizes", "neither", "unfit")


def outcome(id_acc: float, inferential: float, symmetric: float, threshold: float = 0.5,
            id_min: float = 0.9) -> str:
    """A trained run's solution of the held-out pair: ``unfit`` below ``id_min`` ID accuracy; else
    ``composes`` / ``memorizes`` when the inferential / symmetric accuracy reaches ``threshold`` (the
    journal's 0.5; the two answers differ, so at most one can pass 0.5), ``neither`` otherwise. A
    mapping the task does not define (NaN, e.g. no mirror pair) never passes and never outranks the other."""
    if not id_acc >= id_min:
        return "unfit"
    if inferential >= threshold and not symmetric >= inferential:
        return "composes"
    if symmetric >= threshold and not inferential >= symmetric:
        return "memorizes"
    return "neither"
