"""Tiny randomly initialised models with a byte-level tokenizer (a Llama, a Gemma 3, a LLaVA): fast, self-contained,
for unit tests."""

from __future__ import annotations

from pathlib import Path

TINY_CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


# Bumped when the model changes, so caches built by an older version are rebuilt. 2: head_dim 32 (2 heads), the
# smallest head size vLLM's CPU attention supports, so the same tiny model runs on every engine.
TINY_VERSION = 2


def build_tiny_tokenizer():
    """Byte-level BPE without merges: every byte is a token, plus the ChatML special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {ch: i for i, ch in enumerate(sorted(alphabet))}
    tk = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tk.decoder = decoders.ByteLevel()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=tk, bos_token="<|im_start|>", eos_token="<|im_end|>", pad_token="<|pad|>"
    )
    tok.chat_template = TINY_CHAT_TEMPLATE
    return tok


def _tiny_shape(vocab_size: int, hidden: int, layers: int) -> dict:
    """The config both tiny families share: 2 query heads on 1 key/value head; BOS, EOS, PAD the last three ids."""
    return dict(
        vocab_size=vocab_size,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=2048,
        bos_token_id=vocab_size - 3,
        eos_token_id=vocab_size - 2,
        pad_token_id=vocab_size - 1,
    )


def build_tiny_model(vocab_size: int, hidden: int = 64, layers: int = 2, seed: int = 0):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(**_tiny_shape(vocab_size, hidden, layers), tie_word_embeddings=False, initializer_range=0.1)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(cfg)
    # An untied output layer of std 0.25 gives logits of std ~2 (hidden rms 1, width 64): distributions neither
    # flat nor one-hot, so sampling, top-k/top-p and entropy tests have something to measure. (Tied embeddings
    # made the model repeat its last input token with probability ~1.)
    with torch.no_grad():
        model.lm_head.weight.normal_(0, 0.25)
    return model


def build_tiny_random(out: Path) -> None:
    tok = build_tiny_tokenizer()
    model = build_tiny_model(len(tok))
    assert model.config.eos_token_id == tok.eos_token_id and model.config.pad_token_id == tok.pad_token_id
    model.save_pretrained(str(out))
    tok.save_pretrained(str(out))
    (out / ".tiny-version").write_text(f"{TINY_VERSION}\n")


def build_tiny_gemma3(vocab_size: int, hidden: int = 64, layers: int = 2, seed: int = 0):
    """A tiny Gemma 3 (text): q/k norms, one sliding-window and one full-attention layer, query_pre_attn_scalar
    scaling; the second family the Revela attention is tested on."""
    import torch
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    cfg = Gemma3TextConfig(
        **_tiny_shape(vocab_size, hidden, layers),
        head_dim=32,
        query_pre_attn_scalar=32,
        sliding_window=8,
        layer_types=["sliding_attention", "full_attention"][:layers],
    )
    torch.manual_seed(seed)
    return Gemma3ForCausalLM(cfg)


# A chat template that also renders structured content: image parts become the processor's ``<image>``
# placeholder (which the processor expands to the image's patch tokens), text parts their text.
TINY_VLM_CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}{% for p in m['content'] %}"
    "{% if p['type'] == 'image' %}<image>{% elif p['type'] == 'text' %}{{ p['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_tiny_vlm(out: Path, seed: int = 0) -> None:
    """A tiny randomly initialised LLaVA (a 1-layer CLIP vision tower on 32×32 images in 8×8 patches: 16 image
    tokens; a projector; the tiny Llama) with its processor, for tests of image inputs."""
    import torch
    from transformers import (
        CLIPImageProcessor,
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
    )

    tok = build_tiny_tokenizer()
    tok.add_special_tokens({"additional_special_tokens": ["<image>"]})
    tok.chat_template = TINY_VLM_CHAT_TEMPLATE
    text = LlamaConfig(**_tiny_shape(len(tok), 64, 2), tie_word_embeddings=False)
    text.bos_token_id, text.eos_token_id, text.pad_token_id = tok.bos_token_id, tok.eos_token_id, tok.pad_token_id
    vision = CLIPVisionConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=32, patch_size=8
    )
    cfg = LlavaConfig(
        vision_config=vision,
        text_config=text,
        image_token_id=tok.convert_tokens_to_ids("<image>"),
        vision_feature_layer=-1,
        vision_feature_select_strategy="default",  # drops CLIP's class token: 16 tokens per image
    )
    torch.manual_seed(seed)
    model = LlavaForConditionalGeneration(cfg)
    with torch.no_grad():  # as build_tiny_model: logits of std ~2
        model.lm_head.weight.normal_(0, 0.25)
    processor = LlavaProcessor(
        image_processor=CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}),
        tokenizer=tok,
        patch_size=8,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        image_token="<image>",
        chat_template=TINY_VLM_CHAT_TEMPLATE,
    )
    model.generation_config.pad_token_id = tok.pad_token_id
    model.save_pretrained(str(out))
    processor.save_pretrained(str(out))
    (out / ".tiny-version").write_text(f"{TINY_VERSION}\n")
