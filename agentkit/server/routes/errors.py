"""The error answers every body-taking route documents (all in OpenAI's shape, ``ErrorResponse``)."""

from agentkit.server.protocol import ErrorResponse

ERRORS = {
    400: {"model": ErrorResponse, "description": "a malformed request, or one beyond the server's limits"},
    401: {"model": ErrorResponse, "description": "a missing or wrong API key"},
    404: {"model": ErrorResponse, "description": "an unknown model"},
    413: {"model": ErrorResponse, "description": "a body larger than --max-body-mb"},
    499: {"model": ErrorResponse, "description": "the client closed the request before its answer"},
}
