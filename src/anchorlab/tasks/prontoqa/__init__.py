"""PrOntoQA-style reasoning questions (journal Fig. 7E): generator, reference checker and the task."""

from .generator import Example, Proof, concept_names, generate, make_example, parse, prove

__all__ = ["Example", "Proof", "concept_names", "generate", "make_example", "parse", "prove"]
