"""Step-level and episode-level evaluation, reference policies and metrics with confidence intervals."""
