"""New weights from a trainer to vLLM servers through vLLM's weight-transfer API, with no file in between.

vLLM (≥ 0.18) serves the protocol when started with ``--weight-transfer-config '{"backend": B}'``
(``agentkit vllm-serve --weight-transfer B``); its routes are ``vllm/entrypoints/rl/online/api_router.py``:

.. code-block:: text

    once per server   POST /init_weight_transfer_engine {init_info}   ‖  the trainer joins the group as rank 0
    each sync         POST /start_weight_update
                      POST /update_weights {update_info: {names, dtype_names, shapes}}
                                                  ‖  the trainer broadcasts each tensor from rank 0, in that order
                      POST /finish_weight_update {weight_version}

The server's workers join a process group of their own with the trainer (rank 0; a server of W workers: world
size 1 + W, ``GET /get_world_size``), separate from any group the trainer trains in, and load what they receive
with vLLM's layerwise reload. Backends:

- ``nccl``: vLLM's own, GPU to GPU (``NCCLTrainerWeightTransferEngine`` on the trainer).
- ``gloo``: agentkit's, the same lifecycle and wire over torch's gloo (TCP), registered in vLLM by the
  ``vllm.general_plugins`` entry point ``agentkit_weight_transfer`` (``register``), so the protocol runs where
  there is no GPU: this machine's tests, CPU rollout servers.

Bytes moved per sync: every parameter once per server, in the trainer's dtype (vLLM's ``ModuleSource``; the
server casts to its own). ``OpenAIEngine(weight_transfer=…)`` drives it; this module
needs vLLM on the trainer's side too (imported when used).
"""

from __future__ import annotations

import datetime
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

import torch
import torch.distributed as dist
from vllm.distributed.weight_transfer.base import (
    ModuleSource,
    TrainerInitInfo,
    TrainerWeightTransferEngine,
    WeightTransferEngine,
    WeightTransferInitInfo,
    WeightTransferUpdateInfo,
)

BACKENDS = ("gloo", "nccl")
TIMEOUT = datetime.timedelta(minutes=10)  # the group's collectives: a sync of a 7B model over TCP takes minutes


# ---- gloo: the worker side (in vLLM's server process) -------------------------------------------------------
@dataclass
class GlooInitInfo(WeightTransferInitInfo):
    """What a server's workers need to join the trainer's group: its store, their first rank, the group's size."""

    master_address: str
    master_port: int
    rank_offset: int
    world_size: int


@dataclass
class GlooUpdateInfo(WeightTransferUpdateInfo):
    """One sync's parameters, in the order the trainer broadcasts them."""

    names: list[str]
    dtype_names: list[str]
    shapes: list[list[int]]

    def __post_init__(self):
        if not len(self.names) == len(self.dtype_names) == len(self.shapes):
            raise ValueError("names, dtype_names and shapes must be as long as each other")


def _join(address: str, port: int, rank: int, world_size: int) -> dist.ProcessGroupGloo:
    """A gloo group of its own (rank 0, the trainer, hosts the store), apart from ``torch.distributed``'s default."""
    store = dist.TCPStore(address, port, world_size, is_master=rank == 0, timeout=TIMEOUT)
    return dist.ProcessGroupGloo(dist.PrefixStore("agentkit-weights", store), rank, world_size, TIMEOUT)


def _broadcast(group: dist.ProcessGroupGloo, tensor: torch.Tensor) -> None:
    opts = dist.BroadcastOptions()
    opts.rootRank = 0
    group.broadcast([tensor], opts).wait()


class GlooWeightTransferEngine(WeightTransferEngine[GlooInitInfo, GlooUpdateInfo]):
    """vLLM's worker-side engine for ``backend: gloo``: receives each tensor by a gloo broadcast from the trainer and
    loads it through the model's ``load_weights`` inside vLLM's layerwise reload (as its NCCL engine does)."""

    init_info_cls = GlooInitInfo
    update_info_cls = GlooUpdateInfo
    supports_draft_weight_update = False

    def __init__(self, config, vllm_config, device, model) -> None:
        super().__init__(config, vllm_config, device, model)
        self.group: dist.ProcessGroupGloo | None = None

    def init_transfer_engine(self, init_info: GlooInitInfo) -> None:
        p = self.parallel_config
        rank = p.data_parallel_index * p.world_size + p.rank + init_info.rank_offset
        self.group = _join(init_info.master_address, init_info.master_port, rank, init_info.world_size)

    def start_weight_update(self) -> None:
        from vllm.model_executor.model_loader.reload import initialize_layerwise_reload

        initialize_layerwise_reload(self.model)

    def finish_weight_update(self) -> None:
        from vllm.model_executor.model_loader.reload import finalize_layerwise_reload

        finalize_layerwise_reload(self.model, self.model_config)

    def update_weights(self, update_info: dict[str, Any]) -> None:
        self.receive_weights(self.parse_update_info(update_info))
        if torch.accelerator.is_available():
            torch.accelerator.synchronize()

    def receive_weights(self, update_info: GlooUpdateInfo) -> None:
        if self.group is None:
            raise RuntimeError("gloo weight transfer is not initialised: POST /init_weight_transfer_engine first")
        for name, dtype_name, shape in zip(update_info.names, update_info.dtype_names, update_info.shapes):
            tensor = torch.empty(shape, dtype=getattr(torch, dtype_name))
            _broadcast(self.group, tensor)
            self.model.load_weights([(name, tensor.to(self.device))])

    def shutdown(self) -> None:
        self.group = None


