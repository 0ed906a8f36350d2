"""Revela's in-batch attention through transformers' attention registry: exactness, gradient paths, a hand-built
case, and both model families (Llama, Gemma 3)."""

import math

import pytest
import torch
import torch.nn.functional as F

from agentkit.models.tiny import build_tiny_gemma3, build_tiny_model
from agentkit.revela.attention import InBatch, enable, inbatch_term, inbatch_term_reference, similarity

VOCAB = 40


def _lm(family: str, layers: int = 2, seed: int = 0):
    build = build_tiny_model if family == "llama" else build_tiny_gemma3
    lm = build(VOCAB, layers=layers, seed=seed).eval()
    enable(lm)
    return lm


def _batch(b=4, length=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, VOCAB - 3, (b, length), generator=g)
    mask = torch.ones(b, length, dtype=torch.long)
    mask[1, 9:] = 0  # right padding on two chunks
    mask[3, 5:] = 0
    return ids.masked_fill(mask == 0, VOCAB - 1), mask


def _losses(lm, ids, mask, sim, v_norm=False):
    labels = ids.masked_fill(mask == 0, -100)
    ctx = InBatch("record")
    plain = lm(input_ids=ids, attention_mask=mask, labels=labels, revela=ctx).loss
    ctx.mode, ctx.sim, ctx.key_mask, ctx.v_norm = "attend", sim, mask.bool(), v_norm
    return lm(input_ids=ids, attention_mask=mask, labels=labels, revela=ctx).loss, plain


@pytest.mark.parametrize("family", ["llama", "gemma3"])
def test_zero_similarity_is_exactly_the_plain_lm_loss(family):
    lm = _lm(family)
    ids, mask = _batch()
    inbatch, plain = _losses(lm, ids, mask, torch.zeros(4, 4))
    reference = lm(input_ids=ids, attention_mask=mask, labels=ids.masked_fill(mask == 0, -100)).loss
    assert inbatch.item() == plain.item() == reference.item()
    # and a non-zero Sim does change it, in both families
    changed, _ = _losses(lm, ids, mask, torch.full((4, 4), 1 / 3).fill_diagonal_(0))
    assert abs(changed.item() - plain.item()) > 1e-4


@pytest.mark.parametrize("family", ["llama", "gemma3"])
def test_retriever_gets_gradient_only_through_sim(family):
    lm = _lm(family)
    retriever = torch.nn.Sequential(torch.nn.Embedding(VOCAB, 16), torch.nn.Linear(16, 16))
    ids, mask = _batch()
    emb = retriever(ids).mean(dim=1)  # [B, 16]
    sim = similarity(emb, emb, tau=0.05)
    loss, _ = _losses(lm, ids, mask, sim)
    params = list(retriever.parameters())
    direct = torch.autograd.grad(loss, params, retain_graph=True)
    d_sim = torch.autograd.grad(loss, sim, retain_graph=True)[0]
    via_sim = torch.autograd.grad(sim, params, grad_outputs=d_sim)
    assert all(g.abs().sum() > 0 for g in direct)
    for a, b in zip(direct, via_sim):
        torch.testing.assert_close(a, b)
    # a detached Sim cuts the retriever off entirely
    loss2, _ = _losses(lm, ids, mask, sim.detach())
    loss2.backward()
    assert all(p.grad is None for p in params)
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in lm.parameters())


