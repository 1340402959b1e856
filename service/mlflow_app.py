"""The MLflow server app that `groupscale up` runs: MLflow's own, whose UI opens experiments on their runs table.

MLflow 3.17's UI chooses an experiment page's view in the browser, not from the experiment: the link's
``workflowType`` parameter, else what the sidebar's "GenAI | Model training" switch last chose in this browser
(localStorage ``mlflow.workflowType_v1``), else GenAI, whose experiment page is a traces overview ("Traces 0" for a
sweep). The experiment tag ``mlflow.experimentKind`` no longer decides (the bundle's experiment-kind hook reads the
workflow type behind an always-on flag), so a page opened from MLflow's experiment list (``#/experiments/<id>``, no
parameter) showed no runs. This app serves MLflow's page with "Model training" as the choice of a browser that has not
made one; the switch still changes it, and the browser keeps what the user picked.

It is MLflow app ``groupscale`` (the ``mlflow.app`` entry point in pyproject.toml, as MLflow's ``basic-auth`` is one),
run by ``mlflow server --app-name groupscale`` (service.stack.start_mlflow).
"""

from __future__ import annotations

from typing import Any

NAME = "groupscale"  # the app's name for `mlflow server --app-name`
WORKFLOW_KEY = "mlflow.workflowType_v1"  # MLflow 3.17's useLocalStorage({key: "mlflow.workflowType", version: 1})
# Runs before MLflow's deferred bundle reads the key; a stored choice (JSON "genai" or "machine_learning") is kept.
DEFAULT_VIEW = (
    f'<script>try{{if(localStorage.getItem("{WORKFLOW_KEY}")===null)'
    f'localStorage.setItem("{WORKFLOW_KEY}",\'"machine_learning"\')}}catch(e){{}}</script>'
).encode()


def with_default_view(page: bytes) -> bytes:
    """MLflow's index page with DEFAULT_VIEW first in its head (unchanged when it has no ``<head>``)."""
    return page.replace(b"<head>", b"<head>" + DEFAULT_VIEW, 1)


class ModelTrainingByDefault:
    """ASGI middleware: MLflow's single-page UI, the page a GET of ``/`` answers with 200, gets DEFAULT_VIEW; every
    other answer, and that page's headers but its length, are MLflow's own."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] != "/" or scope["method"] != "GET":
            await self.app(scope, receive, send)
            return
        start: dict = {}
        body: list[bytes] = []

        async def rewrite(message: dict) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
                if start["status"] != 200:  # a 304 and the like: nothing to change
                    await send(message)
                return
            if start["status"] != 200:
                await send(message)
                return
            body.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            headers = [(k, v) for k, v in start["headers"] if k.lower() != b"content-length"]
            page = b"".join(body)
            if not any(k.lower() == b"content-encoding" for k, _ in headers):  # MLflow sends it plain
                page = with_default_view(page)
            await send({**start, "headers": [*headers, (b"content-length", str(len(page)).encode())]})
            await send({"type": "http.response.body", "body": page})

        await self.app(scope, receive, rewrite)


def create_app() -> ModelTrainingByDefault:
    """MLflow's tracking server app (configured, as MLflow's own, by the environment `mlflow server` sets), wrapped."""
    from mlflow.server.fastapi_app import app

    return ModelTrainingByDefault(app)
