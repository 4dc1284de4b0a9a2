"""Concept-graph diffusion (journal Fig. 6): renders, split, scheduler, U-Net, init rate, classifier, a tiny run."""

import math

import numpy as np
import pytest
import torch

from anchorlab.config import ConfigError, experiment_from_dict, load_config
from anchorlab.tasks.concepts.config import ConceptsTaskConfig
from anchorlab.tasks.concepts.render import NODES, describe, node_of, render_nodes

TINY = ["task.per_node=16", "task.n_samples=2", "task.sampler=ddim", "task.sample_steps=3", "task.n_denoise=4",
        "model.channels=[8,8,8,8]", "model.norm_groups=4", "train.batch_size=16", "train.epochs=1",
        "train.eval_every=2", "train.threads=1"]


def geometric_bits(img: np.ndarray) -> tuple[int, int, int]:
    """(shape, size, color) read off a render: fill ratio of the bounding box, area, red vs blue."""
    fg = img.max(axis=0) > 0.3
    ys, xs = np.nonzero(fg)
    box = (ys.max() - ys.min() + 1) * (xs.max() - xs.min() + 1)
    fill = fg.sum() / box                             # circle pi/4 = 0.79, triangle 0.5
    area_frac = fg.sum() / fg.size                     # large pi 0.28^2 = 0.25, small 0.09
    red, blue = img[0][fg].mean(), img[2][fg].mean()
    return int(fill < 0.65), int(area_frac < 0.16), int(blue > red)


def test_bit_order_follows_the_journal():
    assert describe("010") == "small red circle" and describe("011") == "small blue circle"
    assert [describe(n) for n in ("000", "100", "001", "111")] == [
        "large red circle", "large red triangle", "large blue circle", "small blue triangle"]


@pytest.mark.parametrize("side", [32, 64])
def test_renders_carry_the_right_labels(side):
    r = render_nodes(NODES, 12, side, seed=5)
    assert r.images.shape == (96, 3, side, side) and r.images.min() >= 0 and r.images.max() <= 1
    read = [geometric_bits(im) for im in r.images]
    assert node_of(np.array(read)) == node_of(r.bits)


def test_renders_are_deterministic_per_seed_and_jittered():
    a, b, c = (render_nodes(("010",), 4, 32, seed=s) for s in (1, 1, 2))
    assert np.array_equal(a.images, b.images) and not np.array_equal(a.images, c.images)
    assert not np.array_equal(a.images[0], a.images[1])   # jitter: no two renders alike


def test_the_training_split_never_holds_010_or_011():
    from anchorlab.tasks.concepts.task import ConceptsTask

    task = ConceptsTask(ConceptsTaskConfig(per_node=40))
    for seed in (0, 1):
        r = task.train_renders(seed)
        assert set(node_of(r.bits)) == {"000", "100", "001", "111"}
        read = {"".join(map(str, geometric_bits(im))) for im in r.images}   # the pixels agree
        assert read == {"000", "100", "001", "111"}
    assert task.cfg.test_nodes == ("010", "011", "101", "110")


def test_config_errors_name_the_field():
    with pytest.raises(ConfigError, match="task.train_nodes"):
        ConceptsTaskConfig(train_nodes=("000", "012"))
    with pytest.raises(ConfigError, match="model.arch: the concepts task needs 'concept_unet'"):
        experiment_from_dict({"task": {"name": "concepts"}})
    with pytest.raises(ConfigError, match="model.concept_dims"):
        load_config("concepts/cpu", ["task.condition=onehot"])
    with pytest.raises(ConfigError, match="init.scheme"):
        load_config("concepts/cpu", ["init.scheme=kaiming"])
    with pytest.raises(ConfigError, match="task.resolution: must be a multiple of 8"):
        load_config("concepts/cpu", ["task.resolution=36"])


