"""HTTP layer of NEO NL Agent: settings, OpenAI protocol models, routes, SSE rendering, auth."""
