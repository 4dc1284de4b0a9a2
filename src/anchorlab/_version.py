"""The package's version: the one source (pyproject.toml reads it; final.json records it)."""

__version__ = "0.2.0"
