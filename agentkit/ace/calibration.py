"""The de-duplication threshold, calibrated on bullet pairs written for it.

``PARAPHRASES``: 40 pairs that give the same advice in other words (a curator re-adding a strategy it already
has). ``DISTINCT``: 40 hard negatives, pairs on the same topic with different advice (merging them would lose a
strategy). ``calibrate()`` embeds them with the embedded MiniLM and reports precision / recall of "merge when
cosine ≥ t" for each t; ``agentkit bench ace`` prints it, and ``RefineConfig.dedup_threshold`` is the value it
chose (docs/ace.md gives the numbers).
"""

from __future__ import annotations

import numpy as np

PARAPHRASES: list[tuple[str, str]] = [
    ("Multiply before adding when evaluating an expression.", "Do multiplications first, then additions."),
    (
        "Always give the final answer as a plain integer without commas.",
        "Write the result as digits only, with no thousands separators.",
    ),
    ("Convert all quantities to the same unit before adding them.", "Put every value in a common unit before summing."),
    (
        "Use the python tool for products of numbers with three or more digits.",
        "For multiplying large numbers, call the python tool instead of computing mentally.",
    ),
    (
        "Check the sign of the answer after subtracting a larger number.",
        "When subtracting a bigger number, verify that the result is negative.",
    ),
    ("One mile is about 1.609 kilometres.", "A mile equals roughly 1.609 km."),
    (
        "Round only at the last step, not in intermediate calculations.",
        "Keep full precision until the final answer; do not round early.",
    ),
    (
        "Search for the person's name first, then for the fact about them.",
        "First look up who the person is, and only then query the attribute you need.",
    ),
    (
        "Quote the exact entity name from the retrieved passage in the answer.",
        "Copy the entity's name exactly as the document spells it.",
    ),
    (
        "If the search returns nothing, rephrase the query with fewer words.",
        "When a query finds no results, try a shorter reformulation.",
    ),
    ("Temperatures: F = C × 9/5 + 32.", "To go from Celsius to Fahrenheit, multiply by 1.8 and add 32."),
    (
        "Read the question twice to identify what unit the answer must be in.",
        "Before answering, check which unit the question asks for.",
    ),
    ("Put the answer inside <answer></answer> tags.", "Wrap the final answer in answer tags."),
    (
        "Percent increase = (new - old) / old × 100.",
        "To get the percentage growth, divide the change by the original value and multiply by 100.",
    ),
    ("Dates should be written as YYYY-MM-DD.", "Format every date in ISO form, year-month-day."),
    (
        "Do not include explanations in the final answer field.",
        "The final answer should contain only the answer, no reasoning.",
    ),
    (
        "Break multi-step word problems into one operation per step.",
        "Split a word problem into single operations and solve them one at a time.",
    ),
    (
        "Verify the result by plugging it back into the equation.",
        "Substitute the solution into the original equation to check it.",
    ),
    (
        "For a linear equation ax + b = c, x = (c - b) / a.",
        "Solve ax + b = c by subtracting b from c and dividing by a.",
    ),
    ("There are 1,000 grams in a kilogram.", "A kilogram is 1000 g."),
    (
        "Print the variable in the python tool; otherwise no output is shown.",
        "Always call print() in python code so the result appears in the output.",
    ),
    ("Avoid calling the same search query twice.", "Do not repeat a search you have already run."),
    (
        "Capitalise proper nouns in the answer.",
        "Names of people and places in the answer should start with a capital letter.",
    ),
    (
        "When two passages disagree, prefer the one that names the entity directly.",
        "If sources conflict, trust the passage that explicitly mentions the entity.",
    ),
    (
        "Ignore the distractor numbers that the question does not use.",
        "Some numbers in the problem are irrelevant; leave them out of the computation.",
    ),
    ("An hour has 3,600 seconds.", "There are 3600 seconds in one hour."),
    (
        "Express money amounts with two decimal places.",
        "Write currency values with exactly two digits after the decimal point.",
    ),
    (
        "Stop searching once the answer is found in a passage.",
        "As soon as a passage contains the answer, end the search and respond.",
    ),
    (
        "Parenthesised parts of an expression are computed first.",
        "Evaluate what is inside brackets before anything else.",
    ),
    (
        "Use integer division only when the question asks for whole items.",
        "Only floor the division result if the problem counts whole objects.",
    ),
    ("A foot is 12 inches.", "There are twelve inches in one foot."),
    ("Answer yes/no questions with exactly 'yes' or 'no'.", "For a yes-or-no question, reply with just yes or no."),
    (
        "Track the remaining quantity after each sale in a running total.",
        "Keep a running count of what is left after every item sold.",
    ),
    (
        "Average = sum of values divided by how many there are.",
        "To compute the mean, add the numbers and divide by their count.",
    ),
    ("Search queries work best as short noun phrases.", "Keep search queries brief, a few key nouns."),
    ("The word 'difference' in a question means subtract.", "'Difference' signals subtraction."),
    ("Speed = distance / time.", "Divide the distance by the time taken to get the speed."),
    ("Litres to millilitres: multiply by 1000.", "To convert L to mL, times 1000."),
    (
        "If the tool raises an error, fix the code and call it again.",
        "When the python call fails, correct the code and retry.",
    ),
    (
        "State the unit after the number, separated by a space.",
        "Write the unit following the value with one space between them.",
    ),
]

