"""A real S3 API with a switch of faults (issue 51): moto's server on 127.0.0.1, its WSGI app
wrapped so that, for a burst of seconds, requests are answered with S3's own errors
(``500 InternalError``), throttled (``503 SlowDown``) or delayed, as a real bucket does under
load. Anything that speaks S3 to the endpoint (drivers in other processes) meets the faults;
outside a burst every request reaches moto untouched."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

#: What each burst kind answers: an HTTP status and S3's error code (None: delayed only).
ANSWERS = {"s3_error": ("500 Internal Server Error", "InternalError"), "s3_throttle": ("503 Slow Down", "SlowDown"),
           "s3_latency": None}


@dataclass
class Burst:
    """One fault burst: until ``until`` (monotonic seconds), a share ``rate`` of requests is
    refused with ``kind``'s error, or every request waits ``delay_s`` (``s3_latency``)."""

    kind: str
    until: float
    rate: float = 1.0
    delay_s: float = 0.0


@dataclass
class FaultySwitch:
    """The WSGI middleware in front of moto; :meth:`burst` arms a fault, ``served`` counts the
    requests it refused or delayed, by kind."""

    app: object
    seed: int = 0
    current: Burst | None = None
    served: Counter = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self._lock = threading.Lock()

    def burst(self, kind: str, seconds: float, rate: float = 1.0, delay_s: float = 0.0) -> None:
        if kind not in ANSWERS:
            raise ValueError(f"S3 fault {kind!r} is not one of {sorted(ANSWERS)}")
        self.current = Burst(kind, time.monotonic() + seconds, rate, delay_s)

    def calm(self) -> None:
        self.current = None

    def __call__(self, environ, start_response):
        burst = self.current
        if burst is None or time.monotonic() >= burst.until:
            return self.app(environ, start_response)
        if burst.kind == "s3_latency":
            self.served[burst.kind] += 1
            time.sleep(burst.delay_s)
            return self.app(environ, start_response)
        with self._lock:
            refused = self._rng.random() < burst.rate
        if not refused:
            return self.app(environ, start_response)
        self.served[burst.kind] += 1
        length = int(environ.get("CONTENT_LENGTH") or 0)
        if length:  # read the request's body: the connection stays usable for the next request
            environ["wsgi.input"].read(length)
        status, code = ANSWERS[burst.kind]
        body = (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code><Message>injected by the '
                f'nemesis</Message><RequestId>nemesis</RequestId></Error>').encode()
        start_response(status, [("Content-Type", "application/xml"), ("Content-Length", str(len(body)))])
        return [body]


class FaultyS3:
    """moto's threaded S3 server behind a :class:`FaultySwitch`; ``endpoint`` is its URL."""

    def __init__(self, seed: int = 0) -> None:
        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
        from werkzeug.serving import make_server

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
        self.switch = FaultySwitch(DomainDispatcherApplication(create_backend_app), seed)
        self._server = make_server("127.0.0.1", 0, self.switch, threaded=True, request_handler=MotoRequestHandler)
        host, port = self._server.server_address[:2]
        self.endpoint = f"http://{host}:{port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True, name="faulty-s3")
        self._thread.start()

    def environment(self) -> dict[str, str]:
        """The variables a driver needs to reach this S3 (no profile file of the machine read)."""
        import os

        return {"AWS_ACCESS_KEY_ID": "nemesis", "AWS_SECRET_ACCESS_KEY": "nemesis", "AWS_DEFAULT_REGION": "us-east-1",
                "AWS_ENDPOINT_URL": self.endpoint, "AWS_CONFIG_FILE": os.devnull,
                "AWS_SHARED_CREDENTIALS_FILE": os.devnull}

    def create_bucket(self, name: str) -> str:
        """A fresh bucket; the store URI in it (``s3://NAME/store``)."""
        import boto3

        env = self.environment()
        boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                     aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"], region_name="us-east-1"
                     ).create_bucket(Bucket=name)
        return f"s3://{name}/store"

    def stop(self) -> None:
        self._server.shutdown()
        self._thread.join()
