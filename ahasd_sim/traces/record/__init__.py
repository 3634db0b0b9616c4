"""Recorders of chain and tree traces from a real drafter/target pair (need the gguf extra)."""
