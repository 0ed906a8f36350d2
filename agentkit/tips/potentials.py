"""Information potentials of an agent's states: how likely a teacher finds the gold answer after each turn.

TIPS (arXiv 2603.22293), for a trajectory with model turns k = 1..T, scores the states the model acted from:
s_0 = the prompt alone and s_k = everything up to the end of turn k's tool results (k < T). With gold answers
A^(1..M), each wrapped as the policy's answer (``answer_template``, ``<answer>{answer}</answer>``) right after
the state,

    Φ(s) = log Σ_m p_T(A^(m) | s)                                  (normalize="sum", the paper)
    Φ(s) = logsumexp_m (1/|A^(m)|) Σ_j log p_T(A^(m)_j | s, A^(m)_<j)   (normalize="mean", the official code)

where the answer's tokens include its tags. All (state, answer) pairs of a batch go through one
``Engine.score`` call; the states of a trajectory are prefixes of one another, so ``HFEngine`` encodes each
trajectory once and scores every answer as a branch of it (``agentkit.engines.packed``), where the official
code sends one request per (state, answer).

Teacher and policy tokenizers: when the teacher tokenizes the prompt like the policy, a state is the exact ids
the policy saw. Otherwise (a teacher of another family) each state is rebuilt in the teacher's tokens, segment
by segment: the teacher's encoding of the prompt messages, then each segment's text tokenized on its own.
A state that does not fit the teacher's context next to an answer keeps its most recent tokens; an answer that
does not fit alone is an error.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from agentkit.agent.trajectory import Trajectory
from agentkit.data.tasks import gold_answers
from agentkit.errors import AgentkitError

Normalize = Literal["mean", "sum"]
ANSWER_TEMPLATE = "<answer>{answer}</answer>"


def state_ends(traj: Trajectory) -> list[int]:
    """Segment counts of the states s_0..s_{T-1}: 0 (the prompt alone), then after each model turn's tool
    results, for every turn that has a next one (T = number of model segments; at least one state).

    A trajectory without tool calls has one state (the prompt); one cut after a tool call (out of turns) is not
    scored after that call: the model never acted on it.
    """
    ends = [0]
    model_seen = 0
    for i, seg in enumerate(traj.segments):
        if seg.kind == "model":
            model_seen += 1
            if model_seen > 1:
                ends.append(i)
    return ends


def logsumexp(values: Sequence[float]) -> float:
    """log Σ exp(v), computed stably; -inf when every value is -inf.

    >>> round(logsumexp([math.log(0.25), math.log(0.5)]), 6) == round(math.log(0.75), 6)
    True
    """
    top = max(values)
    if top == -math.inf:
        return -math.inf
    return top + math.log(sum(math.exp(v - top) for v in values))


class PotentialScorer:
    """Φ of every state of a batch of trajectories under a teacher, in one ``score`` call.

    Args:
        teacher: any Engine (a lagged copy of the policy, or a fixed model).
        normalize: ``mean`` (Φ: the answer's mean token log-likelihood) or ``sum``.
        answer_template: the text scored after each state, with an ``{answer}`` field.
        policy_tokens: the policy engine (or anything with ``encode``/``tokenize``) whose ids the trajectories
            hold; the teacher reuses them as they are when it tokenizes the same way (checked once), else
            re-tokenizes.

    Raises:
        ValueError: an unknown ``normalize``, or a template without ``{answer}``.
    """

    def __init__(
        self,
        teacher,
        normalize: Normalize = "mean",
        answer_template: str = ANSWER_TEMPLATE,
        policy_tokens=None,
    ):
        if normalize not in ("mean", "sum"):
            raise ValueError(f"normalize must be mean or sum, got {normalize!r}")
        if "{answer}" not in answer_template:
            raise ValueError("answer_template needs an {answer} field")
        self.teacher = teacher
        self.normalize = normalize
        self.template = answer_template
        self.policy_tokens = policy_tokens
        self._same_tokens: bool | None = None

    def same_tokens(self, traj: Trajectory) -> bool:
        """Whether the teacher's ids for this trajectory's prompt (and a probe text) equal the policy's."""
        if self._same_tokens is None:
            probe = "Größe 3.14 <answer>Zentrix</answer>\n<result>\n[1] x\n</result>"
            same = self.teacher.encode(traj.prompt) == traj.prompt_ids
            if same and self.policy_tokens is not None:
                same = self.teacher.tokenize(probe) == self.policy_tokens.tokenize(probe)
            self._same_tokens = same
        return self._same_tokens

    def _states(self, traj: Trajectory) -> list[list[int]]:
        ends = state_ends(traj)
        if self.same_tokens(traj):
            segs = [traj.prompt_ids]
            segs += [s.token_ids for s in traj.segments]
        else:
            segs = [self.teacher.encode(traj.prompt)] + [self.teacher.tokenize(s.text) for s in traj.segments]
        out, ids, done = [], list(segs[0]), 0
        for end in ends:
            while done < end:
                ids += segs[1 + done]
                done += 1
            out.append(list(ids))
        return out

    def potentials(self, trajectories: Sequence[Trajectory], answers: Sequence[Sequence[str]]) -> list[list[float]]:
        """Each trajectory's potentials.

        Args:
            trajectories: the trajectories.
            answers: ``answers[i]``: trajectory i's gold answers (Φ takes the most likely of them).

        Returns:
            ``[Φ(s_0), …, Φ(s_{T-1})]`` for each trajectory.
        """
        contexts, conts, where = self.queries(trajectories, answers)
        scored = self.teacher.score(contexts, conts) if contexts else []
        return self.reduce(where, scored, len(trajectories))

    def queries(
        self, trajectories: Sequence[Trajectory], answers: Sequence[Sequence[str]]
    ) -> tuple[list[list[int]], list[list[int]], list[tuple[int, int]]]:
        """Every (state, gold answer) to score: contexts, answer ids, and (trajectory, state) of each."""
        if len(trajectories) != len(answers):
            raise ValueError(f"{len(trajectories)} trajectories but {len(answers)} answer lists")
        limit = self.teacher.max_model_len
        contexts, conts, where = [], [], []
        for i, (traj, golds) in enumerate(zip(trajectories, answers)):
            golds = gold_answers(traj.task_id, golds)
            wrapped = [self.teacher.tokenize(self.template.format(answer=a)) for a in golds]
            for a, ids in zip(golds, wrapped):
                if len(ids) >= limit:
                    raise AgentkitError(
                        f"task {traj.task_id!r}: the gold answer {a[:40]!r}… has {len(ids)} tokens, more than the "
                        f"teacher's context ({limit})",
                        "shorten the answer or use a teacher with a longer context",
                    )
            for k, state in enumerate(self._states(traj)):
                for ids in wrapped:
                    keep = limit - len(ids)
                    contexts.append(state[-keep:] if len(state) > keep else state)
                    conts.append(ids)
                    where.append((i, k))
        return contexts, conts, where

    def reduce(self, where: Sequence[tuple[int, int]], scored: Sequence, n: int) -> list[list[float]]:
        """The potentials of ``n`` trajectories from the scored ``queries``: log-sum-exp over each state's
        answers of their (mean or summed) log-probability."""
        per: dict[tuple[int, int], list[float]] = {}
        for key, s in zip(where, scored):
            total = sum(s.logprobs)
            per.setdefault(key, []).append(total / max(1, len(s.logprobs)) if self.normalize == "mean" else total)
        out: list[list[float]] = [[] for _ in range(n)]
        for (i, _k), values in per.items():  # dict order: states in order within each trajectory
            out[i].append(logsumexp(values))
        return out
