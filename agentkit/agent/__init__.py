"""The tool-integrated agent loop and its Trajectory records."""

from agentkit.agent.loop import TIR_SYSTEM_PROMPT, AgentConfig, agent_prompt, continue_rollout, rollout
from agentkit.agent.trajectory import Segment, Trajectory, from_dataset, load_jsonl, save_jsonl, to_dataset

__all__ = [
    "TIR_SYSTEM_PROMPT",
    "AgentConfig",
    "agent_prompt",
    "Segment",
    "Trajectory",
    "continue_rollout",
    "from_dataset",
    "load_jsonl",
    "rollout",
    "save_jsonl",
    "to_dataset",
]
