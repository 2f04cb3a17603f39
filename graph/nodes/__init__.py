"""Pipeline nodes: small async functions, one per module."""
