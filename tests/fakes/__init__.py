"""Test fakes (fake upstream LLM, ...)."""