def test_two_chunks_match_a_manual_computation():
    """One-layer Llama, B = 2 (Sim = [[0, 1], [1, 0]]), chunk 1 padded: the whole forward written out by hand."""
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    lm = _lm("llama", layers=1, seed=3)
    ids = torch.tensor([[5, 9, 2, 7, 1, 8], [3, 3, 6, 4, 0, 0]])
    mask = torch.tensor([[1] * 6, [1, 1, 1, 1, 0, 0]])
    ids = ids.masked_fill(mask == 0, VOCAB - 1)
    sim = torch.tensor([[0.0, 1.0], [1.0, 0.0]])
    got, _ = _losses(lm, ids, mask, sim)

    m, layer = lm.model, lm.model.layers[0]
    att = layer.self_attn
    b, n = ids.shape
    x = m.embed_tokens(ids)
    hx = layer.input_layernorm(x)
    shape = (b, n, -1, att.head_dim)
    q, k, v = (p(hx).view(shape).transpose(1, 2) for p in (att.q_proj, att.k_proj, att.v_proj))
    cos, sin = m.rotary_emb(hx, torch.arange(n)[None].expand(b, -1))
    q, k = apply_rotary_pos_emb(q, k, cos, sin)
    k, v = k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1)  # 2 query heads share 1 key/value head
    scale = 1 / math.sqrt(att.head_dim)
    out = torch.zeros_like(q)
    for i in range(b):
        for t in range(n):
            qt = q[i, :, t].unsqueeze(1)  # [H, 1, d]
            own = [s for s in range(t + 1) if mask[i, s]]  # causal, padding masked
            w = torch.softmax(qt @ k[i, :, own].transpose(-1, -2) * scale, dim=-1)
            out[i, :, t] = (w @ v[i, :, own]).squeeze(1)
            j = 1 - i
            other = [s for s in range(n) if mask[j, s]]  # all of chunk j's real tokens, no causal mask
            w = torch.softmax(qt @ k[j, :, other].transpose(-1, -2) * scale, dim=-1)
            out[i, :, t] += (w @ v[j, :, other]).squeeze(1)
    h = x + att.o_proj(out.transpose(1, 2).reshape(b, n, -1))
    h = h + layer.mlp(layer.post_attention_layernorm(h))
    logits = lm.lm_head(m.norm(h))
    labels = ids.masked_fill(mask == 0, -100)
    want = F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), labels[:, 1:].reshape(-1), ignore_index=-100)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_inbatch_term_by_hand():
    """q = 1 against chunk 1's keys (0, ln 3) and values (1, 5): softmax = (1/4, 3/4), output 1/4 + 15/4 = 4."""
    q = torch.tensor([[1.0], [0.0]]).view(1, 1, 2, 1).repeat(2, 1, 1, 1)  # both chunks' queries: (1, 0)
    k = torch.tensor([[0.0], [0.0], [0.0], [math.log(3)]]).view(2, 1, 2, 1)
    v = torch.tensor([[7.0], [7.0], [1.0], [5.0]]).view(2, 1, 2, 1)
    sim = torch.tensor([[0.0, 1.0], [1.0, 0.0]])
    full = torch.ones(2, 2, dtype=torch.bool)
    out = inbatch_term(q, k, v, sim, full, scaling=1.0)
    assert out[0, 0, :, 0].tolist() == pytest.approx([4.0, 3.0])  # query 0 → (1+5)/2 = 3: uniform softmax
    assert out[1, 0, :, 0].tolist() == pytest.approx([7.0, 7.0])
    padded = full.clone()
    padded[1, 1] = False  # chunk 1's second token is padding: only value 1 remains
    assert inbatch_term(q, k, v, sim, padded, scaling=1.0)[0, 0, :, 0].tolist() == pytest.approx([1.0, 1.0])
    # V-normalisation divides by the weighted ‖V‖: (1/4·1 + 3/4·5) / (1/4·1 + 3/4·5) = 1
    assert inbatch_term(q, k, v, sim, full, 1.0, v_norm=True)[0, 0, 0, 0].item() == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize("v_norm", [False, True])
def test_pairwise_sdpa_matches_the_materialised_reference(v_norm):
    g = torch.Generator().manual_seed(0)
    q, k, v = (
        torch.randn(5, 4, 7, 8, generator=g),
        torch.randn(5, 2, 7, 8, generator=g),
        torch.randn(5, 2, 7, 8, generator=g),
    )
    key_mask = torch.ones(5, 7, dtype=torch.bool)
    key_mask[2, 4:] = False
    e = torch.randn(5, 3, generator=g)
    for tau in (1.0, 1e-4):  # dense and (nearly) one-hot Sim: pairs of weight 0 are skipped
        sim = similarity(e, e, tau)
        a = inbatch_term(q, k, v, sim, key_mask, 8**-0.5, v_norm, pairs_per_call=3)
        torch.testing.assert_close(a, inbatch_term_reference(q, k, v, sim, key_mask, 8**-0.5, v_norm))


