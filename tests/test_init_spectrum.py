"""The init-contrast spectrum figure (C7): a tiny two-init sweep -> per-run measures, judgement, spectra, figure."""

from anchorlab.papers.reproduce import FIGURES
from anchorlab.papers.reproduce.figures_spectrum import make_spectrum
from anchorlab.sweep.runner import run_sweep


def test_the_spectrum_figure_reads_every_run_of_a_two_init_sweep(tmp_path, tiny_overrides):
    spec = {"name": "spec-tiny", "base": "demo/small",
            "set": [*tiny_overrides, "model.d_model=64", "model.d_head=32"],
            "axes": {"init.gamma": [0.3, 0.8]}, "zip": [{"train.init_seed": [0, 1], "train.data_seed": [0, 1]}]}
    run_sweep(spec, tmp_path / "sweep", executor="inprocess", stack="never")
    tables, files = make_spectrum(tmp_path / "sweep", tmp_path / "out", "cpu")
    runs = tables["runs"]
    assert sorted(runs.side) == ["large_init", "large_init", "small_init", "small_init"]
    assert runs.top2_share.between(0, 1).all() and runs["masked contrast"].notna().all()
    j = tables["judged"].set_index("measure")
    assert set(j.claim) == {"C5", "C7"} and (j.a_n == 2).all()
    assert len(tables["spectra"]) == 4 * 10 and files["spectra.png"].stat().st_size > 0
    fig = FIGURES["study-init-spectrum"]
    assert fig.cids == ("C7",) and all(r.ours(tables) for r in fig.readings)
