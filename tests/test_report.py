"""The HTML report: run table, captions with the metric definition, the spec as YAML, and a real browser."""

import functools
import re
import shutil
import sys
from pathlib import Path

import pytest

from anchorlab.cli import main
from anchorlab.report import make_report, screenshot
from anchorlab.sweep.runner import run_sweep

TINY = {"model.d_model": 16, "model.d_head": 8, "model.d_ff": 32, "task.n_train": 1024, "task.n_eval_per_group": 16,
        "train.batch_size": 128, "train.epochs": 1, "train.eval_every": 4, "optim.lr": 1.0e-3, "train.threads": 1}


def flaky_run(cfg, run_dir, fail_gammas=()):
    """The real run function, except that some gammas fail as a full disk would."""
    if cfg.init.gamma in fail_gammas:
        raise OSError(28, "No space left on device")
    from anchorlab.train import run

    return run(cfg, run_dir)


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("rep") / "sw"
    spec = {"name": "rep", "base": "demo/small", "set": TINY, "axes": {"init.gamma": [0.3, 0.6, 0.9]}}
    df = run_sweep(spec, out, executor="inprocess", run_fn=functools.partial(flaky_run, fail_gammas=(0.9,)),
                   stack="never")
    assert sorted(df.drop_duplicates("run_id").status) == ["failed", "finished", "finished"]
    return out


@pytest.fixture(scope="module")
def report(sweep_dir):
    """(index.html path, its text): the report is made once for the module."""
    index = make_report(sweep_dir)
    return index, index.read_text()


def _rows(html):
    body = html.split("<h2>Runs</h2>", 1)[1].split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    return re.findall(r"<tr>(.*?)</tr>", body, flags=re.S)


def test_run_table_has_status_axes_headline_wall_time_and_links(report):
    index, html = report
    head = html.split("<h2>Runs</h2>", 1)[1].split("</thead>", 1)[0]
    for col in ("run", "status", "init.gamma", "id_acc (best)", "ood_inferential_acc (best)", "wall time (s)", "error"):
        assert f">{col}</th>" in head, col
    rows = _rows(html)
    assert len(rows) == 3
    failed = [r for r in rows if ">failed<" in r]
    assert len(failed) == 1 and "0.9000" in failed[0] and "No space left on device" in failed[0]
    for r in rows:
        if ">finished<" not in r:
            continue
        links = re.findall(r'href="([^"]+)"', r)
        assert len(links) == 3                                   # curves, final.json, metrics.jsonl
        for link in links:
            assert (index.parent / link).resolve().is_file(), link
        assert re.search(r"<td>\d+\.\d</td>", r)                 # wall time
        assert re.search(r"<td>[01]\.\d{3}</td>", r)             # an accuracy


def test_the_run_table_note_says_what_its_rows_and_values_are(report):
    note = report[1].split("</table>", 1)[1].split('<p class="note">', 1)[1].split("</p>", 1)[0]
    assert note.startswith("One row per run of the sweep (3, failed and unfinished ones included)")
    assert "that run&#x27;s own value, its best value over the evaluations" in note or \
        "that run's own value, its best value over the evaluations" in note
    assert "nothing averaged" in note and "The cells further down aggregate these runs" in note


def test_every_figure_has_a_caption_with_its_metric_definition(sweep_dir, report):
    html = report[1]
    figs = re.findall(r"<figure.*?</figure>", html, flags=re.S)
    assert len(figs) >= 3
    for f in figs:
        img = re.search(r'<img src="([^"]+)"', f).group(1)
        assert (sweep_dir / "report" / img).is_file()
        cap = re.search(r"<figcaption>(.*?)</figcaption>", f, flags=re.S).group(1)
        assert len(cap) > 80
        if "Training curve" in cap:
            assert "raw values of this run" in cap
        else:                                                    # aggregated: says how
            assert "best value over training" in cap and "one run per cell" in cap
    assert "against init.gamma" in html
    # a gamma sweep that is not Fig. 3's spec is named by what it varies, never as the paper's figure
    assert "Journal Fig. 3A" not in html and "Init rate: ID accuracy (id_acc, blue)" in html
    assert "<h1>Sweep rep: init.gamma</h1>" in html


def test_spec_is_yaml_not_a_python_dict(report):
    html = report[1]
    pre = re.findall(r"<pre>(.*?)</pre>", html, flags=re.S)
    assert pre and "name: rep" in pre[0] and "axes:\n  init.gamma: [0.3, 0.6, 0.9]" in pre[0]
    assert "model.d_model: 16" in pre[0] and "aggregate:\n  source: best" in pre[0]
    assert "{&#x27;" not in html and "{'" not in html


