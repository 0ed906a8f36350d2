"""Two retrieval benchmarks built from text this machine has and no one here wrote, in BEIR format.

``debian`` — Debian's package descriptions (the apt lists' ``Translation-en``, the long descriptions that
``apt-cache show`` prints; ``apt-cache dumpavail`` carries only the one-line summaries). Query: a package's
one-line summary. Relevant document: its long description. The package name is removed from both, so a query
cannot be matched by the name alone. Packages whose long descriptions are identical (``-doc``/``-dev`` siblings
often share one) form one document; packages whose summaries are identical form one query with every such
document relevant, so no query is scored against a copy of its own answer.

``pydoc`` — the Python standard library's docstrings (the ``help()`` text of every public function, class and
method defined in a stdlib module). Query: the docstring's first paragraph (its summary line). Relevant
document: the rest of the docstring. The object's name is removed from both. Docstrings are read from
``__doc__`` (not ``inspect.getdoc``, which would copy a base class's docstring onto every override).

Both subsample a fixed number of documents and queries with a seed; ``meta.json`` records the source, the counts
and the Python / apt versions, so a folder says what it was built from. One command builds either:
``agentkit revela benchmark debian --out DIR``.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import io
import os
import random
import re
import subprocess
import sys
import warnings
from pathlib import Path

from agentkit.errors import AgentkitError
from agentkit.eval.retrieval import BeirData, load_beir, write_beir
from agentkit.files import atomic_dir

APT_LISTS = Path("/var/lib/apt/lists")
BENCHMARKS = ("debian", "pydoc")


def _words(s: str) -> int:
    return len(s.split())


def strip_name(text: str, name: str) -> str:
    """Remove every standalone occurrence of ``name`` (case-insensitive) and tidy the spaces.

    >>> strip_name("libfoo-dev: headers for libfoo (libfoo-dev)", "libfoo-dev")
    ': headers for libfoo ()'
    """
    pat = re.compile(r"(?<![\w.+-])" + re.escape(name) + r"(?![\w+-]|\.\w)", re.I)
    return re.sub(r"[ \t]+", " ", pat.sub("", text)).strip()


# ---- Debian ---------------------------------------------------------------------------------------------------
def _translation_files() -> list[Path]:
    return sorted(APT_LISTS.glob("*_i18n_Translation-en*"))


def _ensure_translations() -> list[Path]:
    files = _translation_files()
    if files:
        return files
    cmd = ["apt-get", "update", "-qq", "-o", "Acquire::Languages=en"]
    if os.geteuid() != 0:
        raise AgentkitError(
            "the apt lists hold no long package descriptions (Translation-en)",
            "run as root: apt-get update -o Acquire::Languages=en",
        )
    print("fetching Debian's English package descriptions: " + " ".join(cmd), file=sys.stderr)
    subprocess.run(cmd, check=True)
    files = _translation_files()
    if not files:
        raise AgentkitError("apt-get update fetched no Translation-en", "check /etc/apt/sources.list")
    return files


def parse_translations(text: str) -> list[tuple[str, str, str]]:
    """(package, summary, long description) of a Translation-en file; paragraphs are separated by a blank line.

    >>> parse_translations("Package: a\\nDescription-md5: 0\\nDescription-en: Tool A\\n Does x.\\n .\\n More.\\n")
    [('a', 'Tool A', 'Does x.\\n\\nMore.')]
    """
    out = []
    for stanza in text.split("\n\n"):
        pkg, desc = None, None
        lines = stanza.split("\n")
        for i, line in enumerate(lines):
            if line.startswith("Package: "):
                pkg = line[9:].strip()
            elif line.startswith("Description-en: "):
                summary = line[16:].strip()
                body = []
                for cont in lines[i + 1 :]:
                    if not cont.startswith(" "):
                        break
                    body.append("" if cont.strip() == "." else cont[1:])
                desc = (summary, "\n".join(body).strip())
        if pkg and desc:
            out.append((pkg, *desc))
    return out


def debian_pairs() -> list[tuple[str, str, str]]:
    """Every package's (name, summary, long description) from the apt lists, first occurrence of each package."""
    seen, out = set(), []
    for f in _ensure_translations():
        raw = subprocess.run(["/usr/lib/apt/apt-helper", "cat-file", str(f)], capture_output=True, check=True).stdout
        for pkg, summary, long in parse_translations(raw.decode("utf-8", "replace")):
            if pkg not in seen:
                seen.add(pkg)
                out.append((pkg, summary, long))
    return out


# ---- Python standard library ----------------------------------------------------------------------------------
# Modules with side effects on import (a browser, a print, a GUI), or that are not documentation.
_SKIP_MODULES = {"antigravity", "this", "idlelib", "tkinter", "turtle", "turtledemo", "lib2to3", "ensurepip",
                 "pydoc_data", "test", "__main__", "xxlimited", "xxsubtype", "msvcrt", "winreg", "winsound", "nt",
                 "_msi", "msilib"}  # fmt: skip


def _own_doc(obj) -> str | None:
    doc = obj.__doc__ if isinstance(getattr(obj, "__doc__", None), str) else None
    return inspect.cleandoc(doc) if doc else None


