"""Low-precision weights for small decode steps on a CPU: the same model, its linear layers read in bfloat16 when a
forward pass has only a few rows.

A decode step at batch 1 reads every weight once for one token: on a CPU it is bound by memory bandwidth, not by
arithmetic (SmolLM2-135M in fp32 streams 538 MB per token). Reading the decoder's linear weights as bfloat16 halves
those bytes. The arithmetic is oneDNN's bf16 matmul, which accumulates in fp32 and rounds each output to bf16; the
output is widened back to fp32 before the bias, the residual stream and the norms, which stay fp32. The output
head stays fp32 (its logits are what sampling, logprobs and entropies read, and bf16 outputs would round a logit
of 20 by up to 0.06). On a CPU without AVX-512 BF16 the bf16 matmul is emulated, so it only pays while a pass is
narrow: ``max_rows`` rows (tokens × sequences) or fewer; wider passes (prefill, large batches) read the fp32
weights as before.

Measured on SmolLM2-135M (2-core AMD EPYC with AVX2 only, ``agentkit bench engine``): batch 1 decodes ~1.3×
faster; per-token logprobs and entropies stay within 0.1 nats of fp32 (up to ~0.05 measured), so greedy outputs
can part where two tokens are nearly tied (tested: ``tests/unit/agentkit/engines/test_lowp.py``).

The switch is off except inside ``active()``: HFEngine turns it on around its own forward passes, so a model
shared with a trainer or ``model.generate`` keeps its fp32 behaviour, and a pass that records gradients never takes
the low-precision path.
"""

from __future__ import annotations

import contextlib
import threading
import types

import torch
import torch.nn.functional as F

DTYPES = {"bfloat16": torch.bfloat16}
_STATE = threading.local()


@contextlib.contextmanager
def active(max_rows: int):
    """Inside it, patched linears read their low-precision copy for passes of at most ``max_rows`` rows."""
    before = getattr(_STATE, "max_rows", 0)
    _STATE.max_rows = max_rows
    try:
        yield
    finally:
        _STATE.max_rows = before


def _forward(self: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    rows = getattr(_STATE, "max_rows", 0)
    if not rows or x.shape[:-1].numel() > rows or torch.is_grad_enabled():
        return F.linear(x, self.weight, self.bias)
    w = self.weight
    key = (w.data_ptr(), w._version, w.dtype)
    if self._lowp_key != key:  # weights loaded or changed in place since the copy was made
        self._lowp_weight = w.detach().to(self._lowp_dtype)
        self._lowp_key = key
    y = F.linear(x.to(self._lowp_dtype), self._lowp_weight).to(x.dtype)
    return y if self.bias is None else y + self.bias


def patch(model: torch.nn.Module, dtype: str = "bfloat16") -> int:
    """Give every linear layer of ``model`` but its output head a low-precision path (idempotent); the copies
    are made on first use. Returns how many layers have it.

    >>> import torch
    >>> m = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 2))
    >>> patch(m), patch(m)  # no output head found on a Sequential: both linears
    (2, 2)
    >>> x = torch.randn(1, 4)
    >>> with torch.no_grad(), active(max_rows=1):
    ...     low = m(x)
    >>> with torch.no_grad():
    ...     full = m(x)
    >>> bool((low - full).abs().max() < 0.05), bool(torch.equal(m(x), full))
    (True, True)
    """
    if dtype not in DTYPES:
        raise ValueError(f"unknown decode dtype {dtype!r} (one of float32, {', '.join(DTYPES)})")
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    n = 0
    for mod in model.modules():
        if isinstance(mod, torch.nn.Linear) and mod is not head and mod.weight.dtype == torch.float32:
            if getattr(mod, "_lowp_dtype", None) is None:
                mod._lowp_dtype, mod._lowp_key, mod._lowp_weight = DTYPES[dtype], None, None
                mod.forward = types.MethodType(_forward, mod)
            n += 1
    return n
