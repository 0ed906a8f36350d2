"""``agentkit bench structured``: the cost of constrained decoding, in one process, on smollm2-135m.

1. **Libraries** (how xgrammar was picked): ``model.generate`` with an HF logits processor around each grammar
   library installed (xgrammar, llguidance, outlines-core; ``make setup-vllm`` installs all three, vLLM uses
   them), against ``model.generate`` without one. Each processor fills one 32-bit token bitmask per row and step
   from its library's matcher, and applies it with the same function (``apply_bitmask``), so only the libraries
   differ. ``mask_ms_per_step`` is the processor's own time; the tokens/s of ``generate`` vary ±10 % run to run
   here, more than the masks cost at batch 1.
2. **HFEngine**: constrained against unconstrained generation at batch 1 and 32 (target ≥ 0.8×), interleaved
   twice, best of each; ``grammar_share_of_time`` is the part of the constrained call spent in grammar work.

Both parts decode exactly ``max_tokens`` tokens per row (temperature 1) so tokens/s compare like for like: the
constrained rows write a JSON array of strings whose ``minItems`` it cannot reach in that budget, the free rows
ignore EOS. String content is the costly case for a mask (most of the vocabulary is allowed). A third row per
batch size reports a natural workload: 20+ prompts asking for a small JSON object (``ITEM`` schema), each row
ending when its object is complete, against the same prompts unconstrained (rows end at EOS).
"""

from __future__ import annotations

import json
import time
from contextlib import contextmanager
from dataclasses import replace

import torch

from agentkit.argtypes import POS_INT
from agentkit.command import add_model_option, add_out_option, int_list
from agentkit.engines import SamplingParams
from agentkit.engines.structured import JSON_LAYOUT, Constraint, RowGrammars, apply_bitmask
from agentkit.eval.bench import write_json
from agentkit.models.catalog import DEFAULT_CHAT_MODEL

ARRAY = {"type": "array", "items": {"type": "string", "minLength": 4, "maxLength": 40}, "minItems": 48}
ITEM = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 40},
        "colour": {"type": "string", "maxLength": 20},
        "size": {"type": "integer", "minimum": 1, "maximum": 100},
    },
    "required": ["name", "colour", "size"],
}
THINGS = [
    "cat",
    "city",
    "car",
    "book",
    "movie",
    "planet",
    "song",
    "tree",
    "laptop",
    "river",
    "bird",
    "chair",
    "pizza",
    "country",
    "museum",
    "phone",
    "mountain",
    "game",
    "shoe",
    "bridge",
    "lamp",
    "ship",
    "flower",
    "cake",
    "robot",
    "island",
    "guitar",
    "castle",
    "train",
    "coin",
    "forest",
    "violin",
]


def _chats(n: int, ask: str) -> list[list[dict[str, str]]]:
    system = {"role": "system", "content": "You reply with JSON and nothing else."}
    return [[system, {"role": "user", "content": ask.format(thing=THINGS[i % len(THINGS)], i=i)}] for i in range(n)]


# ---- 1. libraries behind one HF logits processor --------------------------------------------------------------
def _xgrammar(tok, vocab: int, schema: str):
    import xgrammar as xgr

    info = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=vocab)
    compiled = xgr.GrammarCompiler(info, cache_enabled=False).compile_json_schema(schema, any_whitespace=False)
    return (
        lambda: xgr.GrammarMatcher(compiled),
        lambda m, bm, i: m.fill_next_token_bitmask(bm, i),
        lambda m, t: m.accept_token(t),
    )


def _llguidance(tok, vocab: int, schema: str):
    import llguidance
    import llguidance.hf
    import llguidance.torch

    lltok = llguidance.hf.from_tokenizer(tok, n_vocab=vocab)
    grammar = llguidance.LLMatcher.grammar_from_json_schema(schema, defaults=JSON_LAYOUT)
    return (
        lambda: llguidance.LLMatcher(lltok, grammar),
        lambda m, bm, i: llguidance.torch.fill_next_token_bitmask(m, bm, i),
        lambda m, t: m.consume_token(t),
    )


def _outlines_core(tok, vocab: int, schema: str):
    import outlines_core
    from outlines_core.json_schema import build_regex_from_schema
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    # outlines-core wants each token's bytes; a byte-level BPE token's characters each stand for one byte
    to_byte = {v: k for k, v in bytes_to_unicode().items()}
    special = set(tok.all_special_tokens)
    vocabulary: dict[bytes, list[int]] = {}
    for token, i in tok.get_vocab().items():
        if token not in special and i != tok.eos_token_id and all(c in to_byte for c in token):
            vocabulary.setdefault(bytes(to_byte[c] for c in token), []).append(i)
    index = outlines_core.Index(build_regex_from_schema(schema), outlines_core.Vocabulary(tok.eos_token_id, vocabulary))
    return (
        lambda: outlines_core.Guide(index),
        lambda m, bm, i: m.write_mask_into(bm[i].data_ptr(), bm[i].numel(), bm.element_size()),
        lambda m, t: m.advance(t),
    )


