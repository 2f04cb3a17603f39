"""The LangGraph pipeline. Here stand its frame (build, runner, state, loop, context, structured) and its vocabulary
(models, config, collections, glossary, tuning); the other rooms are nodes/, answer/, text/ and clients/.
The frame may import: vocabulary, frame, answer/, text/, clients/, nodes/ (build alone). The vocabulary may import:
vocabulary, textkit.
"""
