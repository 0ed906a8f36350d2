"""Dense retrievers Revela trains: a causal LM with EOS pooling (SmolLM2-135M, the paper's Revela-0.1B backbone)
or a sentence-transformers model (all-MiniLM-L6-v2, its own mean pooling), each optionally with LoRA (PEFT).

``Retriever.encode(texts, "query" | "passage")`` adds the paper's prefixes (``query: `` / ``passage: ``), appends
EOS for EOS pooling, and returns L2-normalised numpy embeddings: the interface of retrieval evaluation
(``agentkit.eval.retrieval.dense_run``) and of the ``search`` tool (``SearchIndex(retriever=PATH)``).
``save(dir)`` writes ``retriever.json`` plus the LoRA adapter (or the full weights), ``Retriever.load(dir)`` reads
it back; a directory is what ``--retriever PATH`` takes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from torch import nn

from agentkit.errors import AgentkitError

Kind = Literal["query", "passage"]
SPEC_FILE = "retriever.json"


def _is_sentence_model(path: Path) -> bool:
    return (path / "modules.json").exists()


class Retriever(nn.Module):
    """Text → embedding [D]. ``forward(features)`` keeps the graph (training); ``encode`` does not.

    Args:
        base: a catalog name, directory or hub id: a sentence-transformers model (its own pooling) or a causal LM
            (EOS pooling).
        query_prefix: put before queries (the paper's ``query: ``).
        passage_prefix: put before passages (``passage: ``).
        max_length: tokens per text; longer ones are cut.
        lora_r: LoRA rank on the encoder's attention and MLP (0: train every weight).
        lora_alpha: LoRA's α (default: 2r).
        seed: seeds the LoRA initialisation.
    """

    def __init__(
        self,
        base: str,
        query_prefix: str = "query: ",
        passage_prefix: str = "passage: ",
        max_length: int = 192,
        lora_r: int = 0,
        lora_alpha: int | None = None,
        seed: int = 0,
    ):
        super().__init__()
        from agentkit.models.catalog import resolve

        self.spec = {"base": base, "query_prefix": query_prefix, "passage_prefix": passage_prefix,
                     "max_length": max_length, "lora_r": lora_r}  # fmt: skip
        path = Path(resolve(base))
        self.sentence = _is_sentence_model(path)
        if self.sentence:
            from sentence_transformers import SentenceTransformer

            self.st = SentenceTransformer(str(path), device="cpu")
            self.st.max_seq_length = max_length
            self.tokenizer = self.st.tokenizer
            # sentence-transformers 6 keeps the transformer in ``.model`` (``auto_model`` is a read-only alias)
            backbone_attr = "model" if hasattr(self.st[0], "model") else "auto_model"
            targets = ["query", "key", "value", "dense"]
        else:
            from transformers import AutoModel, AutoTokenizer

            self.tokenizer = AutoTokenizer.from_pretrained(str(path))
            self.backbone = AutoModel.from_pretrained(str(path), dtype=torch.float32)
            backbone_attr, targets = None, ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
        self.spec["pooling"] = "mean (sentence-transformers)" if self.sentence else "eos"
        if lora_r:
            from peft import LoraConfig, get_peft_model

            torch.manual_seed(seed)
            cfg = LoraConfig(r=lora_r, lora_alpha=lora_alpha or 2 * lora_r, lora_dropout=0.0, target_modules=targets)
            if self.sentence:
                mod = self.st[0]
                setattr(mod, backbone_attr, get_peft_model(getattr(mod, backbone_attr), cfg))
            else:
                self.backbone = get_peft_model(self.backbone, cfg)

    # ---- tokenisation and forward -------------------------------------------------------------------------------
    def prefix(self, kind: Kind) -> str:
        return self.spec["query_prefix"] if kind == "query" else self.spec["passage_prefix"]

    def tokenize(self, texts: list[str], kind: Kind) -> dict[str, torch.Tensor]:
        """Prefixed, truncated, right-padded; for EOS pooling the EOS token ends every text (after truncation)."""
        texts = [self.prefix(kind) + t for t in texts]
        if self.sentence:
            encode = getattr(self.st, "preprocess", None) or self.st.tokenize  # tokenize: sentence-transformers < 6
            return {k: v for k, v in encode(texts).items() if isinstance(v, torch.Tensor)}
        tok, n = self.tokenizer, self.spec["max_length"]
        ids = [x[: n - 1] + [tok.eos_token_id] for x in tok(texts, add_special_tokens=False)["input_ids"]]
        width = max(map(len, ids))
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        return {
            "input_ids": torch.tensor([x + [pad] * (width - len(x)) for x in ids]),
            "attention_mask": torch.tensor([[1] * len(x) + [0] * (width - len(x)) for x in ids]),
        }

    def forward(self, features: dict[str, torch.Tensor]) -> torch.Tensor:
        """[N, D] embeddings (not normalised): mean pooling for sentence models, the last real token (EOS) else."""
        if self.sentence:
            return self.st(dict(features))["sentence_embedding"]
        hidden = self.backbone(
            input_ids=features["input_ids"], attention_mask=features["attention_mask"]
        ).last_hidden_state
        last = features["attention_mask"].sum(dim=1) - 1  # right padding: the EOS position of each row
        return hidden[torch.arange(hidden.shape[0]), last]

    @torch.no_grad()
    def encode(self, texts: list[str], kind: Kind, batch_size: int = 32, progress: bool = False) -> np.ndarray:
        """Embeddings without the graph (evaluation, search).

        Args:
            texts: the texts.
            kind: ``query`` or ``passage`` (which prefix).
            batch_size: texts per forward pass (sorted by length, so batches pad little).
            progress: a progress bar.

        Returns:
            L2-normalised float32 embeddings ``[len(texts), D]``, in the texts' order.
        """
        from tqdm.auto import tqdm

        was_training = self.training
        self.eval()
        order = np.argsort([-len(t) for t in texts], kind="stable")
        out: list[torch.Tensor] = []
        for s in tqdm(
            range(0, len(texts), batch_size),
            desc="encode queries" if kind == "query" else "encode passages",
            disable=not progress,
        ):
            batch = [texts[i] for i in order[s : s + batch_size]]
            out.append(torch.nn.functional.normalize(self(self.tokenize(batch, kind)).float(), dim=-1))
        self.train(was_training)
        emb = torch.cat(out).numpy() if out else np.zeros((0, 1), np.float32)
        result = np.empty_like(emb)
        result[order] = emb
        return result

    def _st_backbone(self):
        mod = self.st[0]
        return mod.model if hasattr(mod, "model") else mod.auto_model

    # ---- persistence --------------------------------------------------------------------------------------------
    def save(self, directory: str | Path) -> Path:
        """``retriever.json`` + the LoRA adapter (``adapter/``), or the whole model (``model/``) without LoRA."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        model = self._st_backbone() if self.sentence else self.backbone
        if self.spec["lora_r"]:
            model.save_pretrained(str(d / "adapter"))
        elif self.sentence:
            self.st.save(str(d / "model"))
        else:
            self.backbone.save_pretrained(str(d / "model"))
            self.tokenizer.save_pretrained(str(d / "model"))
        (d / SPEC_FILE).write_text(json.dumps(self.spec, indent=1))
        return d

    def export_sentence_transformers(self, directory: str | Path) -> Path:
        """This retriever as a plain sentence-transformers model, for tools that load one: LoRA merged into the
        weights, the same pooling (mean, or the last token with the tokenizer appending EOS), L2 normalisation, and
        the prefixes as the prompts ``query`` and ``passage``, so that
        ``SentenceTransformer(directory).encode(texts, prompt_name="query")`` equals ``encode(texts, "query")``."""
        import copy
        import tempfile

        from sentence_transformers import SentenceTransformer
        from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

        backbone = copy.deepcopy(self._st_backbone() if self.sentence else self.backbone)
        if hasattr(backbone, "merge_and_unload"):  # a PEFT model: the adapter folded into the weights
            backbone = backbone.merge_and_unload()
        prompts = {"query": self.spec["query_prefix"], "passage": self.spec["passage_prefix"]}
        if self.sentence:
            st = copy.deepcopy(self.st)
            setattr(st[0], "model" if hasattr(st[0], "model") else "auto_model", backbone)
            modules = list(st)
        else:
            with tempfile.TemporaryDirectory() as tmp:
                backbone.save_pretrained(tmp)
                tok = copy.deepcopy(self.tokenizer)
                _append_eos(tok)
                tok.save_pretrained(tmp)
                first = Transformer(tmp, max_seq_length=self.spec["max_length"])
            modules = [first, Pooling(first.get_embedding_dimension(), "lasttoken")]
        if not any(isinstance(m, Normalize) for m in modules):
            modules.append(Normalize())
        out = SentenceTransformer(modules=modules, prompts=prompts, device="cpu")
        out.max_seq_length = self.spec["max_length"]
        out.save(str(directory))
        return Path(directory)

    @classmethod
    def load(cls, directory: str | Path) -> Retriever:
        """A retriever saved by ``save``; a plain model name or directory loads untrained (no LoRA)."""
        d = Path(directory)
        if not (d / SPEC_FILE).exists():
            if d.exists() and not (d / "config.json").exists() and not _is_sentence_model(d):
                raise AgentkitError(f"{d} holds no {SPEC_FILE}", "pass a directory written by the revela recipe")
            return cls(str(directory))
        spec = json.loads((d / SPEC_FILE).read_text())
        lora = spec.get("lora_r", 0)
        base = str(d / "model") if (d / "model").exists() else spec["base"]
        r = cls(base, spec["query_prefix"], spec["passage_prefix"], spec["max_length"], lora_r=0)
        r.spec.update(base=spec["base"], lora_r=lora)
        if lora:
            from peft import PeftModel

            if r.sentence:
                attr = "model" if hasattr(r.st[0], "model") else "auto_model"
                setattr(r.st[0], attr, PeftModel.from_pretrained(getattr(r.st[0], attr), str(d / "adapter")))
            else:
                r.backbone = PeftModel.from_pretrained(r.backbone, str(d / "adapter"))
        return r.eval()


def _append_eos(tok) -> None:
    """Make a fast tokenizer end every text with EOS (after truncation, which then keeps one place for it), pad on
    the right with EOS when it has no pad token, and read texts as plain text: what ``Retriever.tokenize`` does by
    hand for EOS pooling."""
    from tokenizers import processors

    eos = (tok.eos_token, tok.eos_token_id)
    steps = [
        processors.TemplateProcessing(single=f"$A {eos[0]}", pair=f"$A {eos[0]} $B {eos[0]}", special_tokens=[eos])
    ]
    if tok.backend_tokenizer.post_processor is not None:
        steps.insert(0, tok.backend_tokenizer.post_processor)
    tok.backend_tokenizer.post_processor = processors.Sequence(steps)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "right"
    tok.chat_template = None  # sentence-transformers would wrap a text in it as a chat message
