"""The batched multi-turn tool-integrated loop: ``rollout(engine, tasks, tools, config) -> list[Trajectory]``.

Each turn generates for every unfinished trajectory in one engine call (stopping at a closing tool tag or the
answer), runs that turn's tool calls concurrently, appends the results as tokens, and continues. Prompts are
passed to the engine as token ids (prompt + everything so far), so what the model saw is exactly what the
trajectory records. Tag format: ``agentkit.tools.parsers``.
"""

from __future__ import annotations

import inspect
import secrets
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Literal

from agentkit.agent.trajectory import Segment, Trajectory
from agentkit.config import NonNegInt, PosFloat, PosInt, option
from agentkit.engines.base import ImagePrompt, SamplingParams, chat_images, image_parts, tool_turn_suffix
from agentkit.tools.base import Tool, ToolResult, openai_schema
from agentkit.tools.parsers import (
    ToolCall,
    format_hermes_result,
    format_tag_result,
    hermes_tools_prompt,
    parse_answer,
    parse_hermes_calls,
    parse_tag_call,
    tag_stop_strings,
)

TIR_SYSTEM_PROMPT = (
    "You solve problems step by step and may use tools. To run Python, write code between <python> and </python>; "
    "what it prints comes back between <result> and </result>. To search the documents, write a query between "
    "<search> and </search>. Give the final answer between <answer> and </answer>, e.g. <answer>42</answer>."
)

# New tokens per model turn on the tag-style suites: one <python>/<search> call, or the answer, fits in it (the
# default of every recipe and benchmark that runs those suites).
TIR_TOKENS_PER_TURN = 64

# Two worked tag-style exchanges, for models never tuned for tools: with them SmolLM2-135M-Instruct writes a
# <python> call on 30 of 32 suite-(a) tasks and answers 16 (none and 0 without; see docs/agent.md).
TIR_EXAMPLES = [
    {"role": "user", "content": "What is 386 × 47 - 1250?"},
    {
        "role": "assistant",
        "content": "<python>print(386 * 47 - 1250)</python>\n<result>\n16892\n</result>\n<answer>16892</answer>",
    },
    {"role": "user", "content": "Solve for x: 12x + 30 = 354."},
    {
        "role": "assistant",
        "content": "<python>print((354 - 30) / 12)</python>\n<result>\n27.0\n</result>\n<answer>27</answer>",
    },
]
# Four dependent calls, one per step (the ``steps`` kind of suite (a): multi-turn rollouts for benchmarks).
STEPS_EXAMPLES = [
    {
        "role": "user",
        "content": "Start with 386. Multiply by 47, then subtract 1250, then multiply by 3, then add 999. "
        "Use one Python call per step.",
    },
    {
        "role": "assistant",
        "content": "<python>print(386 * 47)</python>\n<result>\n18142\n</result>\n"
        "<python>print(18142 - 1250)</python>\n<result>\n16892\n</result>\n"
        "<python>print(16892 * 3)</python>\n<result>\n50676\n</result>\n"
        "<python>print(50676 + 999)</python>\n<result>\n51675\n</result>\n"
        "<answer>51675</answer>",
    },
]
# The same for <search> over suite (b): two hops, results in SearchTool's format (invented names).
SEARCH_EXAMPLES = [
    {"role": "user", "content": "In which city was the founder of Morvane Optics born?"},
    {
        "role": "assistant",
        "content": "<search>founder of Morvane Optics</search>\n<result>\n[1] Morvane Optics "
        "(doc-morvane-optics)\nMorvane Optics is a company founded in 1971 by Tessa Kulir.\n</result>\n"
        "<search>Tessa Kulir born</search>\n<result>\n[1] Tessa Kulir (doc-tessa-kulir)\nTessa Kulir is an "
        "architect born in 1940 in the city of Brevik.\n</result>\n<answer>Brevik</answer>",
    },
]