LIBRARIES = {"xgrammar": _xgrammar, "llguidance": _llguidance, "outlines-core": _outlines_core}


class _BitmaskProcessor:
    """An HF logits processor: one matcher per row, its bitmask filled per step, then applied."""

    def __init__(self, new, fill, accept, rows: int, vocab: int):
        self.matchers, self.fill, self.accept, self.vocab = [new() for _ in range(rows)], fill, accept, vocab
        self.started, self.seconds = False, 0.0

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        t = time.perf_counter()
        bitmask = torch.full((scores.shape[0], (self.vocab + 31) // 32), -1, dtype=torch.int32)
        for i, m in enumerate(self.matchers):
            if self.started:
                self.accept(m, int(input_ids[i, -1]))
            self.fill(m, bitmask, i)
        self.started = True
        scores = apply_bitmask(scores, bitmask)
        self.seconds += time.perf_counter() - t
        return scores


@torch.inference_mode()
def _generate(model, tok, chats, max_tokens: int, processor=None) -> tuple[float, int]:
    texts = [tok.apply_chat_template(c, add_generation_prompt=True, tokenize=False) for c in chats]
    enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    torch.manual_seed(0)
    t = time.perf_counter()
    out = model.generate(
        **enc,
        max_new_tokens=max_tokens,
        min_new_tokens=max_tokens,
        do_sample=True,
        temperature=1.0,
        top_k=0,
        top_p=1.0,
        pad_token_id=tok.pad_token_id,
        logits_processor=[processor] if processor else None,
    )
    return time.perf_counter() - t, (out.shape[1] - enc.input_ids.shape[1]) * len(chats)


def libraries(model, tok, batch_sizes, max_tokens: int) -> list[dict]:
    vocab = model.config.vocab_size
    schema = json.dumps(ARRAY)
    rows = []
    for b in batch_sizes:
        chats = _chats(b, "List {i} words about a {thing} as a JSON array of strings.")
        secs, n = _generate(model, tok, chats, max_tokens)
        rows.append({"library": "none", "batch": b, "tokens_per_s": round(n / secs, 1)})
        print(json.dumps(rows[-1]), flush=True)
        for name, build in LIBRARIES.items():
            try:
                t = time.perf_counter()
                parts = build(tok, vocab, schema)
                setup = time.perf_counter() - t
            except ImportError:
                continue
            proc = _BitmaskProcessor(*parts, rows=b, vocab=vocab)
            s, k = _generate(model, tok, chats, max_tokens, proc)
            rows.append(
                {
                    "library": name,
                    "batch": b,
                    "tokens_per_s": round(k / s, 1),
                    "ratio": round(secs / s * k / n, 3),
                    "setup_s": round(setup, 3),
                    "mask_ms_per_step": round(1000 * proc.seconds / max_tokens, 2),
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    return rows


# ---- 2. HFEngine constrained vs free ---------------------------------------------------------------------------
@contextmanager
def _timing_grammar():
    """Seconds spent in HFEngine's grammar work (masks and matcher advances) while the block runs: ``[seconds]``."""
    spent = [0.0]
    originals = {name: getattr(RowGrammars, name) for name in ("mask", "advance")}

    def timed(fn):
        def wrapper(*args, **kwargs):
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[0] += time.perf_counter() - t

        return wrapper

    for name, fn in originals.items():
        setattr(RowGrammars, name, timed(fn))
    try:
        yield spent
    finally:
        for name, fn in originals.items():
            setattr(RowGrammars, name, fn)


def engine_rows(engine, batch_sizes, max_tokens: int, repeats: int = 2) -> list[dict]:
    rows = []
    for b in batch_sizes:
        for workload in ("fixed", "natural"):
            if workload == "fixed":
                chats = _chats(b, "List {i} words about a {thing} as a JSON array of strings.")
                free = SamplingParams(max_tokens=max_tokens, temperature=1.0, seed=0, ignore_eos=True)
                con = Constraint.schema(ARRAY)
            else:
                chats = _chats(
                    b,
                    "Give the name, colour and size of a {thing} as a JSON object with the keys name, colour and size.",
                )
                free = SamplingParams(max_tokens=2 * max_tokens, temperature=1.0, seed=0)
                con = Constraint.schema(ITEM)
            cons = replace(free, constraint=con)
            engine.generate(chats[:1], cons)  # compiles the grammar (cached from then on)
            best: dict[str, tuple[float, int, list]] = {}
            grammar_s = 0.0
            for _ in range(repeats):  # interleaved, best of each: the machine drifts ±8 % between runs
                for name, p in (("free", free), ("constrained", cons)):
                    with _timing_grammar() as spent:
                        t = time.perf_counter()
                        res = engine.generate(chats, p)
                        secs = time.perf_counter() - t
                    toks = sum(c.completion_tokens for cs in res for c in cs)
                    if name not in best or toks / secs > best[name][0]:
                        best[name] = (toks / secs, toks, res)
                        if name == "constrained":
                            grammar_s = spent[0] / secs
            valid = sum(_parses(c.text) for cs in best["constrained"][2] for c in cs)
            rows.append(
                {
                    "workload": workload,
                    "batch": b,
                    "free_tokens_per_s": round(best["free"][0], 1),
                    "constrained_tokens_per_s": round(best["constrained"][0], 1),
                    "ratio": round(best["constrained"][0] / best["free"][0], 3),
                    "grammar_share_of_time": round(grammar_s, 3),
                    "free_tokens": best["free"][1],
                    "constrained_tokens": best["constrained"][1],
                    "constrained_complete_json": f"{valid}/{b}" if workload == "natural" else None,
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    return rows


def _parses(text: str) -> bool:
    try:
        json.loads(text)
        return True
    except json.JSONDecodeError:
        return False


def main(
    model: str = DEFAULT_CHAT_MODEL,
    batch_sizes=(1, 32),
    max_tokens: int = 64,
    skip_libraries: bool = False,
    out: str | None = None,
) -> int:
    from agentkit.engines.hf import HFEngine

    engine = HFEngine(model, max_batch_size=max(batch_sizes))
    engine.generate(_chats(2, "Say hi to a {thing}."), SamplingParams(max_tokens=4))  # warm-up
    res = {
        "model": model,
        "max_tokens": max_tokens,
        "threads": torch.get_num_threads(),
        "libraries": [] if skip_libraries else libraries(engine.model, engine.tokenizer, batch_sizes, max_tokens),
        "hfengine": engine_rows(engine, batch_sizes, max_tokens),
    }
    if res["libraries"]:
        print(f"\n{'library':>14} {'batch':>5} {'tokens/s':>9} {'× none':>7} {'setup s':>8} {'mask ms/step':>13}")
        for r in res["libraries"]:
            print(
                f"{r['library']:>14} {r['batch']:>5} {r['tokens_per_s']:>9.1f} {r.get('ratio', 1):>7.3f} "
                f"{r.get('setup_s', 0):>8.3f} {r.get('mask_ms_per_step', 0):>13.2f}"
            )
    print(f"\n{'workload':>9} {'batch':>5} {'free tok/s':>11} {'constrained':>12} {'ratio':>6} {'grammar share':>14}")
    for r in res["hfengine"]:
        print(
            f"{r['workload']:>9} {r['batch']:>5} {r['free_tokens_per_s']:>11.1f} {r['constrained_tokens_per_s']:>12.1f} "
            f"{r['ratio']:>6.3f} {r['grammar_share_of_time']:>14.1%}"
        )
    write_json(out, res)
    return 0


def report(res: dict) -> str:
    """The benchmarks page's block (``bench page``): the libraries' table, then HFEngine constrained vs free."""
    out = []
    if res["libraries"]:
        out += ["| library | batch | tokens/s | vs none | setup | mask per step |", "|---|---|---|---|---|---|"]
        for r in res["libraries"]:
            setup = f"{r['setup_s']:.3f} s" if "setup_s" in r else "–"
            mask = f"{r['mask_ms_per_step']:.2f} ms" if "mask_ms_per_step" in r else "–"
            vs = f"{r['ratio']}" if "ratio" in r else "–"
            out.append(f"| {r['library']} | {r['batch']} | {r['tokens_per_s']} | {vs} | {setup} | {mask} |")
        out.append("")
    out += [
        "| workload | batch | free tokens/s | constrained tokens/s | constrained / free | grammar share | complete JSON |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in res["hfengine"]:
        out.append(
            f"| {r['workload']} | {r['batch']} | {r['free_tokens_per_s']} | {r['constrained_tokens_per_s']} | "
            f"{r['ratio']:.2f} | {100 * r['grammar_share_of_time']:.1f} % | {r['constrained_complete_json'] or '–'} |"
        )
    fixed = [r for r in res["hfengine"] if r["workload"] == "fixed"]
    kept = " and ".join(f"{r['ratio']:.2f}× at batch {r['batch']}" for r in fixed)
    return "\n".join(out) + f"\n\nConstrained decoding keeps {kept} of the free speed (`fixed`: the same tokens)."


def ratios(res: dict) -> dict[str, tuple[float, str]]:
    """The ratios ``bench summary`` and ``bench compare`` read (higher is better)."""
    return {
        f"{r['workload']} b{r['batch']}: constrained / free (tokens/s)": (r["ratio"], "higher")
        for r in res["hfengine"]
        if r["workload"] == "fixed"  # natural rows stop at different lengths: not a speed ratio
    }


HELP = "constrained decoding: grammar libraries, HFEngine constrained vs free"


def add_arguments(parser) -> None:
    """``agentkit bench structured``'s options: ``main``'s parameters."""
    add_model_option(parser)
    parser.add_argument("--batch-sizes", type=int_list, default="1,32", help="comma-separated batch sizes")
    parser.add_argument(
        "--max-tokens", type=POS_INT, default=64, help="tokens per row (the natural workload: up to twice)"
    )
    parser.add_argument("--skip-libraries", action="store_true", help="only HFEngine constrained vs free")
    add_out_option(parser)
