"""Token-level traces: the chain and tree formats (format, tree), their statistics (stats,
tree_stats) and the recorders that make them with llama.cpp (record/)."""