@pytest.mark.parametrize("v_norm", [False, True])
def test_query_mask_computes_only_the_masked_positions(v_norm):
    """Rows with spans of different lengths and starts, a gap inside a span and a row with no position: the term is
    the reference's where the mask is True and exactly 0 elsewhere, and so are the gradients."""
    g = torch.Generator().manual_seed(1)
    q = torch.randn(4, 2, 9, 8, generator=g, requires_grad=True)
    k, v = torch.randn(4, 2, 9, 8, generator=g), torch.randn(4, 2, 9, 8, generator=g)
    key_mask = torch.ones(4, 9, dtype=torch.bool)
    key_mask[1, 6:] = False
    qmask = torch.zeros(4, 9, dtype=torch.bool)
    qmask[0, 4:] = True
    qmask[1, 3:6] = True
    qmask[2, [1, 2, 7]] = True  # a gap
    sim = similarity(torch.randn(4, 3, generator=g), torch.randn(4, 3, generator=g), tau=1.0)
    got = inbatch_term(q, k, v, sim, key_mask, 8**-0.5, v_norm, query_mask=qmask)
    want = inbatch_term_reference(q, k, v, sim, key_mask, 8**-0.5, v_norm) * qmask[:, None, :, None]
    torch.testing.assert_close(got, want)
    assert got[3].abs().sum() == 0 and got[0, :, :4].abs().sum() == 0
    w = torch.randn(got.shape, generator=g)
    (ga,) = torch.autograd.grad((got * w).sum(), q)
    (gb,) = torch.autograd.grad((want * w).sum(), q)
    torch.testing.assert_close(ga, gb)


@pytest.mark.parametrize("family", ["llama", "gemma3"])
def test_recording_only_the_weighted_chunks_leaves_loss_and_gradients_unchanged(family):
    """Without the plain loss, pass 1 runs on the chunks some row of Sim weights (here 2 of 4, one of them padded,
    trimmed to its length): the in-batch loss and every gradient equal those of recording the whole batch."""
    from agentkit.revela.model import RevelaModel, causal_lm_loss

    lm = _lm(family)
    ids, mask = _batch()
    inbatch_mask = torch.arange(ids.shape[1])[None, :] >= torch.tensor([6, 4, 5, 2])[:, None]
    batch = {"lm_input_ids": ids, "lm_attention_mask": mask, "inbatch_mask": inbatch_mask}
    logits = torch.tensor([[0.0, 2, 0, 0], [3, 0, 0, 0], [0, 1, 0, 0], [0.5, 1.5, 0, 0]], requires_grad=True)
    results = []
    for log_plain in (True, False):
        sim = torch.softmax(logits.masked_fill(torch.eye(4, dtype=torch.bool) | (logits == 0), -math.inf), dim=-1)
        loss, plain = RevelaModel(None, lm, v_norm=True, log_plain=log_plain).lm_loss(batch, sim)
        assert (plain is None) == (not log_plain)
        params = [p for p in lm.parameters() if p.requires_grad]
        results.append((loss, *torch.autograd.grad(loss, [logits, *params])))
    for a, b in zip(*results):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    # Sim ≡ 0: nothing to record, and the loss is the plain one
    zero, _ = RevelaModel(None, lm, log_plain=False).lm_loss(batch, torch.zeros(4, 4))
    torch.testing.assert_close(zero, causal_lm_loss(lm, ids, mask), rtol=0, atol=0)


def test_attend_without_record_is_a_clear_error():
    lm = _lm("llama")
    ids, mask = _batch()
    with pytest.raises(RuntimeError, match="mode='record'"):
        lm(input_ids=ids, attention_mask=mask, revela=InBatch("attend", sim=torch.zeros(4, 4), key_mask=mask.bool()))


def test_similarity_masks_the_diagonal_and_rows_sum_to_one():
    e = torch.randn(6, 4)
    s = similarity(e, e, tau=1e-4)
    assert torch.all(s.diagonal() == 0)
    torch.testing.assert_close(s.sum(-1), torch.ones(6))
    with pytest.raises(ValueError):
        similarity(e, e, tau=0)


