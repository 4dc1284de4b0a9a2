"""anchorlab: reasoning versus memorizing in transformers."""

__version__ = "0.1.0"
