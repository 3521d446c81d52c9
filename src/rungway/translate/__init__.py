"""Translation between wire APIs, through the canonical form in `canonical.py`."""
