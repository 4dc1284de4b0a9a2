"""Concept-graph diffusion (journal §VII, Fig. 6): renders, the conditional DDPM task and its concept classifier."""
