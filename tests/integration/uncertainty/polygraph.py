"""LM-Polygraph's black-box estimators, loaded from its installed files (``make setup`` installs
``lm-polygraph==0.7.0`` without its dependencies).

Its package ``__init__`` imports its model wrappers, which pull spacy, fastchat and vLLM; the estimators compared
here need none of them. So the packages ``lm_polygraph``, ``lm_polygraph.utils`` and ``lm_polygraph.estimators``
are registered as empty shells over their folders, and only the estimator modules (and what they import) run:
their code exactly as released.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from pathlib import Path

MODULES = ("lexical_similarity", "num_sem_sets", "eig_val_laplacian", "deg_mat", "common")


def load() -> dict[str, types.ModuleType]:
    """LM-Polygraph's estimator modules by file name; an AssertionError says how to install it."""
    spec = importlib.util.find_spec("lm_polygraph")
    assert spec is not None, (
        "lm-polygraph is not installed: run `make setup` (pip install --no-deps lm-polygraph==0.7.0)"
    )
    root = Path(next(iter(spec.submodule_search_locations or [])))
    for name, folder in (
        ("lm_polygraph", root),
        ("lm_polygraph.utils", root / "utils"),
        ("lm_polygraph.estimators", root / "estimators"),
    ):
        if name not in sys.modules:
            shell = types.ModuleType(name)
            shell.__path__ = [str(folder)]
            sys.modules[name] = shell
    return {m: importlib.import_module(f"lm_polygraph.estimators.{m}") for m in MODULES}