DISTINCT: list[tuple[str, str]] = [
    (
        "Multiply before adding when evaluating an expression.",
        "Divide before subtracting when evaluating an expression.",
    ),
    (
        "Always give the final answer as a plain integer without commas.",
        "Always give the final answer with two decimal places.",
    ),
    (
        "Convert all quantities to the same unit before adding them.",
        "Convert the final answer to the unit the question asks for.",
    ),
    (
        "Use the python tool for products of numbers with three or more digits.",
        "Use the search tool for questions about people and places.",
    ),
    (
        "Check the sign of the answer after subtracting a larger number.",
        "Check the number of digits of the answer after multiplying.",
    ),
    ("One mile is about 1.609 kilometres.", "One nautical mile is 1.852 kilometres."),
    ("Round only at the last step, not in intermediate calculations.", "Round money amounts to the nearest cent."),
    (
        "Search for the person's name first, then for the fact about them.",
        "Search with the full question text when the entity is unknown.",
    ),
    (
        "Quote the exact entity name from the retrieved passage in the answer.",
        "Quote the date exactly as the retrieved passage gives it.",
    ),
    (
        "If the search returns nothing, rephrase the query with fewer words.",
        "If the search returns too many results, add the entity's full name.",
    ),
    ("Temperatures: F = C × 9/5 + 32.", "Temperatures: K = C + 273.15."),
    (
        "Read the question twice to identify what unit the answer must be in.",
        "Read the question twice to find which person it asks about.",
    ),
    ("Put the answer inside <answer></answer> tags.", "Put the tool call inside <python></python> tags."),
    ("Percent increase = (new - old) / old × 100.", "Percent of a total = part / total × 100."),
    ("Dates should be written as YYYY-MM-DD.", "Times should be written in 24-hour format."),
    ("Do not include explanations in the final answer field.", "Include a short explanation before the final answer."),
    (
        "Break multi-step word problems into one operation per step.",
        "Combine all operations of a word problem into one python expression.",
    ),
    (
        "Verify the result by plugging it back into the equation.",
        "Verify the result by estimating its order of magnitude.",
    ),
    ("For a linear equation ax + b = c, x = (c - b) / a.", "For an equation ax = c, check that c is divisible by a."),
    ("There are 1,000 grams in a kilogram.", "There are 1,000 metres in a kilometre."),
    (
        "Print the variable in the python tool; otherwise no output is shown.",
        "Import math in the python tool before using sqrt.",
    ),
    ("Avoid calling the same search query twice.", "Avoid calling the python tool for one-digit sums."),
    ("Capitalise proper nouns in the answer.", "Spell out numbers below ten in the answer."),
    (
        "When two passages disagree, prefer the one that names the entity directly.",
        "When two passages agree, answer without searching again.",
    ),
    ("Ignore the distractor numbers that the question does not use.", "Use every number in the problem exactly once."),
    ("An hour has 3,600 seconds.", "A day has 86,400 seconds."),
    ("Express money amounts with two decimal places.", "Express percentages without decimal places."),
    ("Stop searching once the answer is found in a passage.", "Keep searching until two passages confirm the answer."),
    ("Parenthesised parts of an expression are computed first.", "Exponents are computed before multiplication."),
    (
        "Use integer division only when the question asks for whole items.",
        "Use floating-point division when the answer may be a fraction.",
    ),
    ("A foot is 12 inches.", "A yard is 3 feet."),
    (
        "Answer yes/no questions with exactly 'yes' or 'no'.",
        "Answer multiple-choice questions with the option letter only.",
    ),
    (
        "Track the remaining quantity after each sale in a running total.",
        "Track the total cost in a running sum of prices.",
    ),
    ("Average = sum of values divided by how many there are.", "Median = the middle value of the sorted list."),
    ("Search queries work best as short noun phrases.", "Search results work best when read in full."),
    ("The word 'difference' in a question means subtract.", "The word 'product' in a question means multiply."),
    ("Speed = distance / time.", "Time = distance / speed."),
    ("Litres to millilitres: multiply by 1000.", "Millilitres to litres: divide by 1000."),
    (
        "If the tool raises an error, fix the code and call it again.",
        "If the tool times out, use a smaller computation.",
    ),
    ("State the unit after the number, separated by a space.", "State the answer before the explanation."),
]


