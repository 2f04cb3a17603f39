"""Deterministic text tools, no I/O: language, instructions, routing signals, extractive fact selection, search hops,
the support check and the screening of instructions planted in passages.
May import: vocabulary, answer/, text/, textkit.
"""
