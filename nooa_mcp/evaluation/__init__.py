"""Evaluation front end: LoCoMo retrieval with ablations, replay of recorded recalls."""
