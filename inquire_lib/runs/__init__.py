"""Where runs live on disk and how the notebooks are executed."""