def test_the_scheduler_noises_and_denoises_back():
    pytest.importorskip("diffusers")
    from anchorlab.tasks.concepts.diffusion import make_scheduler, noised, sample

    cfg = ConceptsTaskConfig(sample_steps=25)
    sched = make_scheduler(cfg)
    x0 = torch.from_numpy(render_nodes(("010", "100"), 2, 32, seed=0).images)
    noise = torch.randn(x0.shape, generator=torch.Generator().manual_seed(0))
    t = torch.tensor([0, 100, 300, 499])
    xt = noised(sched, x0, noise, t)
    abar = sched.alphas_cumprod[t].view(-1, 1, 1, 1)
    assert torch.allclose((xt - (1 - abar).sqrt() * noise) / abar.sqrt(), x0, atol=1e-4)
    assert float((xt[3] - noise[3]).abs().max()) < 0.2            # t = T-1 is almost pure noise

    class Oracle(torch.nn.Module):    # predicts the exact noise that leads from x0 to x_t
        def forward(self, x, tt, cond):
            a = sched.alphas_cumprod[tt].view(-1, 1, 1, 1)
            return (x - a.sqrt() * x0[: len(x)]) / (1 - a).sqrt()

    for sampler in ("ddpm", "ddim"):
        c = ConceptsTaskConfig(sampler=sampler, sample_steps=25)
        out = sample(Oracle(), torch.zeros(len(x0), 6), (3, 32, 32), c, seed=0, batch=len(x0))
        assert torch.allclose(out, x0, atol=1e-3), sampler


def _unet(channels=(8, 16, 16, 16), groups=4):
    pytest.importorskip("diffusers")
    from anchorlab.model.unet import build_unet
    from anchorlab.model.unet_config import ConceptUNetConfig

    return build_unet(ConceptUNetConfig(channels=channels, norm_groups=groups))


@pytest.mark.parametrize("side", [32, 64])
def test_unet_output_shape_and_module_types(side):
    m = _unet()
    x = torch.randn(2, 3, side, side)
    assert m(x, torch.tensor([3, 400]), torch.randn(2, 6)).shape == (2, 3, side, side)
    with_params = {type(mod).__name__ for mod in m.modules() if list(mod.parameters(recurse=False))}
    assert with_params == {"Conv2d", "Linear", "GroupNorm"}
    down = [mod for mod in m.unet.modules() if type(mod).__name__ == "Downsample2D"]
    up = [mod for mod in m.unet.modules() if type(mod).__name__ == "Upsample2D"]
    assert len(down) == 3 and len(up) == 3                       # three down- and three up-sampling stages


def test_the_condition_changes_the_output():
    m = _unet()
    x, t = torch.randn(1, 3, 32, 32), torch.tensor([10])
    assert not torch.allclose(m(x, t, torch.zeros(1, 6)), m(x, t, torch.ones(1, 6)))


@pytest.mark.parametrize("gamma", [0.5, 1.0])
def test_init_rate_std_per_layer_with_the_uniform_distribution(gamma):
    from anchorlab.config import InitConfig
    from anchorlab.model.init import apply_init_rate

    m = _unet(channels=(32, 64, 64, 64), groups=8)
    scale = 1 / math.sqrt(3)
    t = apply_init_rate(m, InitConfig(gamma=gamma, scale=scale, distribution="uniform", bias="gamma"),
                        generator=torch.Generator().manual_seed(0))
    assert set(t.name) == {n for n, _ in m.named_parameters()}
    assert not (t.group == "other").any()
    params = dict(m.named_parameters())
    for r in t[t.role.isin(["conv", "linear"])].itertuples():
        mod = m.get_submodule(r.name.rsplit(".", 1)[0])
        true_fan = mod.in_features if isinstance(mod, torch.nn.Linear) else mod.in_channels * math.prod(mod.kernel_size)
        assert r.fan_in == true_fan and math.isclose(r.target_std, scale * true_fan ** -gamma), r.name
        assert float(params[r.name].detach().abs().max()) <= true_fan ** -gamma * (1 + 1e-6)    # U(-bound, bound)
        if r.numel >= 2000:
            assert abs(r.measured_std / r.target_std - 1) < 6 / math.sqrt(2 * r.numel) + 0.02, r.name


