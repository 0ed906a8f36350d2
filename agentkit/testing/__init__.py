"""Test helpers: a minimal OpenAI-shaped HTTP server over any Engine, for exercising OpenAIEngine offline."""
