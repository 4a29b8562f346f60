"""Benchmark clients, one module per SDK; each is imported only in its own worker process."""
