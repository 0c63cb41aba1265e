"""The submit side of one transfer, once the starter has opened it: send a job's input, or receive
its output where the job's ad says. The owner's shadow runs it as the owner; the schedd runs it
itself for a spooled job, whose files are the schedd's own (agents/schedd/spooling.py)."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from typing import Any

from gridbus.transfer import directio, spec, stream


async def serve(ep: stream.Endpoint, direction: str, ad: Mapping[str, Any],
                place: Callable[[str], str] | None = None) -> None:
    """``ep.peer`` is the starter's queue (``ep.heard`` its ``open``: whether it answers where a file
    starts, which digests it knows). ``place(name)``: where an output file goes (default: as the ad's Out, Err, remaps
    and Iwd say; a checkpoint's, spec.CHECKPOINT_TO in ``ad``, under its own name in that
    directory). An output cut by a link failure is kept for the job's next attempt, by
    spec.RESUME_KEY (or the job's id). A failure is sent to the starter, which reports it. A file
    of spec.DIRECT_MIN bytes or more (TRANSFER_DIRECT_IO_MIN_MB, in ``ad``) goes around the page cache."""
    direct_min = int(ad.get(spec.DIRECT_MIN, directio.DIRECT_IO_MIN))
    try:
        if direction == "in":
            try:
                entries = spec.input_entries(ad)
            except stream.TransferError as error:
                await stream.send_error(ep, error)
                return
            await stream.send_files(ep, entries, direct_min=direct_min)
        else:
            await ep.send("ready", **stream.OPENING)  # (this end answers where a file starts; its digests)
            to = ad.get(spec.CHECKPOINT_TO)
            if isinstance(to, str) and to:  # a checkpoint: every file lands under its own name there
                place = functools.partial(_below, to)
            key = str(ad.get(spec.RESUME_KEY) or f"{ad.get('ClusterId')}.{ad.get('ProcId')}") + f"/{direction}"
            await stream.receive_files(ep, stream.DirectorySink(place or (lambda name: spec.output_destination(ad, name)),
                                                                key=key, direct_min=direct_min))
    except stream.TransferError:
        pass  # the starter hears of it (an error message, or silence) and reports it with the job


def _below(root: str, name: str) -> str:
    return os.path.join(root, name)
