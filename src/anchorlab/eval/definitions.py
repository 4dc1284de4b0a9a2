"""Named metric definitions: which metric columns a figure reads as ID, OOD, train accuracy and commutativity.

The phase rules (:mod:`.phases`) and the figures read an "ID", an "OOD" and a
"commutativity" column; a definition names them. ``anchorlab`` reads the anchor
task's aggregates (:mod:`anchorlab.tasks.anchor.metrics`); ``authors-fig3`` the
columns the authors' journal Fig. 3 code reads (fig_code/fig3/figB.py: ID = pair
(1,2) on test keys, OOD = pair (4,3) on training keys, train = pair (1,2) on its
training sequences). A sweep picks one with ``aggregate.metrics``.
"""

from __future__ import annotations

from dataclasses import dataclass

from anchorlab.config import ConfigError


@dataclass(frozen=True)
class MetricDefinition:
    """Which metric columns a figure reads as ID, OOD, train accuracy and commutativity."""

    id: str
    ood: str
    train: str
    commutativity: str
    text: str


METRIC_DEFINITIONS = {
    "anchorlab": MetricDefinition(
        "id_acc", "ood_acc", "train_acc", "commutativity",
        "ID = seen pairs on ID-test keys; OOD = held-out pairs (inferential target) on both key splits; "
        "train = seen pairs on fresh sequences with training keys"),
    "authors-fig3": MetricDefinition(
        "acc/12/test", "acc/43/train", "acc/12/seen", "commutativity",
        "the authors' journal Fig. 3: ID = pair (1,2) on test keys; OOD = pair (4,3) (inferential) on "
        "training keys; train = pair (1,2) on its training sequences"),
}


def metric_definition(name: str) -> MetricDefinition:
    """The definition called ``name``; a :class:`ConfigError` naming ``aggregate.metrics`` otherwise."""
    if name not in METRIC_DEFINITIONS:
        raise ConfigError(f"aggregate.metrics: must be one of {', '.join(repr(k) for k in METRIC_DEFINITIONS)}, "
                          f"got {name!r}")
    return METRIC_DEFINITIONS[name]