def test_framework_default_is_pytorchs_init_seeded_and_recorded():
    pytest.importorskip("diffusers")
    from anchorlab.train.run import init_model

    base = ["model.channels=[32,64,64,64]", "init.scheme=framework_default"]
    (a, ta), (b, _), (c, _) = (init_model(load_config("concepts/cpu", base + [f"train.init_seed={s}"]))
                               for s in (0, 0, 1))
    sa, sc = a.state_dict(), c.state_dict()
    assert all(torch.equal(v, b.state_dict()[k]) for k, v in sa.items())
    assert any(not torch.equal(v, sc[k]) for k, v in sa.items() if v.numel() > 1)
    assert (ta.init_scheme == "framework_default").all() and ta.gamma.isna().all()
    big = ta[(ta.numel >= 2000) & ta.target_std.notna() & (ta.role != "norm")]
    assert len(big) > 10
    assert ((big.measured_std / big.target_std - 1).abs() < 0.06).all()   # 1/sqrt(3 fan_in): PyTorch's default
    _, tr = init_model(load_config("concepts/cpu", ["model.channels=[32,64,64,64]"]))
    assert (tr.init_scheme == "rate").all() and tr.gamma.notna().any()


@pytest.mark.slow
def test_the_classifier_reaches_99_percent_on_held_out_renders():
    from anchorlab.tasks.concepts.classifier import ClassifierSpec, train_classifier

    _, info = train_classifier(ClassifierSpec())
    assert all(v >= 0.99 for v in info["heldout_acc"].values()), info["heldout_acc"]


def test_a_quick_classifier_already_separates_the_concepts():
    from anchorlab.tasks.concepts.classifier import ClassifierSpec, train_classifier

    _, info = train_classifier(ClassifierSpec(per_node=60, heldout_per_node=40, steps=120, batch=64))
    acc = info["heldout_acc"]
    assert acc["all"] >= 0.95 and acc["object"] >= 0.95 and acc["no_object"] >= 0.95, acc


class _Judge(torch.nn.Module):
    """A stand-in classifier: every image gets the same logits (shape, size, color, object)."""

    def __init__(self, logits):
        super().__init__()
        self.logits = torch.tensor(logits, dtype=torch.float32)

    def forward(self, x):
        return self.logits.expand(len(x), -1)


@pytest.mark.parametrize("reject", [True, False])
def test_a_sample_judged_empty_counts_wrong_on_every_concept(monkeypatch, reject):
    from anchorlab.tasks.concepts.task import ConceptsEval, ConceptsTask

    task = ConceptsTask(ConceptsTaskConfig(n_samples=3, reject_no_object=reject))
    monkeypatch.setattr(task, "denoise_losses", lambda model, ev, device: {n: 0.0 for n in NODES})
    monkeypatch.setattr(task, "generate", lambda model, nodes, n, device: torch.zeros(len(nodes), n, 3, 32, 32))
    ev = ConceptsEval(_Judge([-1.0, -1.0, -1.0, -1.0]), *(torch.zeros(0),) * 4)   # bits 000, no object
    m = task.evaluate(None, ev).metrics
    assert m["object_rate_000"] == 0.0
    assert m["all_acc_000"] == (0.0 if reject else 1.0)
    assert m["shape_acc_010"] == (0.0 if reject else 1.0)       # 010's shape bit is 0 (circle) too
    assert m["shape_acc_100"] == 0.0
    ev = ConceptsEval(_Judge([-1.0, -1.0, -1.0, 1.0]), *(torch.zeros(0),) * 4)    # bits 000, an object
    m = task.evaluate(None, ev).metrics
    assert m["object_rate_000"] == 1.0 and m["all_acc_000"] == 1.0 and m["size_acc_010"] == 0.0


@pytest.fixture
def fast_classifier(monkeypatch):
    from anchorlab.tasks.concepts import task as task_mod
    from anchorlab.tasks.concepts.classifier import ClassifierSpec

    monkeypatch.setattr(task_mod, "classifier_spec",
                        lambda cfg: ClassifierSpec(resolution=cfg.resolution, per_node=8, heldout_per_node=4, steps=5))


def test_a_tiny_run_trains_evaluates_and_resumes_exactly(tmp_path, fast_classifier):
    pytest.importorskip("diffusers")
    from anchorlab.train import train

    cfg = load_config("concepts/cpu", TINY + [f"task.classifier_dir={tmp_path / 'clf'}"])
    full = train(cfg, tmp_path / "full")
    assert full.final["status"] == "finished" and full.final["steps"] == 4
    f = full.final["final"]
    for k in ("shape_acc_010", "shape_acc_011", "ood_shape_acc", "id_all_acc", "denoise_loss_010", "all_acc_111"):
        assert k in f and 0 <= f[k] < math.inf, k
    assert f["train_loss"] < 1.5
    train(cfg, tmp_path / "resumed", stop_after_step=2)
    resumed = train(cfg, tmp_path / "resumed")
    for k, v in full.model.state_dict().items():
        assert torch.equal(v, resumed.model.state_dict()[k]), k


