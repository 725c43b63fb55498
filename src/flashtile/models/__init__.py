"""Models that run on flashtile (nothing is imported here; import the module you need)."""
