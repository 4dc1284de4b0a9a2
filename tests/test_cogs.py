"""COGS loaders and metrics, and the verified download cache they use (no network)."""

import hashlib
import logging
import re
import shutil
from pathlib import Path

import pytest

from anchorlab import datasets
from anchorlab.config import ConfigError
from anchorlab.datasets import REGISTRY, ChecksumError, fetch, fetch_known
from anchorlab.tasks.seq2seq.cogs import (GEN_TYPES, CogsRecord, cogs_accuracy, is_structural, load_cogs,
                                  parse_cogs_tsv, read_cogs_tsv, type_class)

FIXTURES = Path(__file__).parent / "fixtures"
ORIGINAL = FIXTURES / "cogs_original_small.tsv"
VARFREE = FIXTURES / "cogs_varfree_small.tsv"


def sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


# ---------------------------------------------------------------- parsing and types
@pytest.mark.parametrize("path", [ORIGINAL, VARFREE])
def test_read_fixture(path):
    recs = read_cogs_tsv(path)
    assert len(recs) == 8
    assert all(isinstance(r, CogsRecord) and r.sentence and r.lf for r in recs)
    assert [r.type for r in recs][:3] == ["in_distribution", "in_distribution", "primitive"]
    assert recs[2] == CogsRecord("walk", "walk", "primitive")


def test_both_formats_hold_the_same_fixture_sentences():
    a, b = read_cogs_tsv(ORIGINAL), read_cogs_tsv(VARFREE)
    assert [(r.sentence, r.type) for r in a] == [(r.sentence, r.type) for r in b]
    assert any("x _ 1" in r.lf for r in a) and not any("x _" in r.lf for r in b)


def test_parse_errors_name_the_line():
    with pytest.raises(ValueError, match=r"f\.tsv:2: expected 3"):
        parse_cogs_tsv("A dog ran .\trun ( agent = dog )\tin_distribution\nbroken line\n", "f.tsv")


def test_structural_and_lexical_types():
    assert len(GEN_TYPES) == 21
    structural = {t for t in GEN_TYPES if is_structural(t)}
    assert structural == {"cp_recursion", "pp_recursion", "obj_pp_to_subj_pp"}
    assert {type_class(t) for t in GEN_TYPES - structural} == {"lexical"}
    for t in ("in_distribution", "primitive", "exposure_example_obj_proper"):
        assert type_class(t) == "in_distribution" and not is_structural(t)


# ---------------------------------------------------------------- metrics
def test_accuracy_table_by_hand():
    recs = [CogsRecord("s1", "a ( b )", "cp_recursion"),
            CogsRecord("s2", "c ( d )", "cp_recursion"),
            CogsRecord("s3", "e", "pp_recursion"),
            CogsRecord("s4", "f ( g = h )", "prim_to_obj_proper"),
            CogsRecord("s5", "i", "in_distribution")]
    preds = ["a ( b )", "c ( x )", "  e ", "f ( g  = h )", "j"]  # right, wrong, right, right, wrong
    df = cogs_accuracy(recs, preds, split="gen")
    assert list(df.columns) == ["split", "level", "group", "n", "n_correct", "accuracy"]
    got = {(r.level, r.group): (r.n, r.n_correct, r.accuracy) for r in df.itertuples()}
    assert got == {
        ("overall", "all"): (5, 3, 0.6),
        ("class", "structural"): (3, 2, pytest.approx(2 / 3)),
        ("class", "lexical"): (1, 1, 1.0),
        ("class", "in_distribution"): (1, 0, 0.0),
        ("type", "cp_recursion"): (2, 1, 0.5),
        ("type", "pp_recursion"): (1, 1, 1.0),
        ("type", "prim_to_obj_proper"): (1, 1, 1.0),
        ("type", "in_distribution"): (1, 0, 0.0),
    }
    assert set(df["split"]) == {"gen"}
    with pytest.raises(ConfigError, match="predictions"):
        cogs_accuracy(recs, preds[:-1])


def test_load_cogs_argument_errors(tmp_path):
    with pytest.raises(ConfigError, match="fmt"):
        load_cogs("lambda", data_dir=tmp_path)
    with pytest.raises(ConfigError, match="splits"):
        load_cogs("varfree", data_dir=tmp_path, splits=["validation"])


def test_load_cogs_verifies_local_copies(tmp_path):
    d = tmp_path / "cogs" / "varfree"
    d.mkdir(parents=True)
    shutil.copy(VARFREE, d / "dev.tsv")
    with pytest.raises(ChecksumError, match=re.escape(str(d / "dev.tsv"))):
        load_cogs("varfree", data_dir=tmp_path, splits=["dev"])


# ---------------------------------------------------------------- against the real files
def test_load_varfree(shared_datasets):
    data = load_cogs("varfree", data_dir=shared_datasets)
    assert {k: len(v) for k, v in data.items()} == {"train": 24_195, "dev": 3_000, "test": 3_000,
                                                    "gen": 21_000}
    gen_types = [r.type for r in data["gen"]]
    assert set(gen_types) == GEN_TYPES
    assert all(gen_types.count(t) == 1_000 for t in ("cp_recursion", "prim_to_inf_arg"))
    assert {type_class(r.type) for r in data["train"] + data["test"]} == {"in_distribution"}
    df = cogs_accuracy(data["gen"], [r.lf for r in data["gen"]], split="gen")
    assert (df["accuracy"] == 1.0).all()
    classes = df[df.level == "class"].set_index("group")["n"].to_dict()
    assert classes == {"structural": 3_000, "lexical": 18_000}
    assert (df[df.level == "type"]["n"] == 1_000).all() and (df.level == "type").sum() == 21


