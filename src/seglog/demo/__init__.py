"""The end-to-end demo that ``make demo`` runs (see pipeline.py)."""
