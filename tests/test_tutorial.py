"""docs/tutorial.md runs as pasted: its Python blocks, in order, in one session."""

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_tutorial_runs_as_pasted(tmp_path):
    text = (ROOT / "docs" / "tutorial.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) == 7
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    res = subprocess.run([sys.executable, "-c", "\n".join(blocks)], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    out = res.stdout
    assert "measured_std" in out and re.search(r"ID \d\.\d\d, unseen pairs \d\.\d\d after \d+ steps", out)
    assert "torch.Size([8, 9, 201]) torch.Size([8, 2, 9, 9])" in out
    assert "anchors->key" in out and "last->anchors" in out
    masked = re.search(r"\(1,2\) answered x\+6: (\d\.\d\d) plain, (\d\.\d\d) with the key masked", out)
    assert masked and float(masked.group(1)) >= 0.9 and float(masked.group(2)) <= 0.1   # no key, no answer
    fit = re.search(r"ID (\d\.\d\d), unseen pairs", out)
    assert fit and float(fit.group(1)) >= 0.9            # the large init fits the seen pairs in these seconds
    assert re.search(r"gamma 0\.4: ID .* W_Q\(1\) mean \|cos\| \d\.\d\d", out) and "gamma 0.8: ID" in out
    assert "'README.md'" in out and "'runs.csv'" in out
    assert not any(tmp_path.iterdir())                   # it writes into fresh temporary folders only
