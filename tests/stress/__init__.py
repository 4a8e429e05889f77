"""Long profiles of the robustness tests (issue 6); the harness is shared with the short ones."""