@dataclass
class AgentConfig:
    """Limits and sampling of a rollout.

    ``sampling`` is how each model turn is drawn: ``sampling.n`` trajectories per task, each turn at most
    ``sampling.max_tokens`` new tokens (and what is left of ``max_total_tokens``), trajectory j of a task at turn t
    seeded ``seed + 7919 t + 104729 j`` so the n samples differ and a rerun repeats them. A trajectory ends at its
    answer, or at the first limit it reaches, its ``finish`` naming it (``max_turns``, ``max_tool_calls``,
    ``length``, ``wall_time``).

    Tool-call styles: ``tags`` (``<python>…</python>``, the TIR papers) or ``json`` (hermes
    ``<tool_call>{…}</tool_call>``, results in ``<tool_response>``; the tools' JSON schemas are added to the system
    prompt, and a turn without a call is the final answer). Where json-style results go (``tool_turns``):
    ``inline``, in ``<tool_response>`` tags inside the model's turn, which goes on (generation stops at each
    ``</tool_call>``); or ``chat``: the model ends its turn after its calls, the results go in as the chat
    template's tool messages and the model goes on in a new assistant turn, what models tuned for native tool
    calling (Qwen 2.5, Llama 3.1) expect and how TRL's ``GRPOTrainer(tools=…)`` builds its conversations (needs a
    local tokenizer).
    """

    RENAMED: ClassVar[dict[str, str]] = {
        "max_tokens_per_turn": "sampling.max_tokens",
        **{k: f"sampling.{k}" for k in ("n", "temperature", "top_p", "top_k", "seed", "entropy")},
    }

    max_turns: PosInt = option(4, "model turns per trajectory")
    max_tool_calls: NonNegInt = option(4, "tool calls per trajectory; a call over it ends the trajectory")
    max_total_tokens: PosInt = option(1024, "completion tokens per trajectory, tool results included")
    max_wall_s: PosFloat = option(
        float("inf"),
        "wall time of the whole rollout in seconds; unfinished trajectories end as wall_time (none by default: a "
        "batch job on a busy machine keeps its trajectories; the server sets 600 per request)",
    )
    max_calls_per_tool: dict[str, int] = option(
        {}, "calls of each named tool per trajectory, e.g. {python: 4, search: 4} (Tool-Light's sampling)"
    )
    sampling: SamplingParams = option(
        SamplingParams(temperature=0.0, max_tokens=256, seed=0, entropy=True),
        "how each model turn is sampled; max_tokens is per turn, n is trajectories per task",
    )
    system_prompt: str = option(TIR_SYSTEM_PROMPT, "the system message (json style adds the tools' schemas)")
    tool_workers: PosInt = option(8, "tool calls run at once")
    style: Literal["tags", "json"] = option("tags", "how the model calls tools: tags (<python>…) or json (hermes)")
    tool_turns: Literal["inline", "chat"] = option(
        "inline", "where json-style results go: inline in the model's turn, or chat tool messages (style json)"
    )
    examples: list[dict[str, str]] = option(
        [], "few-shot chat messages between the system prompt and the question (see TIR_EXAMPLES)"
    )

    def with_sampling(self, **changes: Any) -> AgentConfig:
        """This config with some sampling settings changed (``cfg.with_sampling(n=1, seed=3)``)."""
        return replace(self, sampling=replace(self.sampling, **changes))

    def problems(self) -> list[str]:
        """Rules across fields (``agentkit.config.cross_checks``)."""
        if self.tool_turns == "chat" and self.style != "json":
            return ["tool_turns: chat needs style: json (tag-style results stay in the model's turn)"]
        return []


def _task_fields(task: Any, i: int) -> tuple[str, str]:
    if isinstance(task, str):
        return f"task-{i}", task
    if isinstance(task, dict):
        return str(task.get("id", f"task-{i}")), task["question"]
    return task.id, task.question


def rollout(
    engine,
    tasks: list[Any],
    tools: dict[str, Tool] | list[Tool],
    config: AgentConfig | None = None,
    on_event: Callable[[dict[str, Any]], None] | None = None,
) -> list[Trajectory]:
    """Run the agent on ``tasks``: ``config.sampling.n`` trajectories each, every turn of every trajectory batched.

    Args:
        engine: any Engine (``agentkit.engines``).
        tasks: Task objects, ``{"id", "question"}`` dicts or question strings.
        tools: the tools the agent may call, by name or as a list.
        config: the loop's settings (default: ``AgentConfig()``).
        on_event: told of progress as it happens: ``{"type": "turn", "task_id", "sample", "turn", "text"}`` after
            each model turn and ``{"type": "tool", "task_id", "sample", "tool", "arguments", "ok", "output"}``
            after each tool call.

    Returns:
        The trajectories, task by task, ``config.sampling.n`` for each.
    """
    cfg = config or AgentConfig()
    tools = tools if isinstance(tools, dict) else {t.name: t for t in tools}
    trajs = []
    for i, task in enumerate(tasks):
        task_id, question = _task_fields(task, i)
        prompt = agent_prompt(question, tools, cfg)
        ids = engine.encode(prompt)
        trajs += [
            Trajectory(task_id, prompt, ids, meta={"sample": j}) for j in range(cfg.sampling.n)
        ]  # turns, timings: continue_rollout
    return continue_rollout(engine, trajs, tools, cfg, on_event)