def test_the_task_implements_the_protocol():
    from anchorlab.registry import MODELS, TASKS, load
    from anchorlab.tasks.base import Task

    cls = load(TASKS["concepts"].impl)
    assert cls.name == "concepts" and not cls.stackable
    assert isinstance(cls(ConceptsTaskConfig()), Task)
    assert load(MODELS["concept_unet"].config)().arch == "concept_unet"


def test_reproduce_fig6_end_to_end_on_tiny_runs(tmp_path, fast_classifier):
    pytest.importorskip("diffusers")
    import pandas as pd

    from anchorlab.cli import main

    out = tmp_path / "fig6"
    args = ["reproduce", "journal-fig6", "--scale", "cpu", "--out", str(out), "--executor", "inprocess",
            "--no-progress"]
    for s in TINY + [f"task.classifier_dir={tmp_path / 'clf'}"]:
        args += ["--set", s]
    assert main(args) == 0
    for f in ("fig6b.png", "fig6b_shape.png", "runs.csv", "summary.csv", "per_node.csv", "paper_vs_ours.csv"):
        assert (out / "journal-fig6" / f).exists(), f
    summary = pd.read_csv(out / "journal-fig6" / "summary.csv")
    assert list(summary.setting) == ["default", "gamma=0.5", "gamma=0.75", "gamma=1"]
    assert (summary.seeds == 2).all()
    per_node = pd.read_csv(out / "journal-fig6" / "per_node.csv")
    assert len(per_node) == 4 * 8 and per_node.shape_acc.between(0, 1).all()
    claims = pd.read_csv(out / "journal-fig6" / "paper_vs_ours.csv")
    assert len(claims) == 5
    assert pd.to_numeric(claims.ours, errors="coerce").dropna().between(0, 1).all()
    assert len(list((out / "journal-fig6" / "samples").glob("*.npz"))) == 4


def _gated_unet(**kw):
    pytest.importorskip("diffusers")
    from anchorlab.model.unet import build_unet
    from anchorlab.model.unet_config import ConceptUNetConfig

    return build_unet(ConceptUNetConfig(channels=(8, 16, 16, 16), norm_groups=4, cond="multiplicative", **kw))


def test_multiplicative_conditioning_changes_the_output_per_concept():
    from anchorlab.tasks.concepts.task import node_conditions

    torch.manual_seed(0)
    m = _gated_unet()
    assert m.unet.class_embedding is None and not hasattr(m, "concept_embed")
    assert [g.mlps[0][2].out_features for g in m.gates] == [16, 16, 16, 16]   # each up block's input width
    x, t = torch.randn(1, 3, 32, 32), torch.tensor([10])
    cfg = ConceptsTaskConfig(size_code="authors")
    out = {n: m(x, t, node_conditions(cfg, (n,), 1)) for n in ("000", "100", "010", "001")}
    for other in ("100", "010", "001"):          # shape, size, colour: each one changes the output
        assert not torch.allclose(out["000"], out[other], atol=1e-6), other


@pytest.mark.parametrize("mid_block", [False, True])
def test_unit_gates_reproduce_the_unconditioned_unet(mid_block):
    m = _gated_unet(mid_block=mid_block, layers_per_block=2)
    with torch.no_grad():
        for g in m.gates:                      # every gate outputs 1: sum over 3 concepts of 1/3
            for p in g.parameters():
                p.zero_()
            for mlp in g.mlps:
                mlp[2].bias.fill_(1 / 3)
    x, t, c = torch.randn(2, 3, 32, 32), torch.tensor([3, 400]), torch.randn(2, 6)
    assert torch.allclose(m(x, t, c), m.unet(x, t, return_dict=False)[0], atol=1e-6)
    with torch.no_grad():
        for g in m.gates:
            for mlp in g.mlps:
                mlp[2].bias.mul_(2)            # gates of 2: the output moves
    assert not torch.allclose(m(x, t, c), m.unet(x, t, return_dict=False)[0], atol=1e-4)


