"""docs/recipes.md runs: the code blocks of each recipe, in order, as one script in a process of
its own (its registrations stay out of this one), from a file so that Numba caches its kernels."""
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECIPES = os.path.join(ROOT, "docs", "recipes.md")


def _recipes() -> dict:
    text = open(RECIPES, encoding="utf-8").read()
    out = {}
    for section in re.split(r"^## ", text, flags=re.M)[1:]:
        title, _, body = section.partition("\n")
        blocks = re.findall(r"^```python\n(.*?)^```", body, flags=re.M | re.S)
        if blocks:
            out[title.strip()] = "\n\n".join(blocks)
    return out


def test_every_recipe_has_code():
    assert set(_recipes()) == {"A unary op", "An op with its own lowering", "A codelet family", "A program kind"}


@pytest.mark.parametrize("title", sorted(_recipes()))
def test_recipe_runs(title, tmp_path):
    script = tmp_path / (re.sub(r"\W+", "_", title.lower()) + ".py")
    script.write_text(_recipes()[title], encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, env=env,
                       timeout=600)
    assert p.returncode == 0, f"{title}:\n{p.stdout}\n{p.stderr[-4000:]}"
    assert p.stdout.strip()  # each recipe prints what the profile shows
