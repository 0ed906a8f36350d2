"""Test helpers: a scripted engine for agent-loop tests, and uvicorn in a thread for server tests."""
