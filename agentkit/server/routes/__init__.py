"""The API's routes, one module per family (vLLM's ``api_router`` modules); each route receives the app's
``OpenAIServing`` as ``serving: Serving`` and a typed request body checked by ``CheckedJSONRoute``."""

from agentkit.server.protocol import ErrorResponse
from agentkit.server.routes import chat, completions, lora, models, responses, tokenize

ROUTERS = [
    models.router,
    tokenize.router,
    chat.router,
    completions.router,
    responses.router,
    responses.stored,
    lora.router,
]

__all__ = ["ROUTERS", "ErrorResponse"]
