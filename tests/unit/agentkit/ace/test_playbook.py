"""The playbook's text format round-trips, its JSON form is lossless and byte-stable, bad files name the line."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentkit.ace.playbook import SECTIONS, Bullet, Playbook, section_key, section_slug
from agentkit.errors import AgentkitError

# words that look like the format's own syntax, to catch a parser that trusts the content
words = st.lists(
    st.sampled_from(["alpha", "::", "[str-00001]", "helpful=3", "## B", "été", "x=1;", "-"]), min_size=1, max_size=6
).map(" ".join)


@st.composite
def playbooks(draw):
    pb = Playbook(sections=list(SECTIONS))
    for _ in range(draw(st.integers(0, 12))):
        content = draw(words)
        section = draw(st.sampled_from(SECTIONS))
        b = Bullet(pb.new_id(section), section, content, *draw(st.lists(st.integers(0, 9), min_size=4, max_size=4)))
        pb.bullets[b.id] = b
    pb.version = draw(st.integers(0, 50))
    return pb


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(playbooks())
def test_text_round_trip_keeps_what_the_format_holds(pb):
    back = Playbook.from_text(pb.to_text())
    assert back.to_text() == pb.to_text()
    assert back.sections == pb.sections
    assert [(b.id, b.section, b.content, b.helpful, b.harmful) for b in back.ordered()] == [
        (b.id, b.section, b.content, b.helpful, b.harmful) for b in pb.ordered()
    ]
    assert back.next_id == pb.next_id


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(playbooks())
def test_json_is_lossless_and_byte_stable(pb):
    text = pb.to_json()
    back = Playbook.from_json(text)
    assert back.to_json() == text
    assert back == Playbook(pb.sections, {b.id: b for b in pb.ordered()}, pb.next_id, pb.version)


def test_the_official_text_parses():
    text = (
        "## STRATEGIES & INSIGHTS\n[str-00001] helpful=3 harmful=1 :: Multiply first.\n\n"
        "## COMMON MISTAKES TO AVOID\n[err-00007] helpful=0 harmful=2 :: Do not round early.\n\n## OTHERS"
    )
    pb = Playbook.from_text(text)
    assert pb.sections == ["STRATEGIES & INSIGHTS", "COMMON MISTAKES TO AVOID", "OTHERS"]
    assert pb.next_id == 8 and pb.bullets["err-00007"].problematic and not pb.bullets["str-00001"].problematic
    assert pb.to_text() == text
    assert pb.stats()["problematic"] == 1 and pb.stats()["by_section"]["OTHERS"] == 0


def test_bad_text_names_the_line():
    with pytest.raises(AgentkitError, match=r"pb.txt:3: not a section header or a bullet"):
        Playbook.from_text("## A\n[a-1] helpful=0 harmful=0 :: x\nsome prose", "pb.txt")
    with pytest.raises(AgentkitError, match=r":2: bullet id a-1 appears twice"):
        Playbook.from_text("[a-1] helpful=0 harmful=0 :: x\n[a-1] helpful=0 harmful=0 :: y")


def test_bad_json_names_the_field():
    with pytest.raises(AgentkitError, match="not valid JSON"):
        Playbook.from_json("{", "pb.json")
    good = Playbook().to_dict()
    with pytest.raises(AgentkitError, match="field 'next_id' must be a int"):
        Playbook.from_dict({**good, "next_id": "3"})
    bad = {**good, "bullets": [{"id": "x-1", "section": "NOPE", "content": "c"}]}
    with pytest.raises(AgentkitError, match=r"bullets\[0\]: section 'NOPE'"):
        Playbook.from_dict(bad)


def test_sections_match_in_any_spelling():
    pb = Playbook()
    assert pb.find_section("common_mistakes_to_avoid") == "COMMON MISTAKES TO AVOID"
    assert pb.find_section("Problem solving heuristics") == "PROBLEM-SOLVING HEURISTICS"
    assert section_key("Formulas & Calculations") == "formulas_and_calculations"
    assert pb.new_id("FORMULAS & CALCULATIONS") == "calc-00001" and section_slug("Weird") == "weir"
