"""What the user and the model read: typed thought events, progress lines, prompt templates, the evidence ledger
(numbers, citations, sources list), which evidence an answer rests on (the evidence policy), the template answer
and the streamed answer with its filters for tags and addresses.
May import: vocabulary, answer/, textkit (its untrusted module: document values written as text).
"""
