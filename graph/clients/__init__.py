"""Clients of the outside world: the upstream LLM, the MCP document server, the HTTP transport they share, and the
response and plan caches (in process, or Valkey/Redis).
May import: vocabulary, answer/, clients/.
"""
