"""Clients of the outside world: the upstream LLM, the MCP document server, the HTTP transport they share, and the
response and plan caches (in process, or Valkey/Redis), and the OpenTelemetry spans of the pipeline (`tracing.py`:
the API only, a no-op tracer unless the service configured tracing).
May import: vocabulary, answer/, clients/.
"""