def test_lr_and_seed_axes_are_in_the_run_table_and_the_captions(tmp_path):
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    try:
        from test_sweep_runner import SPEC, fake_run
    finally:
        sys.path.pop(0)
    run_sweep(SPEC, tmp_path, executor="inprocess", run_fn=fake_run)
    html = make_report(tmp_path, max_curves=0).read_text()
    head = html.split("<h2>Runs</h2>", 1)[1].split("</thead>", 1)[0]
    for col in ("init.gamma", "optim.lr", "train.init_seed", "train.data_seed"):
        assert f">{col}</th>" in head
    assert len(_rows(html)) == 12
    caps = re.findall(r"<figcaption>(.*?)</figcaption>", html, flags=re.S)
    assert caps and all("each metric&#x27;s best run over optim.lr" in c for c in caps)
    assert all("mean over seeds (train.init_seed, train.data_seed" in c for c in caps)


def test_a_sweep_whose_runs_all_failed_still_gets_a_report(tmp_path, capsys):
    spec = {"name": "bad", "base": "demo/small", "set": TINY, "axes": {"init.gamma": [0.3, 0.6]}}
    run_sweep(spec, tmp_path, executor="inprocess", run_fn=functools.partial(flaky_run, fail_gammas=(0.3, 0.6)))
    assert main(["report", str(tmp_path)]) == 0
    html = (tmp_path / "report" / "index.html").read_text()
    assert html.count(">failed<") == 2 and "2 failed" in html


@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Debian's chromium (apt-get install chromium)")
def test_report_renders_in_headless_chromium(report, tmp_path):
    from PIL import Image

    png = screenshot(report[0], tmp_path / "report.png", width=1300, height=1600)
    im = Image.open(png).convert("L")
    assert im.size == (1300, 1600)
    hist = im.histogram()
    dark = sum(hist[:100]) / (1300 * 1600)
    assert 0.003 < dark < 0.5                                    # text and plots drawn, not a blank page
    top = im.crop((0, 0, 1300, 60))                              # the title is at the top, in black
    assert top.getextrema()[0] < 60


def test_screenshot_without_chromium_is_one_line(report, tmp_path, monkeypatch):
    from anchorlab.config import ConfigError

    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(ConfigError) as e:
        screenshot(report[0], tmp_path / "x.png")
    assert str(e.value) == ("screenshot: no chromium found; install it (Debian: apt-get install chromium) "
                            "or open the HTML in a browser")


def test_a_presets_captions_name_its_figures_only_when_it_ran_unchanged():
    import dataclasses
    import json

    import yaml

    from anchorlab.report import preset_captions
    from anchorlab.sweep.grid import load_sweep, resolve_sweep

    def stored(spec):   # as the sweep runner writes sweep.yaml and the report reads it back
        return yaml.safe_load(yaml.safe_dump(json.loads(json.dumps(spec.to_dict(), default=list)), sort_keys=False))

    fig3 = load_sweep(resolve_sweep("fig3_cpu"))
    assert preset_captions(stored(fig3))["rows"] == {"optim.weight_decay=0.01": "Journal Fig. 3A"}
    assert preset_captions(stored(load_sweep(resolve_sweep("fig2_cpu")))) == {"depth": "NeurIPS Fig. 2"}
    assert preset_captions(stored(dataclasses.replace(fig3, set=(*fig3.set, "train.epochs=1")))) == {}   # --set
    assert preset_captions(stored(load_sweep(resolve_sweep("addition_cpu")))) == {}
    assert preset_captions({"name": "rep", "base": "demo/small", "axes": {"init.gamma": [0.3, 0.6]}}) == {}
    # a spec that copies a preset's captions but not its runs is not that preset
    assert preset_captions({"name": "rep", "base": "demo/small", "captions": {"depth": "NeurIPS Fig. 2"}}) == {}


def test_the_library_report_names_no_paper_figure():
    import inspect

    import anchorlab.report as report

    src = inspect.getsource(report)
    assert "NeurIPS" not in src and "Journal Fig" not in src


def test_accuracy_axes_run_from_0_to_1_and_losses_keep_their_scale():
    import pandas as pd

    from anchorlab.plots.sweep import plot_metric_vs_axis
    from anchorlab.report import fraction_axes, is_fraction

    assert all(map(is_fraction, ["id_acc", "ood_exact/lexical", "ood_other_frac", "all_acc_010_011"]))
    assert not any(map(is_fraction, ["train_loss", "val_ppl", "accuracy_gap"]))
    cells = pd.DataFrame({"init.gamma": [0.3, 0.6], "id_acc": [0.41, 0.44], "train_loss": [2.0, 3.0]})
    fig = fraction_axes(plot_metric_vs_axis(cells, "init.gamma", ["id_acc", "train_loss"]))
    lims = {ax.get_title(): ax.get_ylim() for ax in fig.axes if ax.get_visible()}
    assert lims["id_acc"] == (-0.02, 1.02) and lims["train_loss"][1] < 3.5