def choose(rows: list[dict[str, float]], min_precision: float = 0.8) -> dict[str, float]:
    """The row with the best F1 among those whose precision is at least ``min_precision`` (a wrong merge loses a
    strategy; a missed one only costs budget, which eviction pays back)."""
    ok = [r for r in rows if r["precision"] >= min_precision and r["recall"] > 0]
    return max(ok or rows, key=lambda r: (r["f1"], -r["threshold"]))


def pair_cosines(embedder: str = "minilm-l6") -> tuple[np.ndarray, np.ndarray]:
    """Cosine similarity of each paraphrase pair and each distinct pair."""
    from agentkit.models.embedder import embed

    def cos(pairs: list[tuple[str, str]]) -> np.ndarray:
        e = embed([t for p in pairs for t in p], embedder)
        return np.sum(e[0::2] * e[1::2], axis=1)

    return cos(PARAPHRASES), cos(DISTINCT)


def calibrate(embedder: str = "minilm-l6", thresholds: np.ndarray | None = None) -> list[dict[str, float]]:
    """Precision, recall and F1 of merging the pairs with cosine ≥ t and the same numbers (``mergeable``), for
    each t (default 0.50 to 0.95)."""
    from agentkit.ace.refine import same_numbers

    pos, neg = pair_cosines(embedder)
    pos_ok = np.array([same_numbers(a, b) for a, b in PARAPHRASES])
    neg_ok = np.array([same_numbers(a, b) for a, b in DISTINCT])
    rows = []
    for t in thresholds if thresholds is not None else np.round(np.arange(0.50, 0.951, 0.025), 3):
        tp, fp = int(((pos >= t) & pos_ok).sum()), int(((neg >= t) & neg_ok).sum())
        precision = tp / (tp + fp) if tp + fp else 1.0
        recall = tp / len(pos)
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        rows.append({"threshold": float(t), "precision": precision, "recall": recall, "f1": f1, "merged_distinct": fp})
    return rows
