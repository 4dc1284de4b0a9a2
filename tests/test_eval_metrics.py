import math

import torch
from torch import nn

from anchorlab.tasks.anchor import AnchorTaskConfig as TaskConfig
from anchorlab.tasks.anchor.metrics import evaluate, top_deviations
from anchorlab.tasks.anchor import AnchorTask

STEPS = {1: 5, 2: 1, 3: -2, 4: -8}


class Oracle(nn.Module):
    """Reads key and anchors from the tokens; answers (4,3) with a chosen rule."""

    def __init__(self, rule_43: str, vocab: int = 201, shift_34: bool = True):
        super().__init__()
        self.rule_43, self.vocab, self.shift_34 = rule_43, vocab, shift_34
        self.dummy = nn.Parameter(torch.zeros(1))

    def forward(self, tokens, last_only=False):
        is_anchor = (tokens >= 1) & (tokens <= 4)
        pos = is_anchor.float().argmax(1)  # first anchor
        rows = torch.arange(tokens.shape[0])
        a1, a2, key = tokens[rows, pos], tokens[rows, pos + 1], tokens[rows, pos - 1]
        step = torch.tensor([0, 5, 1, -2, -8])
        out = key + step[a1] + step[a2]
        if self.shift_34:
            out = torch.where((a1 == 3) & (a2 == 4), key - 6, out)
        is43 = (a1 == 4) & (a2 == 3)
        if self.rule_43 == "symmetric":
            out = torch.where(is43, key - 6, out)
        elif self.rule_43 == "other":
            out = torch.where(is43, key + 7, out)
        # (4,3) "commutative" variant: swap-invariant answers already hold for inferential/symmetric
        logits = torch.full((tokens.shape[0], self.vocab), -1e9)
        logits[rows, out] = 0.0
        return logits if last_only else logits.unsqueeze(1).expand(-1, tokens.shape[1], -1)


def _eval(rule, preset="neurips"):
    task = AnchorTask(TaskConfig(preset=preset, n_eval_per_group=100))
    return evaluate(Oracle(rule, shift_34=preset == "neurips"), task, task.eval_sets(0))


def test_inferential_oracle():
    m, rows, devs = _eval("inferential")
    assert m["train_acc"] == 1.0 and m["id_acc"] == 1.0
    assert m["ood_inferential_acc"] == 1.0 and m["ood_symmetric_acc"] == 0.0 and m["ood_other_frac"] == 0.0
    assert top_deviations(devs, "43") == [(0, 1.0)]
    assert top_deviations(devs, "34") == [(4, 1.0)]  # (3,4) is trained with x-6 = inferential + 4


def test_symmetric_oracle_and_commutativity():
    m, rows, devs = _eval("symmetric")
    assert m["ood_symmetric_acc"] == 1.0 and m["ood_inferential_acc"] == 0.0
    assert m["hyp/43/test/symmetric"] == 1.0
    # (4,3) answered x-6 and (3,4) answered x-6: commutative
    assert m["commutativity"] == 1.0
    assert top_deviations(devs, "43") == [(4, 1.0)]


def test_other_oracle_breaks_commutativity():
    m, rows, devs = _eval("other")
    assert m["ood_other_frac"] == 1.0 and m["ood_symmetric_acc"] == 0.0 and m["ood_inferential_acc"] == 0.0
    assert m["commutativity"] == 0.0
    assert top_deviations(devs, "43") == [(17, 1.0)]


def test_journal_preset_has_no_symmetric_hypothesis():
    m, rows, _ = _eval("inferential", preset="journal")
    assert math.isnan(m["ood_symmetric_acc"])
    assert m["ood_acc"] == 1.0 and m["id_acc"] == 1.0
    assert set(rows[rows.pair.isin(["34", "43"])].role) == {"held_out"}
    # both held-out pairs are checked for commutativity
    assert {"34", "43"} <= set(rows[rows.hypothesis == "commutativity"].pair)
