"""Kernel families. Each module: public API -> config -> forward -> backward."""
