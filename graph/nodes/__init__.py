"""Pipeline nodes: small async functions, one per module, that read the state and the run's context and write state.
May import: vocabulary, frame, answer/, text/, clients/, nodes/.
"""
