"""The LangGraph pipeline: state, nodes, graph assembly, upstream LLM and MCP clients."""