def agent_prompt(question: str, tools: dict[str, Tool] | list[Tool], config: AgentConfig) -> list[dict[str, Any]]:
    """The chat a rollout starts from.

    Args:
        question: the task's question.
        tools: the agent's tools (json style describes their schemas).
        config: the loop's settings: ``style``, ``system_prompt``, ``examples``.

    Returns:
        The system prompt (tag style: ``config.system_prompt``; json style: the tools' schemas), the few-shot
        examples, then the question, as chat messages.
    """
    tools = tools if isinstance(tools, dict) else {t.name: t for t in tools}
    system = (
        config.system_prompt
        if config.style == "tags"
        else hermes_tools_prompt([openai_schema(t)["function"] for t in tools.values()])
    )
    return [{"role": "system", "content": system}, *config.examples, {"role": "user", "content": question}]


def continue_rollout(
    engine,
    trajectories: list[Trajectory],
    tools: dict[str, Tool] | list[Tool],
    config: AgentConfig | None = None,
    on_event: Callable[[dict[str, Any]], None] | None = None,
) -> list[Trajectory]:
    """Run the loop on trajectories already under way (``finish == "running"``), e.g. branches cut from finished
    chains. Each trajectory's tool sessions are its own (a random id) and are closed when this returns, by an
    error too.

    Args:
        engine: any Engine.
        trajectories: the trajectories to continue; turns and tool calls already in one count against
            ``max_turns`` / ``max_tool_calls``. With ``meta["open_turn"]`` set, the last model segment is an
            unfinished turn: the next generation continues it and is merged into it before the turn is parsed.
        tools: the tools the agent may call, by name or as a list.
        config: the loop's settings (default: ``AgentConfig()``).
        on_event: progress events, as for ``rollout``.

    Returns:
        The same trajectories, finished (``finish``: answer, max_turns, max_tool_calls, wall_time…).

    Raises:
        ValueError: an unknown ``style`` or ``tool_turns``, or chat tool turns with an engine without tokenizer.
    """
    cfg = config or AgentConfig()
    tools = tools if isinstance(tools, dict) else {t.name: t for t in tools}
    trajs = trajectories
    for t in trajs:
        for key, default in (("sample", 0), ("turns", 0), ("seconds_generate", 0.0), ("seconds_tools", 0.0)):
            t.meta.setdefault(key, default)
    start = time.perf_counter()
    if cfg.style not in ("tags", "json"):
        raise ValueError(f"unknown tool-call style {cfg.style!r} (tags or json)")
    if cfg.tool_turns not in ("inline", "chat") or (cfg.tool_turns == "chat" and cfg.style != "json"):
        raise ValueError(f"tool_turns={cfg.tool_turns!r}: inline, or chat with style='json'")
    if cfg.tool_turns == "chat" and getattr(engine, "tokenizer", None) is None:
        raise ValueError("tool_turns='chat' renders tool messages with the chat template: the engine has no tokenizer")
    # chat: a turn runs to its end-of-turn token, which the model writes after its calls as the template has it
    stops = (
        tag_stop_strings(tuple(tools)) if cfg.style == "tags" else [] if cfg.tool_turns == "chat" else ["</tool_call>"]
    )
    sessions = _Sessions(trajs)
    try:
        with ThreadPoolExecutor(max_workers=cfg.tool_workers) as pool:
            for turn in range(cfg.max_turns):
                active = [t for t in trajs if t.finish == "running" and t.meta["turns"] < cfg.max_turns]
                if not active:
                    break
                if time.perf_counter() - start > cfg.max_wall_s:
                    for t in active:
                        t.finish = "wall_time"
                    break
                _turn(engine, active, tools, cfg, turn, stops, pool, on_event or (lambda _e: None), sessions)
    finally:
        sessions.close(tools)
    for t in trajs:
        if t.finish == "running":
            t.finish = "max_turns"
    return trajs


