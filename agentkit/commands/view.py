"""``agentkit view RUN_DIR``: a run's trajectories in the browser (``agentkit.viewer``)."""

from __future__ import annotations

import argparse

from agentkit.command import Command, add_server_options, server_key


class ViewCommand(Command):
    name = "view"
    help = "a web page of a run's trajectories (turns, tool calls, rewards, entropies)"
    description = (
        "Serve a local web page of the trajectories a run recorded (the RL trainers' rollouts.p<N>.jsonl, saved "
        "trajectory files and datasets): turns, tool calls and results, per-turn rewards and advantages, token "
        "entropies as a heat strip, filters by correctness, tool calls and step. Binds to 127.0.0.1 unless --host "
        "says otherwise."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("run_dir", help="the run directory (outputs/<recipe>/<time>)")
        add_server_options(parser, port=8300)

    def run(self, args: argparse.Namespace) -> int:
        import uvicorn

        from agentkit.viewer import create_app, find_sources

        key = server_key(args)
        app = create_app(args.run_dir, api_key=key)  # a missing directory fails here, in one line
        n = len(find_sources(args.run_dir))
        print(f"viewing {n} trajectory source(s) of {args.run_dir} on http://{args.host}:{args.port}/", flush=True)
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
        return 0
