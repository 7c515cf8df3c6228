"""TGS: transparent GPU sharing for containers (see README.md)."""

__version__ = "0.1.0"
