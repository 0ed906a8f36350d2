"""Suite (b): multi-hop questions over a generated knowledge base of fictional entities.

Names and facts are invented from a seed, so no model can have memorised them: the answer must be found in the
corpus (one document per entity, JSONL ``{"id", "title", "text"}``) by following 2 or 3 links, e.g.

    "In which country was the founder of Zentrix Labs born?"
        Zentrix Labs --founded by--> Velmira Oskaro --born in--> Drenholt --in--> Kaldoria

``MultiHopKB.build(seed)`` makes the world; ``kb.questions(n, seed)`` the tasks (``metric="em_f1"``, with the
supporting document ids in ``meta["support"]``); ``kb.corpus()`` / ``kb.write_corpus(path)`` the documents.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from agentkit.data.tasks import Task, write_jsonl

_ONSETS = ["b", "d", "k", "l", "m", "n", "r", "s", "t", "v", "z", "th", "dr", "kr", "st", "br", "gl", "ph"]
_VOWELS = ["a", "e", "i", "o", "u", "ai", "ei", "ou"]
_CODAS = ["", "n", "r", "s", "l", "th", "x", "nd", "rk"]
_JOBS = ["engineer", "chemist", "architect", "composer", "economist", "cartographer", "surgeon", "linguist"]
_SECTORS = ["Labs", "Dynamics", "Works", "Systems", "Foundry", "Holdings", "Optics", "Freight"]


def _word(r: random.Random, syllables: int) -> str:
    return "".join(r.choice(_ONSETS) + r.choice(_VOWELS) + r.choice(_CODAS) for _ in range(syllables)).capitalize()


@dataclass
class MultiHopKB:
    people: dict[str, dict] = field(default_factory=dict)  # name -> {born_in, works_for, year, job}
    companies: dict[str, dict] = field(default_factory=dict)  # name -> {founder, hq, year}
    cities: dict[str, dict] = field(default_factory=dict)  # name -> {country}
    countries: list[str] = field(default_factory=list)

    @classmethod
    def build(
        cls, seed: int = 0, n_people: int = 120, n_companies: int = 40, n_cities: int = 30, n_countries: int = 8
    ) -> MultiHopKB:
        r = random.Random(f"kb-{seed}")
        used: set[str] = set()

        def fresh(make) -> str:
            while True:
                name = make()
                if name not in used:
                    used.add(name)
                    return name

        kb = cls()
        kb.countries = [fresh(lambda: _word(r, 3)) + "ia" for _ in range(n_countries)]
        for _ in range(n_cities):
            kb.cities[fresh(lambda: _word(r, 2) + r.choice(["holt", "mar", "vik", "burg", "ora", "dal"]))] = {
                "country": r.choice(kb.countries)
            }
        city_names = list(kb.cities)
        people = [fresh(lambda: f"{_word(r, 2)} {_word(r, 3)}") for _ in range(n_people)]
        for name in people:
            kb.people[name] = {"born_in": r.choice(city_names), "year": r.randint(1921, 1999), "job": r.choice(_JOBS)}
        founders = r.sample(people, n_companies)
        for founder in founders:
            kb.companies[fresh(lambda: f"{_word(r, 2)} {r.choice(_SECTORS)}")] = {
                "founder": founder,
                "hq": r.choice(city_names),
                "year": r.randint(1950, 2020),
            }
        company_names = list(kb.companies)
        for name in people:
            kb.people[name]["works_for"] = r.choice(company_names)
        return kb

    # ---- corpus -------------------------------------------------------------------------------------------
    def doc_id(self, name: str) -> str:
        return "doc-" + name.lower().replace(" ", "-")

    def corpus(self) -> list[dict[str, str]]:
        docs = []
        for name, p in self.people.items():
            docs.append(
                {
                    "id": self.doc_id(name),
                    "title": name,
                    "text": (
                        f"{name} is {'an' if p['job'][0] in 'aeiou' else 'a'} {p['job']} born in {p['year']} in the city of "
                        f"{p['born_in']}. "
                        f"{name} works for {p['works_for']}."
                    ),
                }
            )
        for name, c in self.companies.items():
            docs.append(
                {
                    "id": self.doc_id(name),
                    "title": name,
                    "text": (
                        f"{name} is a company founded in {c['year']} by {c['founder']}. "
                        f"Its headquarters are in {c['hq']}."
                    ),
                }
            )
        for name, c in self.cities.items():
            docs.append({"id": self.doc_id(name), "title": name, "text": f"{name} is a city in {c['country']}."})
        return docs

    def write_corpus(self, path: str | Path) -> Path:
        write_jsonl(path, self.corpus())
        return Path(path)

    # ---- questions ----------------------------------------------------------------------------------------
    def _templates(self):
        P, C, T = self.people, self.companies, self.cities
        return [
            (
                "founder_birthplace",
                2,
                lambda c: (
                    f"In which city was the founder of {c} born?",
                    P[C[c]["founder"]]["born_in"],
                    [c, C[c]["founder"]],
                ),
                C,
            ),
            (
                "hq_country",
                2,
                lambda c: (f"In which country are the headquarters of {c}?", T[C[c]["hq"]]["country"], [c, C[c]["hq"]]),
                C,
            ),
            (
                "employer_founder",
                2,
                lambda p: (
                    f"Who founded the company that {p} works for?",
                    C[P[p]["works_for"]]["founder"],
                    [p, P[p]["works_for"]],
                ),
                P,
            ),
            (
                "founder_birthyear",
                2,
                lambda c: (
                    f"In which year was the founder of {c} born?",
                    str(P[C[c]["founder"]]["year"]),
                    [c, C[c]["founder"]],
                ),
                C,
            ),
            (
                "founder_country",
                3,
                lambda c: (
                    f"In which country was the founder of {c} born?",
                    T[P[C[c]["founder"]]["born_in"]]["country"],
                    [c, C[c]["founder"], P[C[c]["founder"]]["born_in"]],
                ),
                C,
            ),
            (
                "employer_hq_country",
                3,
                lambda p: (
                    f"In which country are the headquarters of the company that {p} works for?",
                    T[C[P[p]["works_for"]]["hq"]]["country"],
                    [p, P[p]["works_for"], C[P[p]["works_for"]]["hq"]],
                ),
                P,
            ),
        ]

    def questions(self, n: int = 100, seed: int = 0) -> list[Task]:
        """``n`` questions cycling through the templates; the i-th depends only on (kb, seed, i)."""
        templates = self._templates()
        tasks = []
        for i in range(n):
            kind, hops, make, pool = templates[i % len(templates)]
            r = random.Random(f"mh-{seed}-{i}")
            q, ans, chain = make(r.choice(sorted(pool)))
            tasks.append(
                Task(
                    id=f"mh-{seed}-{i}",
                    question=q,
                    answer=ans,
                    kind=kind,
                    metric="em_f1",
                    meta={"hops": hops, "support": [self.doc_id(x) for x in chain]},
                )
            )
        return tasks


def multihop_suite(n: int = 100, seed: int = 0) -> tuple[list[Task], list[dict[str, str]]]:
    """Questions and their corpus from the knowledge base of ``seed``."""
    kb = MultiHopKB.build(seed)
    return kb.questions(n, seed), kb.corpus()