@pytest.mark.parametrize("family,cap", [("llama", None), ("gemma3", None), ("gemma3", 3.0)])
def test_chunked_loss_equals_hf_labels_loss_and_its_gradient(family, cap):
    """Tolerances from the arithmetic, not from one CPU's kernels. The two paths sum the same n = 36 per-token
    terms in different orders (chunks of 7 against one pass; our GEMMs over kept rows against HF's over all rows),
    and two orders of a sum of n terms differ by at most 2·γ_n·Σ|terms| with γ_n ≈ n·u. For the float32 loss, a
    mean of positive CE terms, that is a relative 2·n·u = 4.3e-6 (u = 2^-24). An element of the embedding gradient
    can cancel to near 0 while its terms do not, so no float32 tolerance on it holds on every CPU (2.5e-7 apart
    was seen on an AMD EPYC): the gradient is compared in float64, where the same bound is ~1e-14 of the terms'
    scale, against HF's own logits under a plain cross-entropy (so the chunking, the checkpointed recompute and the
    row selection are checked exactly, and HF's ``labels=`` convention by the float32 loss)."""
    from agentkit.revela.model import causal_lm_loss

    lm = _lm(family)
    lm.config.final_logit_softcapping = cap  # Gemma's forward soft-caps its logits; ours must too
    ids, mask = _batch()
    n = int(mask[:, 1:].sum())  # the predicted tokens
    rtol32 = 2 * n * 2.0**-24
    want = lm(input_ids=ids, attention_mask=mask, labels=ids.masked_fill(mask == 0, -100)).loss
    got = causal_lm_loss(lm, ids, mask, chunk=7)  # 7 does not divide the 36 predicted tokens
    torch.testing.assert_close(got, want, rtol=rtol32, atol=0)
    with torch.no_grad():
        torch.testing.assert_close(causal_lm_loss(lm, ids, mask, chunk=5), want.detach(), rtol=rtol32, atol=0)

    lm = lm.double()
    keep = mask[:, 1:].bool()
    logits = lm(input_ids=ids, attention_mask=mask).logits[:, :-1][keep]  # HF's forward, soft-capped by it
    ref = F.cross_entropy(logits, ids[:, 1:][keep])
    weight = lm.get_input_embeddings().weight
    ref_grad = torch.autograd.grad(ref, weight)[0]
    got = causal_lm_loss(lm, ids, mask, chunk=7)
    got_grad = torch.autograd.grad(got, weight)[0]
    assert got.dtype == torch.float64
    torch.testing.assert_close(got, ref, rtol=1e-12, atol=0)
    torch.testing.assert_close(got_grad, ref_grad, rtol=1e-10, atol=1e-13 * ref_grad.abs().max().item())


def test_similarity_floors_negligible_weights_to_exact_zeros():
    """A weight below SIM_FLOOR of its row's best is exactly 0, with an exactly-0 gradient: a query whose row is
    one-hot gets no gradient at all, where the plain softmax hands it a 1e-30-sized one that turns into float32
    subnormals in the retriever's backward (~100x slower on CPU). Everything else matches the plain softmax."""
    from agentkit.revela.attention import SIM_FLOOR

    g = torch.Generator().manual_seed(0)
    q = torch.randn(12, 32, generator=g).requires_grad_(True)
    p = torch.randn(12, 32, generator=g).requires_grad_(True)
    w = torch.rand(12, 12, generator=g)
    tau = 0.003  # cosines spread over ±0.5: logits over ±170, weights from 1 down through the subnormals to 0

    logits = F.normalize(q, dim=-1) @ F.normalize(p, dim=-1).T / tau
    plain = torch.softmax(logits.masked_fill(torch.eye(12, dtype=torch.bool), float("-inf")), dim=-1)
    sim = similarity(q, p, tau)
    torch.testing.assert_close(sim, plain, rtol=0, atol=1e-11)
    assert (sim[sim > 0] >= SIM_FLOOR / 12).all() and (sim == 0).sum() > (plain == 0).sum() + 12

    gq_plain, gp_plain = torch.autograd.grad((plain * w).sum(), (q, p))
    gq, gp = torch.autograd.grad((sim * w).sum(), (q, p))
    torch.testing.assert_close(gq, gq_plain, rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(gp, gp_plain, rtol=1e-4, atol=1e-6)
    one_hot = (sim > 0).sum(dim=1) == 1  # rows where every other weight fell below the floor
    assert one_hot.any() and (gq[one_hot] == 0).all() and (gq_plain[one_hot] != 0).any()
