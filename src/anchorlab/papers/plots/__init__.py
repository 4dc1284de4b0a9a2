"""The papers' and the studies' figures (tables in, matplotlib Figure out)."""