def test_the_authors_size_code_scales_the_size_entry():
    from anchorlab.tasks.concepts.task import node_conditions

    for code, (large, small) in (("relative", (1.0, 1.6 / 2.6)), ("authors", (2.6, 1.6))):
        c = node_conditions(ConceptsTaskConfig(size_code=code), ("000", "010"), 1)
        assert c[:, 2].tolist() == pytest.approx([large, small], abs=1e-6)
    with pytest.raises(ConfigError, match="^task.size_code: only used with task.condition='attributes'"):
        ConceptsTaskConfig(condition="onehot", size_code="authors")
    with pytest.raises(ConfigError, match="^model.cond: must be one of 'additive', 'multiplicative'"):
        load_config("concepts/cpu", ["model.cond=film"])
    paper = load_config("concepts/paper")
    assert paper.model.cond == "multiplicative" and paper.task.size_code == "authors"


def test_the_headline_is_all_three_concepts_on_010_and_011(monkeypatch):
    from anchorlab.tasks.concepts.task import ConceptsEval, ConceptsTask

    task = ConceptsTask(ConceptsTaskConfig(n_samples=3))
    monkeypatch.setattr(task, "denoise_losses", lambda model, ev, device: {n: 0.0 for n in NODES})
    monkeypatch.setattr(task, "generate", lambda model, nodes, n, device: torch.zeros(len(nodes), n, 3, 32, 32))
    # every sample judged a large red circle (000): a circle, so shape is right on 010/011, size is not
    m = task.evaluate(None, ConceptsEval(_Judge([-1.0, -1.0, -1.0, 1.0]), *(torch.zeros(0),) * 4)).metrics
    assert m["shape_acc_010_011"] == 1.0 and m["size_acc_010_011"] == 0.0 and m["all_acc_010_011"] == 0.0
    assert m["color_acc_010_011"] == 0.5                     # red is right for 010, wrong for 011
    assert task.headline[0] == "all_acc_010_011"


def test_the_seed_sweep_has_four_seeds_per_init_and_the_noise_floor_pair():
    from anchorlab.papers.reproduce import FIGURES, figure_spec
    from anchorlab.sweep.grid import expand

    runs = expand(figure_spec(FIGURES["journal-fig6-seeds"], "cpu"))
    settings = {}
    for r in runs:
        i = r.config.init
        assert r.config.model.cond == "multiplicative" and r.config.task.size_code == "authors"
        settings.setdefault((i.scheme, i.gamma if i.scheme == "rate" else None), set()).add(r.config.train.init_seed)
    assert len(runs) == 16 and all(len(s) == 4 for s in settings.values())
    assert ("framework_default", None) in settings and ("rate", 0.5) in settings   # the same distribution
    paper = expand(figure_spec(FIGURES["journal-fig6-seeds"], "paper"))
    assert {r.config.train.init_seed for r in paper} == {0, 1, 2, 3}


def test_noise_floor_seed_spread_and_the_standard_error_of_a_difference_on_a_hand_made_table():
    import pandas as pd

    from anchorlab.papers.reproduce.figures_diffusion import diff_se, noise_floor, seed_spread

    t = pd.DataFrame({"setting": ["default"] * 2 + ["gamma=0.5"] * 2 + ["gamma=1"] * 2,
                      "init.scheme": ["framework_default"] * 2 + ["rate"] * 4,
                      "rate_gamma": [float("nan")] * 2 + [0.5, 0.5, 1.0, 1.0],
                      "final.all_acc_010_011": [0.2, 0.4, 0.5, 0.5, 0.0, 0.2]})
    assert noise_floor(t) == pytest.approx(0.2)                    # |0.3 - 0.5|
    spread = (0.02 ** 0.5 + 0.0 + 0.02 ** 0.5) / 3                 # per-setting sample std, averaged
    assert seed_spread(t) == pytest.approx(spread)
    assert diff_se(t) == pytest.approx(spread * (2 / 2) ** 0.5)
    assert math.isnan(diff_se(t.iloc[[0, 2, 4]]))                  # one seed per setting: no spread
