"""``agent-runtime: llm``: iac-code turns answered by a model over an OpenAI-compatible chat-completions API."""
