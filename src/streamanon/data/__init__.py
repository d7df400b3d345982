"""Data sources: seeded synthetic traces (and, in later modules, data set generators/loaders)."""
