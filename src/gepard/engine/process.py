"""The torch engine in a process of its own.

A decode step is many small tensor ops, each a little Python; in one process the engine would share the
GIL with the codec, the server and every caller, and they would take turns instead of running side by
side (measured: LM 3.8 + codec 2.0 ms per frame became 6.2 ms together). So the engine core runs in a
child process that does nothing else (importing this module is cheap, so a command can start the child
before it imports torch itself): requests and cancels go down a socket pair, each step's outputs come
back up it in one message, and a reader thread here hands them to the Streams. The child is a fresh
`python -m gepard.engine.process`, so user scripts need no `if __name__ == "__main__"` guard.
"""

from __future__ import annotations

import itertools
import os
import pickle
import queue
import socket
import subprocess
import sys
import threading
from dataclasses import replace
from multiprocessing.connection import Connection
from pathlib import Path

from gepard.engine.base import Output, Request, check_request
from gepard.engine.runner import Stream, StreamTable, step_safely


BATCH_INVARIANT = "GEPARD_BATCH_INVARIANT"  # "1": a seeded request's codes never depend on the load (CachedLM)
PREFILL_CHUNK = "GEPARD_PREFILL_CHUNK"  # prompt positions a decode step may also run (EngineCore)


def half_the_cores() -> int:
    """CPU threads for the engine process; the codec and the server get the other half."""
    return max(1, (os.cpu_count() or 2) // 2)


class EngineProcess(StreamTable):
    def __init__(self, model_dir: str | Path, slots: int = 16, threads: int | None = None, int8_head: bool = True):
        """Start the child, which loads the model with `threads` CPU threads; see `wait_ready`."""
        super().__init__()
        self.ids = itertools.count()
        self.slot_counts: queue.Queue[int] = queue.Queue()  # the child's answers to slots_in_use
        ours, theirs = socket.socketpair()
        self.send_lock = threading.Lock()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gepard.engine.process", str(theirs.fileno()), str(model_dir), str(slots),
             str(threads or half_the_cores()), str(int(int8_head))], pass_fds=[theirs.fileno()])
        theirs.close()
        self.conn = Connection(ours.detach())
        self.reader: threading.Thread | None = None

    def wait_ready(self) -> None:
        """Block until the child has loaded its model (it loads while the caller loads the rest); raises if
        it failed."""
        if self.reader is not None:
            return
        ready = receive(self.conn) if self.conn.poll(300) else "it did not start in 300 s"
        if ready != "ready":
            self.process.kill()
            raise RuntimeError(f"the engine process failed to start: {ready}")
        self.reader = threading.Thread(target=self._read, name="gepard-engine-reader", daemon=True)
        self.reader.start()

    def submit(self, request: Request) -> Stream:
        check_request(request)
        self.wait_ready()
        stream = self.open(next(self.ids), self.cancel)
        self._send(("add", stream.request_id, request))
        return stream

    def cancel(self, request_id: int) -> None:
        self.forget(request_id)
        self._send(("cancel", request_id))

    def slots_in_use(self) -> int:
        """Asks the child how many requests hold a slot now."""
        self._send(("status",))
        try:
            return self.slot_counts.get(timeout=30)
        except queue.Empty:
            raise RuntimeError("the engine process did not answer") from None

    def shutdown(self) -> None:
        self.end_all("cancelled")
        self._send(("stop",))
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        if self.reader is not None:
            self.reader.join(10)
        self.conn.close()

    def _send(self, message: tuple) -> None:
        with self.send_lock:
            try:
                send(self.conn, message)
            except (BrokenPipeError, OSError):
                if message[0] == "add":
                    self.end_all("error", "the engine process is gone")

    def _read(self) -> None:
        while True:
            try:
                message = receive(self.conn)
            except (EOFError, OSError):  # the child exited: no stream may wait forever
                self.end_all("error", "the engine process exited")
                return
            if isinstance(message, tuple):  # ("slots", n): the answer to slots_in_use
                self.slot_counts.put(message[1])
            else:
                self.deliver(message)


def send(conn: Connection, message) -> None:
    """Plain pickles both ways: Connection.send would hand tensors over as shared memory, which only works
    between processes that multiprocessing started itself."""
    conn.send_bytes(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))


def receive(conn: Connection):
    return pickle.loads(conn.recv_bytes())


def serve(model_dir: str, slots: int, threads: int, int8_head: bool, conn: Connection) -> None:
    """The child: load the model, then step the core whenever it has work, reading commands in between."""
    import torch

    from gepard.engine.core import DEFAULT_PREFILL_CHUNK, EngineCore
    from gepard.lm.speech_lm import SpeechLM

    try:
        torch.set_num_threads(threads)
        model = SpeechLM.from_pretrained(model_dir)
        if torch.cuda.is_available():  # written for GPUs but only run on CPUs so far; int8 head: CPU kernels
            model.lm.to("cuda")
        core = EngineCore(model, slots=slots, int8_head=int8_head and not torch.cuda.is_available(),
                          prefill_chunk=int(os.environ.get(PREFILL_CHUNK, DEFAULT_PREFILL_CHUNK)),
                          batch_invariant=os.environ.get(BATCH_INVARIANT) == "1")
    except Exception as e:  # noqa: BLE001 - reported to the parent, which raises it
        send(conn, repr(e))
        return
    send(conn, "ready")
    ours: dict[int, int] = {}  # the parent's request id -> the core's
    theirs: dict[int, int] = {}
    while True:
        while not core.busy or conn.poll():
            try:
                command = receive(conn)
            except EOFError:  # the parent is gone
                return
            if command[0] == "add":
                try:
                    rid = core.add(command[2])
                except ValueError as e:
                    send(conn, [Output(command[1], None, "error", str(e))])
                    continue
                ours[command[1]], theirs[rid] = rid, command[1]
            elif command[0] == "cancel" and command[1] in ours:
                core.cancel(ours.pop(command[1]))
            elif command[0] == "status":
                send(conn, ("slots", len(core.active)))
            elif command[0] == "stop":
                return
        outputs = []
        for out in step_safely(core):
            outputs.append(replace(out, request_id=theirs[out.request_id]))
            if out.finished:
                ours.pop(theirs.pop(out.request_id), None)
        send(conn, outputs)


if __name__ == "__main__":
    fd, model_dir, slots, threads, int8_head = sys.argv[1:]
    serve(model_dir, int(slots), int(threads), bool(int(int8_head)), Connection(int(fd)))
    os._exit(0)  # nothing to flush; skips a second of interpreter teardown the parent would wait for
