"""``python -m tests.faults.stall_worker run``: the worker CLI, stopped (SIGSTOP) by itself at a
mixing point: a worker stalled at the worst moment for mixing, inside a batch, about to mix and
write its mixing record.

``FAULT_STALL_DIR=D``: once the file ``D/stall`` exists, the next mixing point that mixes anew
(not one adopted again from the log) and is met for the first time writes ``D/stalled``
(``{"partition", "offset", "epoch"}``) and stops the process; on SIGCONT the mixing point goes
on. A point met for the first time reads the model topic before anything else, so after SIGCONT
it finds a later claim there. (A point waited at reads it only when about to mix: after SIGCONT
it may wait on, and the store's refusal of a save, not the point, fence the partition;
``tests/unit/worker/test_mix_pacing.py`` holds that case.) From then until the worker's
partitions are revoked or lost, every prediction it sends is appended to ``D/zombie``, one value
a line: the outputs of a worker that may no longer own the partitions.

It stops only while no state is being stored: the directory store's save holds the partition's
lock (``flock``), and a worker stopped inside one (its checkpoint thread saving beside the loop)
would hold it until SIGCONT, so the new owner's claim would wait for the zombie it fences
(docs/reliability.md, "Found by a clean-clone run (2026-11-29)").
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from stream_perceptron.kafka.edge import Partition
from stream_perceptron.state.directory import DirectoryStore
from stream_perceptron.worker.assignment import Partitions
from stream_perceptron.worker.mixer import Mixer
from stream_perceptron.worker.outputs import Outputs
from stream_perceptron.worker.partition import PartitionState


def main() -> None:
    folder = Path(os.environ["FAULT_STALL_DIR"])
    predictions = os.environ["SP_TOPICS__PREDICTIONS"]
    state = {"stalled": False, "zombie": False}
    point, send_many, release = Mixer.point, Outputs.send_many, Partitions.release
    save = DirectoryStore.save
    saving = threading.Lock()  # held by a save, and by the stall: the two never overlap

    def guarded_save(self: DirectoryStore, *args: Any, **kwargs: Any) -> str:
        with saving:
            return save(self, *args, **kwargs)

    def stalling_point(self: Mixer, st: PartitionState, offset: int, *args: Any, **kwargs: Any) -> bool:
        if (not state["stalled"] and st.mix is not None and offset not in st.mix.replay
                and st.mix_wait is None and (folder / "stall").exists()):
            state["stalled"] = True
            tmp = folder / "stalled.tmp"
            tmp.write_bytes(orjson.dumps({"partition": st.partition, "offset": offset, "epoch": st.epoch}))
            tmp.replace(folder / "stalled")
            with saving:  # no save in flight on the checkpoint thread: no partition's lock held
                os.kill(os.getpid(), signal.SIGSTOP)
            state["zombie"] = True  # SIGCONT: from here, perhaps no longer the owner
        return point(self, st, offset, *args, **kwargs)

    def recording(self: Outputs, topic: str, keys: Sequence[bytes | None], values: Sequence[bytes]) -> None:
        if state["zombie"] and topic == predictions and values:
            with open(folder / "zombie", "ab") as fh:
                fh.write(b"".join(bytes(v) + b"\n" for v in values))
        send_many(self, topic, keys, values)

    def releasing(self: Partitions, partitions: list[Partition]) -> None:
        state["zombie"] = False  # revoked or lost: whatever it is assigned next, it claims anew
        release(self, partitions)

    Mixer.point = stalling_point  # type: ignore[method-assign]
    Outputs.send_many = recording  # type: ignore[method-assign]
    Partitions.release = releasing  # type: ignore[method-assign]
    DirectoryStore.save = guarded_save  # type: ignore[method-assign]
    from stream_perceptron.cli import main as cli

    cli(prog_name="stream-perceptron")


if __name__ == "__main__":
    main()
