"""Evaluation front end: LoCoMo retrieval with ablations, replay of recorded recalls (SPEC §13)."""
