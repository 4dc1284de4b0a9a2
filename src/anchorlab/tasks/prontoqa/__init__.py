"""PrOntoQA-style reasoning questions (journal Fig. 7E): generator, reference checker and the task."""

from anchorlab.tasks.prontoqa.generator import SPLITS, Example, Proof, concept_names, generate, generate_split, make_example, parse, prove

__all__ = ["SPLITS", "Example", "Proof", "concept_names", "generate", "generate_split", "make_example", "parse",
           "prove"]
