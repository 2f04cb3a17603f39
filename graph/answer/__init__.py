"""What the user and the model read: typed thought events, progress lines, prompt templates, the evidence ledger
(numbers, citations, sources list) and the streamed answer with its filters for tags and addresses.
May import: vocabulary, answer/, textkit (its untrusted module: document values written as text).
"""
