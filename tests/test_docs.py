"""The numbers of the README, docs/results.md and the claim pages (docs/claims/) are generated from the committed
tables (tools/docs.py)."""
from __future__ import annotations

import importlib.util
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT / "tools" / "docs.py"
CLAIMS = [f"C{i}" for i in range(1, 14)] + ["EV"]
# every page under docs/claims/ gets the checks; test_the_tool_rewrites_every_checked_file keeps the tool in step
PAGES = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs" / "claims").glob("*.md"))
FILES = ("README.md", "docs/results.md", *PAGES)


def _tool():
    spec = importlib.util.spec_from_file_location("anchorlab_docs_tool", TOOL)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True, timeout=300)


def _copy(tmp_path: Path) -> Path:
    for rel in FILES:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    return tmp_path


def _prose(text: str) -> str:
    """The text outside generated blocks, code, HTML comments, tables, headings and image lines."""
    text = re.sub(r"<!-- generated: [\w-]+ -->.*?<!-- end generated -->", "", text, flags=re.S)
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    text = re.sub(r"`[^`\n]*`", "`code`", text)              # literals: commands, versions, file names
    return "\n".join(line for line in text.splitlines()
                     if not line.lstrip().startswith(("|", "![")) and not line.startswith("#"))


def test_the_committed_blocks_are_current():
    res = _run("--check")
    assert res.returncode == 0, res.stderr
    assert "generated blocks current" in res.stdout


def test_a_changed_digit_in_a_readme_block_is_caught_and_rewritten(tmp_path):
    root = _copy(tmp_path)
    readme = root / "README.md"
    text = readme.read_text()
    m = re.search(r"<!-- generated: (fig2-hero) -->\n(.*?)<!-- end generated -->", text, re.S)
    body = m.group(2)
    i = re.search(r"\d", body).start()
    changed = body[:i] + str((int(body[i]) + 1) % 10) + body[i + 1:]
    readme.write_text(text[:m.start(2)] + changed + text[m.end(2):])

    res = _run("--check", "--root", str(root))
    assert res.returncode == 1
    assert "README.md: block 'fig2-hero'" in res.stderr
    assert res.stderr.count("stale:") == 1            # only the block that changed

    assert _run("--write", "--root", str(root)).returncode == 0
    assert readme.read_text() == text                 # the block is back, the prose untouched
    assert _run("--check", "--root", str(root)).returncode == 0


def test_an_unknown_or_unclosed_block_is_an_error_naming_it(tmp_path):
    root = _copy(tmp_path)
    results = root / "docs" / "results.md"
    results.write_text(results.read_text() + "\n<!-- generated: no-such-block -->\nx\n<!-- end generated -->\n")
    res = _run("--check", "--root", str(root))
    assert res.returncode == 2 and "unknown block 'no-such-block'" in res.stderr and "c1-clock" in res.stderr

    results.write_text(results.read_text().replace("x\n<!-- end generated -->\n", ""))
    res = _run("--check", "--root", str(root))
    assert res.returncode == 2 and "'no-such-block' is not closed" in res.stderr


def test_the_tool_rewrites_every_checked_file():
    assert set(_tool().FILES) == set(FILES)


def test_every_block_name_used_exists_and_every_claim_has_its_section_and_page():
    tool = _tool()
    text = (ROOT / "docs" / "results.md").read_text()
    used = set(re.findall(r"<!-- generated: ([\w-]+) -->", "".join((ROOT / f).read_text() for f in FILES)))
    assert used <= set(tool.BLOCKS)
    for claim in CLAIMS:
        page = f"claims/{claim.lower()}.md"
        assert f"\n## {claim}\n" in text
        assert f"<!-- generated: {claim.lower()}-status -->" in text
        section = text.split(f"\n## {claim}\n", 1)[1].split("\n## ", 1)[0]
        assert f"Full evidence: [{page}]({page})" in section, f"results.md's {claim} does not link its page"
        assert (ROOT / "docs" / page).read_text().startswith(f"# {claim}\n")


def test_results_stays_a_page_a_reader_finishes():
    size = len((ROOT / "docs" / "results.md").read_bytes())
    assert size <= 30_000, f"docs/results.md is {size} bytes; move evidence to its claim page (docs/claims/)"


def _anchors(path: Path) -> set[str]:
    """GitHub's heading anchors of a Markdown file: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    seen: dict[str, int] = {}
    out = set()
    for heading in re.findall(r"(?m)^#+ (.+?)\s*$", text):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


@pytest.mark.parametrize("rel", FILES)
def test_relative_links_and_images_resolve(rel):
    path = ROOT / rel
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists():
            broken.append(target)
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(target)
    assert not broken, f"{rel}: links that do not resolve: {broken}"


@pytest.mark.parametrize("rel", FILES)
def test_prose_cites_the_blocks_instead_of_retyping_numbers(rel):
    prose = _prose((ROOT / rel).read_text())
    retyped = re.findall(r"\b\d+\.\d+\b|\b\d+ of \d+\b|\b\d+(?:\.\d+)?%", prose)
    assert not retyped, f"{rel}: numbers outside generated blocks: {retyped[:10]}"


@pytest.mark.parametrize("rel", FILES)
def test_no_prose_sentence_is_over_60_words(rel):
    blocks = re.split(r"\n\s*\n|\n(?=\s*- )", _prose((ROOT / rel).read_text()))
    sentences = [s for b in blocks for s in re.split(r"(?<=[.!?:])\s+(?=[A-Z*\[`(])", re.sub(r"\s+", " ", b))]
    longest = max(sentences, key=lambda s: len(s.split()))
    assert len(longest.split()) <= 60, longest


def test_the_readme_stays_short():
    assert len((ROOT / "README.md").read_bytes()) < 10_000


def test_paper_gamma_is_the_gamma_with_the_same_std_at_width_400():
    from anchorlab.papers.docs.common import paper_gamma

    for g, w in ((0.45, 128), (0.3, 128), (0.8, 64), (0.5, 400)):
        assert math.isclose(w ** -g, 400 ** -paper_gamma(g, w), rel_tol=1e-12)
    assert round(paper_gamma(0.45, 128), 2) == 0.36 and round(paper_gamma(0.3, 128), 2) == 0.24


def test_the_hero_figure_is_drawn_from_the_committed_cells(tmp_path):
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import fig2_hero
        depths, gammas, by = fig2_hero.grid()
        out = fig2_hero.draw(tmp_path / "hero.png")
    finally:
        sys.path.remove(str(ROOT / "tools"))
    assert out.stat().st_size > 10_000
    assert gammas == [0.3, 0.8] and depths[0] == 1
    assert set(by) == {(d, g) for d in depths for g in gammas}      # every drawn cell is a row of the table
