"""VisionEngine on the tiny random LLaVA: images reach the model, chats, ids-with-images and OpenAI data URLs give
the same tokens, logprobs are the model's own under a teacher-forced forward with the image, seeded samples do not
depend on the batch, stop strings cut; text-only engines refuse images; the agent loop carries a prompt's images
into later turns."""

import base64
import io

import pytest
import torch
from PIL import Image

from agentkit.agent.loop import AgentConfig, _sequence, continue_rollout
from agentkit.agent.trajectory import Trajectory
from agentkit.engines import ImagePrompt, SamplingParams, make_engine
from agentkit.engines.hf import HFEngine
from agentkit.engines.vision import VisionEngine

RED, BLUE = Image.new("RGB", (40, 40), (255, 0, 0)), Image.new("RGB", (24, 60), (0, 0, 255))
GREEDY = SamplingParams(temperature=0, max_tokens=8)


def chat(image, text="What colour is it?"):
    return [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": [{"type": "image", "image": image}, {"type": "text", "text": text}]},
    ]


@pytest.fixture(scope="module")
def vlm():
    return make_engine("hf", "tiny-random-vlm", max_batch_size=8, prefix_cache_mb=0)  # an HFEngine-only option


def test_make_engine_gives_a_vision_engine_and_images_change_the_answer(vlm):
    assert isinstance(vlm, VisionEngine)
    prompt = vlm.prepare(chat(RED))
    image_token = vlm.model.config.image_token_id
    assert prompt.ids.count(image_token) == 16 and len(prompt.images) == 1  # 32x32 in 8x8 patches
    red, blue = (vlm.generate([chat(im)], GREEDY)[0][0] for im in (RED, BLUE))
    assert red.logprobs != blue.logprobs and red.prompt_tokens == blue.prompt_tokens


def test_chat_ids_with_images_data_urls_and_batching_agree(vlm):
    buf = io.BytesIO()
    RED.save(buf, format="PNG")
    url = {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()},
    }
    as_url = chat(RED)
    as_url[1]["content"][0] = url
    before = vlm.stats()["requests"]
    alone = vlm.generate([chat(RED)], GREEDY)[0][0]
    batch = vlm.generate([chat(BLUE), chat(RED), "a plain text prompt"], GREEDY)
    again = vlm.generate([vlm.prepare(chat(RED)), as_url, chat(buf.getvalue())], GREEDY)
    assert batch[1][0].token_ids == alone.token_ids
    assert all(c[0].token_ids == alone.token_ids for c in again)
    assert vlm.stats()["requests"] == before + 3


def test_logprobs_are_the_models_own_with_the_image(vlm):
    c = vlm.generate([chat(BLUE)], SamplingParams(temperature=1.0, max_tokens=6, seed=1))[0][0]
    p = vlm.prepare(chat(BLUE))
    ids = torch.tensor([p.ids + c.token_ids])
    pixels = vlm.processor.image_processor(images=p.images, return_tensors="pt")["pixel_values"]
    with torch.no_grad():
        logp = vlm.model(input_ids=ids, pixel_values=pixels).logits.log_softmax(-1)[0]
    n = len(p.ids)
    forced = [logp[n - 1 + k, t].item() for k, t in enumerate(c.token_ids)]
    assert forced == pytest.approx(c.logprobs, abs=1e-4)


def test_seeded_samples_do_not_depend_on_the_batch(vlm):
    params = SamplingParams(temperature=1.0, max_tokens=6, n=3, seed=7)
    together = vlm.generate([chat(BLUE), chat(RED)], params)
    alone = vlm.generate([chat(RED)], params)
    assert [c.token_ids for c in together[1]] == [c.token_ids for c in alone[0]]
    assert len({tuple(c.token_ids) for c in alone[0]}) > 1  # the n samples differ
    per_prompt = vlm.generate([chat(RED), chat(RED)], SamplingParams(temperature=1.0, max_tokens=6, seeds=[1, 2]))
    assert per_prompt[0][0].token_ids != per_prompt[1][0].token_ids


def test_stop_strings_cut_the_text(vlm):
    free = vlm.generate([chat(RED)], SamplingParams(temperature=0, max_tokens=12))[0][0]
    stop = vlm.decode(free.token_ids[2:3])
    cut = vlm.generate([chat(RED)], SamplingParams(temperature=0, max_tokens=12, stop=[stop]))[0][0]
    kept = vlm.generate(
        [chat(RED)], SamplingParams(temperature=0, max_tokens=12, stop=[stop], include_stop_str_in_output=True)
    )[0][0]
    assert cut.finish_reason == "stop" and cut.stop_reason == stop and stop not in cut.text
    assert kept.text == cut.text + stop and cut.token_ids == free.token_ids[: len(cut.token_ids)]
    with pytest.raises(ValueError, match="structured outputs"):
        vlm.generate([chat(RED)], SamplingParams(constraint={"type": "choice", "choices": ["a"]}))


def test_text_only_engines_refuse_images(tiny_engine):
    for prompt in (chat(RED), ImagePrompt([1, 2], [RED])):
        with pytest.raises(ValueError, match="text-only"):
            tiny_engine.generate([prompt], GREEDY)
    assert isinstance(make_engine("hf", "tiny-random"), HFEngine)


def test_the_agent_loop_keeps_the_images_for_later_turns(vlm):
    """A turn continues the trajectory's ids with its prompt's images: 4 greedy tokens, then 4 more from the
    trajectory, are the 8 greedy tokens of the chat."""
    t = Trajectory("q", chat(RED), vlm.encode(chat(RED)))
    continue_rollout(
        vlm,
        [t],
        [],
        AgentConfig(max_turns=1, sampling=SamplingParams(max_tokens=4, temperature=0, seed=0, entropy=True)),
    )
    seq = _sequence(t)
    assert isinstance(seq, ImagePrompt) and seq.ids == t.prompt_ids + t.completion_ids and len(seq.images) == 1
    full = vlm.generate([chat(RED)], GREEDY)[0][0].token_ids
    more = vlm.generate([seq], SamplingParams(temperature=0, max_tokens=4))[0][0].token_ids
    assert len(t.completion_ids) == 4 and t.completion_ids + more == full
    text_only = Trajectory("q", [{"role": "user", "content": "?"}], vlm.encode([{"role": "user", "content": "?"}]))
    assert _sequence(text_only) == text_only.prompt_ids