class _Sessions:
    """The tool sessions of one ``continue_rollout`` call: one per trajectory, named by a random id (never by
    anything a caller or a reused object id could repeat, so no two requests of a server can meet in one), and
    closed when the call returns, however it returns (``close_session(id)`` of each tool that was called)."""

    def __init__(self, trajs: list[Trajectory]):
        self.ids = {id(t): "s-" + secrets.token_hex(16) for t in trajs}
        self.opened: set[tuple[str, str]] = set()  # (tool name, session id) that were called

    def of(self, traj: Trajectory, tool: str) -> str:
        sid = self.ids[id(traj)]
        self.opened.add((tool, sid))
        return sid

    def close(self, tools: dict[str, Tool]) -> None:
        for name, sid in sorted(self.opened):
            close = getattr(tools.get(name), "close_session", None)
            if close is None:
                continue
            try:
                close(sid)
            except Exception:  # noqa: BLE001 - a tool that cannot close is no reason to lose the rollout
                pass


def _turn(
    engine, active: list[Trajectory], tools, cfg: AgentConfig, turn: int, stops, pool, emit, sessions: _Sessions
) -> None:
    budget = [cfg.max_total_tokens - len(t.completion_ids) for t in active]
    # Each trajectory draws with its own seed (the n samples of a question are separate prompts, which a single
    # seed would make identical): (config seed, turn, sample index).
    s = cfg.sampling
    seeds = None if s.seed is None else [s.seed + 7919 * turn + 104_729 * t.meta["sample"] for t in active]
    params = replace(
        s,
        n=1,
        max_tokens=max(1, min(s.max_tokens, max(budget))),
        stop=[*s.stop, *stops],
        include_stop_str_in_output=True,
        seed=None,
        seeds=seeds,
    )
    t0 = time.perf_counter()
    outs = engine.generate([_sequence(t) for t in active], params)
    gen_s = time.perf_counter() - t0
    calls: list[tuple[Trajectory, ToolCall]] = []
    for t, (c,), left in zip(active, outs, budget):
        t.meta["turns"] += 1
        t.meta["seconds_generate"] += gen_s / len(active)
        opened = t.meta.pop("open_turn", False)
        head = t.segments.pop() if opened and t.segments and t.segments[-1].kind == "model" else None
        if len(c.token_ids) > left:  # one engine call serves all rows; hold each row to its own token budget
            ids = list(c.token_ids[:left])
            seg = Segment(
                "model", engine.decode(ids), ids, list(c.logprobs[:left]), c.entropies[:left] if c.entropies else None
            )
            t.segments.append(_merge(head, seg) if head else seg)
            t.finish = "max_tokens"
            continue
        seg = Segment("model", c.text, list(c.token_ids), list(c.logprobs), c.entropies)
        seg = _merge(head, seg) if head else seg
        t.segments.append(seg)
        emit({"type": "turn", "task_id": t.task_id, "sample": t.meta["sample"], "turn": turn, "text": seg.text})
        answer, found = _parse_turn(seg.text, c.stop_reason, tools, cfg.style)
        if answer is not None:
            t.answer, t.finish = answer, "answer"
        elif found:
            if t.tool_calls + len(found) > cfg.max_tool_calls or _over_tool_budget(t, found, cfg):
                t.finish = "max_tool_calls"
            else:
                calls += [(t, call) for call in found]
        elif c.finish_reason == "stop":
            t.finish = "no_call" if cfg.style == "tags" else "answer"  # json style: a reply without a call ends it
            if cfg.style == "json":
                t.answer = c.text.strip()
        if t.finish == "running" and len(t.completion_ids) >= cfg.max_total_tokens:
            t.finish = "max_tokens"
    results = list(pool.map(lambda tc: _call_tool(tools, sessions.of(tc[0], tc[1].name), tc[1]), calls))
    texts = result_texts(getattr(engine, "tokenizer", None), calls, [res for res, _ in results], cfg)
    for (t, call), (res, secs), text in zip(calls, results, texts):
        ids = engine.tokenize(text)
        t.segments.append(Segment("tool", text, ids, tool=call.name, arguments=call.arguments, ok=res.ok, seconds=secs))
        t.meta["seconds_tools"] += secs
        emit(
            {
                "type": "tool",
                "task_id": t.task_id,
                "sample": t.meta["sample"],
                "tool": call.name,
                "arguments": call.arguments,
                "ok": res.ok,
                "output": res.output,
            }
        )
        if len(t.completion_ids) >= cfg.max_total_tokens:
            t.finish = "max_tokens"