def pydoc_pairs() -> list[tuple[str, str, str]]:
    """(qualified name, summary paragraph, rest of the docstring) of public stdlib functions, classes and methods."""
    out = []
    for modname in _stdlib_modules():
        try:
            with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
                warnings.simplefilter("ignore")
                mod = importlib.import_module(modname)
        except Exception:  # platform modules (e.g. winreg) and optional C extensions
            continue
        for name, obj in sorted(vars(mod).items()):
            if name.startswith("_") or getattr(obj, "__module__", None) != modname:
                continue
            if not (inspect.isclass(obj) or inspect.isfunction(obj) or inspect.isbuiltin(obj)):
                continue
            members = [(f"{modname}.{name}", name, obj)]
            if inspect.isclass(obj):
                members += [
                    (f"{modname}.{name}.{m}", m, v)
                    for m, v in sorted(vars(obj).items())
                    if not m.startswith("_") and (inspect.isfunction(v) or inspect.ismethoddescriptor(v))
                ]
            for qual, _, o in members:
                split = _summary_split(_own_doc(o) or "")
                if split and not _SIGNATURE.match(split[0]):  # "S.split(sep=None) -> list" is not a summary
                    out.append((qual, *split))
    return out


def _summary_split(doc: str) -> tuple[str, str] | None:
    """(summary, rest) of a docstring: its first paragraph if it has several, else its first sentence.

    >>> _summary_split("Return the sum. Floats are added exactly.")
    ('Return the sum.', 'Floats are added exactly.')
    """
    if "\n\n" in doc:
        head, rest = doc.split("\n\n", 1)
    else:
        parts = re.split(r"(?<=[.!?])\s+(?=[A-Z(`'\"])", doc, maxsplit=1)
        if len(parts) < 2:
            return None
        head, rest = parts
    return " ".join(head.split()), rest.strip()


_SIGNATURE = re.compile(r"^[\w.]*\(.*\)\s*(->.*)?$", re.S)


def _stdlib_modules() -> list[str]:
    """Every public stdlib module and submodule (``email.mime.text``, ``xml.dom.minidom``), sorted."""
    import pkgutil

    tops = sorted(n for n in sys.stdlib_module_names if not n.startswith("_") and n not in _SKIP_MODULES)
    out = []
    for top in tops:
        out.append(top)
        spec = importlib.util.find_spec(top)
        if spec is None or not spec.submodule_search_locations:
            continue
        for info in pkgutil.walk_packages(spec.submodule_search_locations, prefix=top + ".", onerror=lambda _: None):
            parts = info.name.split(".")
            if not any(p.startswith("_") or p in {"test", "tests"} for p in parts[1:]):
                out.append(info.name)
    return out


# ---- building ---------------------------------------------------------------------------------------------------
def build_benchmark(
    name: str, n_docs: int = 1500, n_queries: int = 300, seed: int = 0, min_doc_words: int = 12
) -> BeirData:
    """Group, filter and subsample the (name, summary, body) triples of one source into a BEIR dataset."""
    if name == "debian":
        triples, strip_parts = debian_pairs(), False
    elif name == "pydoc":
        triples, strip_parts = pydoc_pairs(), True
    else:
        raise AgentkitError(f"unknown benchmark {name!r}", "choose one of: " + ", ".join(BENCHMARKS))
    docs: dict[str, str] = {}  # body -> doc id (identical bodies are one document)
    by_summary: dict[str, set[str]] = {}
    for ident, summary, body in triples:
        names = [ident] + ([ident.rsplit(".", 1)[-1]] if strip_parts else [])
        for n in names:
            summary, body = strip_name(summary, n), strip_name(body, n)
        if _words(body) < min_doc_words or _words(summary) < 3:
            continue
        did = docs.setdefault(body, f"d:{ident}")
        by_summary.setdefault(summary, set()).add(did)
    rng = random.Random(seed)
    all_docs = sorted(docs.items(), key=lambda kv: kv[1])
    if len(all_docs) < n_docs:
        raise AgentkitError(f"{name}: only {len(all_docs)} documents qualify, asked for {n_docs}", "pass fewer --docs")
    chosen = dict((did, body) for body, did in rng.sample(all_docs, n_docs))
    candidates = [(s, sorted(d for d in dids if d in chosen)) for s, dids in sorted(by_summary.items())]
    candidates = [(s, rel) for s, rel in candidates if rel]
    picked = rng.sample(candidates, min(n_queries, len(candidates)))
    queries = {f"q:{i}": s for i, (s, _) in enumerate(picked)}
    qrels = {f"q:{i}": {d: 1 for d in rel} for i, (_, rel) in enumerate(picked)}
    corpus = {did: {"title": "", "text": body} for did, body in sorted(chosen.items())}
    meta = {
        "source": name,
        "seed": seed,
        "documents": len(corpus),
        "queries": len(queries),
        "source_pairs": len(triples),
        "distinct_documents": len(all_docs),
        "python": sys.version.split()[0],
        "note": __doc__.split("\n\n")[1 + BENCHMARKS.index(name)].replace("\n", " "),
    }
    return BeirData(corpus, queries, qrels, name, meta)


def benchmark_dir(name: str, n_docs: int = 1500, n_queries: int = 300, seed: int = 0, root: Path | None = None) -> Path:
    """The folder of a benchmark, built once (atomically) under ``$AGENTKIT_HOME/benchmarks`` unless given."""
    from agentkit.models.catalog import agentkit_home

    root = root or agentkit_home() / "benchmarks"
    final = root / f"{name}-d{n_docs}-q{n_queries}-s{seed}"
    if (final / ".complete").exists():
        return final
    data = build_benchmark(name, n_docs, n_queries, seed)
    return atomic_dir(final, lambda tmp: write_beir(tmp, data), marker=".complete")


def load_benchmark(name_or_dir: str, n_docs: int = 1500, n_queries: int = 300, seed: int = 0) -> BeirData:
    """A built-in benchmark by name (built on first use), or any BEIR folder by path."""
    if name_or_dir in BENCHMARKS:
        return load_beir(benchmark_dir(name_or_dir, n_docs, n_queries, seed))
    return load_beir(name_or_dir)
