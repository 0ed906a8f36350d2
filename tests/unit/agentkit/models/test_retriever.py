"""The Revela retriever: EOS pooling, prefixes, LoRA through PEFT, save → load gives the same embeddings."""

import numpy as np
import torch

from agentkit.models.retriever import Retriever


def test_eos_pooling_reads_the_last_real_token_and_prefixes_apply():
    r = Retriever("tiny-random", query_prefix="Q: ", passage_prefix="P: ", max_length=12)
    f = r.tokenize(["ab", "abcdefghijklmnopqrstuvwxyz"], "passage")
    eos = r.tokenizer.eos_token_id
    assert f["input_ids"].shape == (2, 12)  # "P: ab" + EOS = 6 tokens, the long one truncated to 11 + EOS
    assert f["input_ids"][0, 5].item() == eos and f["attention_mask"][0].sum().item() == 6
    assert f["input_ids"][1, 11].item() == eos
    assert r.tokenizer.decode(f["input_ids"][0, :3]) == "P: "
    hidden = r.backbone(**f).last_hidden_state
    torch.testing.assert_close(r(f), hidden[[0, 1], [5, 11]])
    q, p = r.encode(["ab"], "query"), r.encode(["ab"], "passage")
    assert q.shape == (1, 64) and not np.allclose(q, p)  # the prefix changes the embedding
    np.testing.assert_allclose(np.linalg.norm(q, axis=1), 1.0, rtol=1e-5)


def test_encode_keeps_input_order_across_length_sorted_batches():
    r = Retriever("tiny-random")
    texts = ["a", "a much longer text than the others", "mid length", "b"]
    one_by_one = np.concatenate([r.encode([t], "passage") for t in texts])
    np.testing.assert_allclose(r.encode(texts, "passage", batch_size=2), one_by_one, rtol=1e-4, atol=1e-5)


def test_lora_retriever_saves_and_loads(tmp_path):
    for base in ("tiny-random", "minilm-l6"):
        r = Retriever(base, lora_r=4, seed=1)
        trainable = [n for n, p in r.named_parameters() if p.requires_grad]
        assert trainable and all("lora_" in n for n in trainable)
        with torch.no_grad():  # move the adapter away from its zero init, as training would
            for n, p in r.named_parameters():
                if "lora_B" in n:
                    p.normal_(0, 0.05)
        before = r.encode(["parse a config file", "sort a list"], "passage")
        back = Retriever.load(r.save(tmp_path / base))
        np.testing.assert_allclose(back.encode(["parse a config file", "sort a list"], "passage"), before, atol=1e-5)
        assert (tmp_path / base / "adapter").is_dir()


def test_exported_sentence_transformers_model_encodes_the_same(tmp_path):
    """``export_sentence_transformers``: ``SentenceTransformer(dir)`` loads it with no agentkit code and encodes
    queries and passages (prompt names) as the retriever does, LoRA merged, for both poolings; a text cut at
    ``max_length`` keeps its EOS."""
    from sentence_transformers import SentenceTransformer

    texts = ["how do I install a package", "the quick brown fox jumps over the lazy dog " * 6, "x"]
    for base in ("tiny-random", "minilm-l6"):  # EOS pooling over a causal LM; a sentence model's mean pooling
        r = Retriever(base, lora_r=4, seed=1, max_length=24)
        with torch.no_grad():
            for n, p in r.named_parameters():
                if "lora_B" in n:
                    p.normal_(0, 0.05)
        st = SentenceTransformer(str(r.export_sentence_transformers(tmp_path / base)), device="cpu")
        assert not any(n.startswith("base_model") or "lora_" in n for n, _ in st.named_parameters())
        for kind in ("query", "passage"):
            np.testing.assert_allclose(st.encode(texts, prompt_name=kind), r.encode(texts, kind), atol=1e-5)
