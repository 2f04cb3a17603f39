"""Deterministic text tools, no I/O: language, instructions, routing signals, how much of a question a text holds
(relevance), linked pairs of passages, fact selection, search hops, the support check and the screening of
instructions planted in passages.
May import: vocabulary, text/, textkit.
"""