def test_load_original_without_gen(shared_datasets):
    data = load_cogs("original", data_dir=shared_datasets)
    assert {k: len(v) for k, v in data.items()} == {"train": 24_155, "dev": 3_000, "test": 3_000}
    assert data["train"][0].lf.count("x _") >= 1


def test_registry_hashes_match_reference_copies(shared_datasets):
    present = [n for n in REGISTRY if (shared_datasets / n).is_file()]
    assert len(present) == 10  # all but COGS's original gen.tsv
    for name in present:
        assert fetch_known(name, data_dir=shared_datasets) == shared_datasets / name


# ---------------------------------------------------------------- datasets.fetch (file:// URLs)
def test_registry_is_pinned():
    for f in REGISTRY.values():
        assert f.url.startswith("https://raw.githubusercontent.com/")
        assert re.search(r"/[0-9a-f]{40}/", f.url), f.url
        assert f.sha256 is None or re.fullmatch(r"[0-9a-f]{64}", f.sha256)
    assert REGISTRY["cogs/original/gen.tsv"].sha256 is None
    with pytest.raises(ConfigError, match="dataset name"):
        fetch_known("scan/nope.txt")


def test_fetch_downloads_verifies_and_caches(tmp_path):
    src = tmp_path / "src" / "data.txt"
    src.parent.mkdir()
    src.write_bytes(b"IN: jump OUT: I_JUMP\n")
    cache = tmp_path / "cache"
    p = fetch(src.as_uri(), sha(src.read_bytes()), cache_dir=cache, filename="scan/data.txt")
    assert p == cache / "scan" / "data.txt" and p.read_bytes() == src.read_bytes()
    src.unlink()  # the second call must come from the cache
    assert fetch(src.as_uri(), sha(p.read_bytes()), cache_dir=cache, filename="scan/data.txt") == p


def test_fetch_wrong_checksum_names_file_and_leaves_nothing(tmp_path):
    src = tmp_path / "tasks.txt"
    src.write_bytes(b"hello\n")
    cache = tmp_path / "cache"
    with pytest.raises(ChecksumError, match="tasks.txt"):
        fetch(src.as_uri(), "0" * 64, cache_dir=cache)
    assert not cache.exists() or not any(cache.rglob("*"))


def test_fetch_local_dir_is_verified_and_used_in_place(tmp_path):
    local = tmp_path / "data"
    (local / "scan").mkdir(parents=True)
    f = local / "scan" / "tasks.txt"
    f.write_bytes(b"abc\n")
    url = "file:///nonexistent/tasks.txt"  # never read: the local copy wins
    assert fetch(url, sha(b"abc\n"), cache_dir=tmp_path / "c", local_dir=local,
                 filename="scan/tasks.txt") == f
    with pytest.raises(ChecksumError, match=re.escape(str(f))):
        fetch(url, sha(b"abd\n"), cache_dir=tmp_path / "c", local_dir=local, filename="scan/tasks.txt")
    assert not (tmp_path / "c").exists()


def test_fetch_corrupt_cache_is_replaced(tmp_path, monkeypatch):
    src = tmp_path / "x.tsv"
    src.write_bytes(b"good\n")
    monkeypatch.setenv("ANCHORLAB_CACHE", str(tmp_path / "envcache"))
    cached = tmp_path / "envcache" / "x.tsv"
    cached.parent.mkdir()
    cached.write_bytes(b"bad\n")
    assert fetch(src.as_uri(), sha(b"good\n")) == cached
    assert cached.read_bytes() == b"good\n"


def test_fetch_unknown_checksum_warns(tmp_path, caplog):
    src = tmp_path / "gen.tsv"
    src.write_bytes(b"row\n")
    with caplog.at_level(logging.WARNING, logger="anchorlab.datasets"):
        p = fetch(src.as_uri(), None, cache_dir=tmp_path / "c")
    assert p.read_bytes() == b"row\n"
    assert any("unverified" in r.getMessage() and "gen.tsv" in r.getMessage() for r in caplog.records)


def test_fetch_transform_keeps_cogs_rows(tmp_path):
    """The varfree files are SLOG's files filtered to COGS row types; the result is verified."""
    lines = VARFREE.read_text().splitlines(keepends=True)
    # train/dev/test keep in_distribution, primitive and exposure_example_* rows only
    wanted = "".join(ln for ln in lines if ln.rstrip("\n").split("\t")[2] in
                     ("in_distribution", "primitive", "exposure_example_obj_proper")).encode()
    assert wanted.count(b"\n") == 5
    extra = ["Who saw a cat ?\tsee ( agent = ? , theme = cat )\twh_Q_simple_trans\n",
             "A cat that ran smiled .\tsmile ( agent = cat ( nmod = run ( agent = cat ) ) )\tsubj_RC\n"]
    upstream = tmp_path / "slog_train.tsv"
    upstream.write_text("".join(lines[:3] + extra[:1] + lines[3:] + extra[1:]))
    transform = REGISTRY["cogs/varfree/train.tsv"].transform
    p = fetch(upstream.as_uri(), sha(wanted), cache_dir=tmp_path / "c",
              filename="cogs/varfree/train.tsv", transform=transform)
    assert p.read_bytes() == wanted
    with pytest.raises(ChecksumError):
        fetch(upstream.as_uri(), sha(wanted), cache_dir=tmp_path / "c2", filename="t.tsv")


def test_fetch_rejects_escaping_filenames(tmp_path):
    with pytest.raises(ConfigError, match="filename"):
        fetch("file:///x", None, cache_dir=tmp_path, filename="../x")
    assert datasets.default_data_dir(tmp_path) == tmp_path
