"""Long profiles of the multi-process tests; the harness is shared with the short ones."""