# ---- gloo: the trainer side --------------------------------------------------------------------------------
@dataclass
class GlooTrainerInitInfo(TrainerInitInfo):
    """The trainer's end of a gloo transfer group: where it hosts the store, and the group's size."""

    backend: ClassVar[str] = "gloo"

    master_address: str
    master_port: int
    world_size: int


class GlooTrainerWeightTransferEngine(TrainerWeightTransferEngine[GlooTrainerInitInfo]):
    """The trainer's side of ``backend: gloo``, the lifecycle of vLLM's ``NCCLTrainerWeightTransferEngine`` (one
    sender, rank 0; the workers' ``update_weights`` runs beside the broadcast, both inside the same collectives)."""

    init_info_cls = GlooTrainerInitInfo

    def __init__(self, *, client, source=None, is_sender: bool = True) -> None:
        super().__init__(client=client, source=source, is_sender=is_sender)
        self.group: dist.ProcessGroupGloo | None = None

    @classmethod
    def trainer_init(cls, init_info: GlooTrainerInitInfo, *, client, source=None):
        engine = cls(client=client, source=source, is_sender=init_info.is_sender)
        if not engine.is_sender:
            return engine
        worker = GlooInitInfo(init_info.master_address, init_info.master_port, 1, init_info.world_size)
        # the workers wait inside the call for the rendezvous, which this end hosts; a server that refuses the call
        # (no weight transfer configured) never comes, so its answer is not waited for behind the rendezvous
        groups: list[dist.ProcessGroupGloo] = []
        rendezvous = threading.Thread(
            target=lambda: groups.append(
                _join(init_info.master_address, init_info.master_port, 0, init_info.world_size)
            ),
            daemon=True,
        )
        rendezvous.start()
        client.init_weight_transfer_engine(asdict(worker))
        rendezvous.join(TIMEOUT.total_seconds())
        if not groups:
            raise RuntimeError("the server's workers accepted the weight transfer but never joined its group")
        engine.group = groups[0]
        return engine

    def send_weights(self) -> None:
        meta = self.source.metadata()
        if not self.is_sender:
            for _ in self.source:
                pass
            return
        info = GlooUpdateInfo(
            [m.name for m in meta], [str(m.dtype).removeprefix("torch.") for m in meta], [list(m.shape) for m in meta]
        )
        self.client.start_weight_update()
        pool = ThreadPoolExecutor(max_workers=1)
        try:
            received = pool.submit(self.client.update_weights, asdict(info))
            for (name, tensor), m in zip(self.source, meta, strict=True):
                if name != m.name or tensor.dtype != m.dtype or tuple(tensor.shape) != m.shape:
                    raise ValueError(f"the weights changed while they were sent: {name!r} is not {m}")
                _broadcast(self.group, tensor.detach().to("cpu").contiguous())
            received.result()
        finally:
            pool.shutdown(wait=False)  # after a failed broadcast the workers still wait in theirs: never join them
        self.client.finish_weight_update()

    def shutdown(self) -> None:
        self.group = None


def register() -> None:
    """The ``vllm.general_plugins`` entry point: registers ``gloo`` in vLLM's worker and trainer engine factories
    (vLLM loads it in each of its processes, maybe more than once)."""
    from vllm.distributed.weight_transfer.factory import WeightTransferEngineFactory, WeightTransferTrainerFactory

    if "gloo" not in WeightTransferEngineFactory._registry:
        WeightTransferEngineFactory.register_engine("gloo", GlooWeightTransferEngine)
    if "gloo" not in WeightTransferTrainerFactory._registry:
        WeightTransferTrainerFactory.register_engine("gloo", GlooTrainerWeightTransferEngine)


# ---- what OpenAIEngine uses --------------------------------------------------------------------------------
class Client:
    """vLLM's ``VLLMWeightSyncClient`` protocol over ``post(path, body)`` (the engine's authenticated control
    requests)."""

    def __init__(self, post: Callable[..., Any]) -> None:
        self.post = post

    def init_weight_transfer_engine(self, init_info: dict[str, Any]) -> None:
        self.post("/init_weight_transfer_engine", init_info=init_info)

    def start_weight_update(self) -> None:
        self.post("/start_weight_update")

    def update_weights(self, update_info: Any) -> None:
        self.post("/update_weights", update_info=update_info)

    def finish_weight_update(self, weight_version: str | None = None) -> None:
        self.post("/finish_weight_update", **({"weight_version": weight_version} if weight_version else {}))

    def shutdown_weight_transfer_engine(self) -> None:
        self.post("/shutdown_weight_transfer_engine")


def connect(backend: str, post: Callable[..., Any], world_size: int, address: str, port: int, model):
    """A ready trainer engine for one server: ``backend``'s rendezvous (the trainer hosts it at ``address:port``,
    which the server's workers must reach) with the server's ``world_size - 1`` workers, ``model`` its source."""
    from vllm.distributed.weight_transfer.factory import WeightTransferTrainerFactory

    register()
    if backend == "nccl":
        from vllm.distributed.weight_transfer.nccl_engine import NCCLTrainerInitInfo

        info: TrainerInitInfo = NCCLTrainerInitInfo(address, port, world_size, rank=0)
    elif backend == "gloo":
        info = GlooTrainerInitInfo(address, port, world_size, rank=0)
    else:
        raise ValueError(f"weight transfer backend {backend!r}: one of {', '.join(BACKENDS)}")
    return WeightTransferTrainerFactory.trainer_init(info, client=Client(post), source=ModuleSource(model))


def send(engine: TrainerWeightTransferEngine, model) -> None:
    """One sync of ``model``'s named parameters over ``engine`` (``connect``'s)."""
    engine.source = ModuleSource(model)
    engine.send_weights()