def _sequence(t: Trajectory) -> list[int] | ImagePrompt:
    """What the engine continues: the trajectory's ids, with its prompt's images when it has any."""
    ids = t.prompt_ids + t.completion_ids
    return ImagePrompt(ids, chat_images(t.prompt)) if image_parts(t.prompt) else ids


def result_texts(tokenizer, calls: list[tuple[Trajectory, ToolCall]], results: list[ToolResult], cfg) -> list[str]:
    """The text fed back for each call (its trajectory's last segment is the model turn that made it). Inline:
    each result in its tags, inside the model's turn. Chat: a turn's results together as the chat template's
    tool messages and the next assistant turn's opening (``tool_turn_suffix``; without the end-of-turn token
    when the model wrote it), cut into one piece per call at the start of each later result, so that the pieces
    join to exactly the template's text."""
    if cfg.style == "tags":
        return [format_tag_result(r.output) for r in results]
    if cfg.tool_turns == "inline":
        return [format_hermes_result(r.output) for r in results]
    texts = [""] * len(calls)
    by_traj: dict[int, list[int]] = {}
    for i, (t, _) in enumerate(calls):
        by_traj.setdefault(id(t), []).append(i)
    for idx in by_traj.values():
        outs = [results[i].output for i in idx]
        suffix = tool_turn_suffix(tokenizer, [(calls[i][1].name, o) for i, o in zip(idx, outs)])
        last = calls[idx[0]][0].segments[-1].token_ids[-1:]
        end = tokenizer.decode(last) if last and last[0] in tokenizer.all_special_ids else ""
        suffix = suffix[len(end) :] if end and suffix.startswith(end) else suffix
        for i, piece in zip(idx, _split_at(suffix, [o.strip() for o in outs])):
            texts[i] = piece
    return texts


def _split_at(text: str, parts: list[str]) -> list[str]:
    """``text`` cut into ``len(parts)`` pieces, each later piece starting where its part is next found (or, not
    found, where the part before it ended)."""
    cuts, pos = [0], 0
    for part in parts:
        at = text.find(part, pos)
        at = pos if at < 0 else at
        cuts.append(at)
        pos = at + len(part)
    cuts = cuts[:1] + cuts[2:]  # the first piece starts at 0, not at its part
    return [text[a:b] for a, b in zip(cuts, cuts[1:] + [len(text)])]


def _over_tool_budget(t: Trajectory, found: list[ToolCall], cfg: AgentConfig) -> bool:
    for name, limit in cfg.max_calls_per_tool.items():
        used = sum(s.kind == "tool" and s.tool == name for s in t.segments)
        if used + sum(c.name == name for c in found) > limit:
            return True
    return False


def _merge(head: Segment, tail: Segment) -> Segment:
    """An unfinished model turn and its continuation as one segment."""
    ents = (head.entropies or []) + (tail.entropies or []) if head.entropies or tail.entropies else None
    return Segment(
        "model",
        head.text + tail.text,
        head.token_ids + tail.token_ids,
        (head.logprobs or []) + (tail.logprobs or []),
        ents,
    )


def _parse_turn(text: str, stop_reason, tools, style: str) -> tuple[str | None, list[ToolCall]]:
    """(final answer or None, tool calls) of one model turn."""
    if style == "tags":
        if "</answer>" in text or stop_reason == "</answer>":
            return parse_answer(text), []
        call = parse_tag_call(text, tuple(tools))
        return None, [call] if call is not None else []
    _, found = parse_hermes_calls(text, known=set(tools))
    return None, found


def _call_tool(tools: dict[str, Tool], session: str, call: ToolCall) -> tuple[ToolResult, float]:
    t0 = time.perf_counter()
    if call.error:
        return ToolResult(f"Error: {call.error}", ok=False), 0.0
    tool = tools.get(call.name)
    if tool is None:
        return ToolResult(f"Error: unknown tool {call.name!r}", ok=False), 0.0
    kwargs = dict(call.arguments)
    if "session_id" in inspect.signature(tool.__call__).parameters:  # one Python namespace per trajectory
        kwargs["session_id"] = session
    try:
        res = tool(**kwargs)
    except Exception as e:  # a tool bug must not end the rollout; the model sees the error
        res = ToolResult(f"Error: the tool failed: {type(e).__name__}: {e}", ok=False)
    return res, time.perf_counter() - t0
