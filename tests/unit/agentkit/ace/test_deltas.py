"""Deltas: each operation, the conflict rules, and the two properties the log relies on: a batch's result does
not depend on the order its deltas arrive in, and re-applying the resolved deltas gives the same playbook."""

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentkit.ace.deltas import Delta, apply_batch
from agentkit.ace.playbook import Playbook


def base() -> Playbook:
    pb = Playbook()
    apply_batch(
        pb,
        [
            Delta("ADD", section=s, content=c)
            for s, c in (
                ("STRATEGIES & INSIGHTS", "Multiply before adding."),
                ("STRATEGIES & INSIGHTS", "Check units."),
                ("COMMON MISTAKES TO AVOID", "Rounding too early."),
                ("OTHERS", "Answer with a number only."),
            )
        ],
    )
    return pb


def test_each_operation():
    pb = base()
    ids = [b.id for b in pb.ordered()]
    assert ids == ["str-00001", "str-00002", "err-00003", "misc-00004"] and pb.version == 1
    assert pb.bullets["str-00001"].content == "Check units."  # ADDs take ids in (section, content) order
    res = apply_batch(
        pb,
        [
            Delta("TAG", id="str-00001", tag="helpful"),
            Delta("TAG", id="str-00001", tag="helpful"),
            Delta("TAG", id="err-00003", tag="harmful", count=3),
            Delta("UPDATE", id="misc-00004", content="Give only the final number."),
            Delta("MERGE", ids=("str-00002", "str-00001"), content="Multiply first; check units."),
            Delta("REMOVE", id="err-00003"),
            Delta("ADD", section="formulas_and_calculations", content="area = w * h"),
            Delta("ADD", section="no such section", content="misc idea"),
        ],
    )
    assert pb.version == 2
    kept = pb.bullets["str-00001"]
    assert (kept.content, kept.helpful, kept.updated) == ("Multiply first; check units.", 2, 2)
    assert "str-00002" not in pb.bullets and "err-00003" not in pb.bullets
    assert pb.bullets["misc-00004"].content == "Give only the final number."
    assert [(b.id, b.section) for b in pb.ordered()][-3:] == [
        ("calc-00005", "FORMULAS & CALCULATIONS"),
        ("misc-00004", "OTHERS"),
        ("misc-00006", "OTHERS"),
    ]
    assert [r for _, r in res.rejected] == ["conflict: err-00003 is removed in this batch"]
    assert res.added == ["calc-00005", "misc-00006"]


def test_conflicts_are_rejected_with_a_reason():
    pb = base()
    res = apply_batch(
        pb,
        [
            Delta("TAG", id="str-00099", tag="helpful"),
            Delta("UPDATE", id="str-00001", content="b version"),
            Delta("UPDATE", id="str-00001", content="a version"),
            Delta("UPDATE", id="str-00002", content="merged away"),
            Delta("MERGE", ids=("str-00002", "err-00003"), content="merged"),
            Delta("ADD", section="OTHERS", content="  answer WITH a number   only. "),
        ],
    )
    reasons = sorted(r for _, r in res.rejected)
    assert reasons == [
        "conflict: another UPDATE of str-00001 in this batch wins",
        "conflict: str-00002 is merged in this batch",
        "duplicate: the section already has this bullet",
        "unknown bullet str-00099",
    ]
    assert pb.bullets["str-00001"].content == "a version"  # the smaller content wins
    assert pb.bullets["str-00002"].content == "merged" and pb.bullets["str-00002"].section == "STRATEGIES & INSIGHTS"


def test_overlapping_merges_join_and_a_removed_member_leaves():
    pb = base()
    apply_batch(
        pb,
        [
            Delta("MERGE", ids=("str-00001", "str-00002"), content="zz"),
            Delta("MERGE", ids=("str-00002", "misc-00004"), content="aa"),
            Delta("MERGE", ids=("err-00003", "misc-00004"), content="qq"),
            Delta("REMOVE", id="err-00003"),
        ],
    )
    assert list(pb.bullets) == ["str-00001"] and pb.bullets["str-00001"].content == "aa"


def test_parse_accepts_what_curators_write_and_names_what_is_wrong():
    d = Delta.parse({"type": "delete", "bullet_id": "x-1"})
    assert d == Delta("REMOVE", id="x-1")
    assert Delta.parse({"type": "ADD", "section": "s", "content": "a\n b", "id": "x-9"}) == Delta(
        "ADD", section="s", content="a b"
    )  # the model does not pick new ids
    assert Delta.parse({"op": "MERGE", "source_ids": ["a-1", "a-2"], "content": "c"}).ids == ("a-1", "a-2")
    for bad, msg in [
        ({"type": "RENAME"}, "unknown operation 'RENAME'"),
        ({"type": "ADD", "content": " "}, "ADD needs a non-empty content"),
        ({"type": "MERGE", "ids": ["a-1", "a-1"], "content": "c"}, "two or more different"),
        ({"type": "TAG", "id": "a-1", "tag": "great"}, "TAG needs tag"),
        ({"type": "UPDATE", "content": "c"}, "UPDATE needs the bullet's id"),
        (["ADD"], "must be an object"),
    ]:
        with pytest.raises(ValueError, match=msg):
            Delta.parse(bad)


ids = st.sampled_from(["str-00001", "str-00002", "err-00003", "misc-00004", "str-00077"])
texts = st.sampled_from(["alpha", "beta", "gamma", "Check units.", "delta rule"])
deltas = st.one_of(
    st.builds(
        lambda s, c: Delta("ADD", section=s, content=c),
        st.sampled_from(["OTHERS", "strategies_and_insights", "new section"]),
        texts,
    ),
    st.builds(lambda i, c: Delta("UPDATE", id=i, content=c), ids, texts),
    st.builds(
        lambda i, t, n: Delta("TAG", id=i, tag=t, count=n),
        ids,
        st.sampled_from(["helpful", "harmful", "neutral", "used"]),
        st.integers(1, 3),
    ),
    st.builds(
        lambda a, c: Delta("MERGE", ids=tuple(a), content=c), st.lists(ids, min_size=2, max_size=3, unique=True), texts
    ),
    st.builds(lambda i: Delta("REMOVE", id=i), ids),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(deltas, max_size=10), st.randoms(use_true_random=False))
def test_order_of_arrival_does_not_change_the_result(batch, rnd):
    a, b = base(), base()
    shuffled = list(batch)
    rnd.shuffle(shuffled)
    ra, rb = apply_batch(a, batch), apply_batch(b, shuffled)
    assert a.to_json() == b.to_json()
    assert ra.applied == rb.applied
    assert sorted(map(repr, ra.rejected)) == sorted(map(repr, rb.rejected))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(deltas, max_size=6), max_size=4))
def test_resolved_deltas_replay_to_the_same_bytes(batches):
    pb, replay = base(), base()
    for batch in batches:
        res = apply_batch(pb, batch)
        again = apply_batch(replay, [Delta.parse(d.to_dict(), resolved=True) for d in res.applied])
        assert not again.rejected and again.applied == res.applied
        assert replay.to_json() == pb.to_json()


def test_a_batch_that_changes_nothing_keeps_the_version():
    pb = base()
    before = copy.deepcopy(pb)
    res = apply_batch(pb, [Delta("UPDATE", id="str-00001", content="Check units."), Delta("REMOVE", id="nope-1")])
    assert not res.changed and pb == before
