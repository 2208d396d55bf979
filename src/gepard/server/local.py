"""A server on uvicorn in a background thread, on a free loopback port (tests, load tests)."""

from __future__ import annotations

import socket
import threading
import time

import uvicorn

from gepard.server.app import uvicorn_settings


class LocalServer:
    def __init__(self, app):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.app = app
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning",
                                                    **uvicorn_settings(app.state.server.limits)))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        while not self.server.started:
            time.sleep(0.02)
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        """Graceful shutdown, as on SIGTERM: HTTP streams finish, WebSocket sessions get close code 1012."""
        self.server.should_exit = True
        self.thread.join(30)
