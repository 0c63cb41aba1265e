"""File transfer over the bus: a job's input sandbox from its owner's shadow to the starter, its
output sandbox back (HTCondor's should_transfer_files and friends).

- ``spec``: which files a job's sandbox holds, read from its ad (TransferInput, TransferOutput,
  TransferOutputRemaps, TransferExecutable, In/Out/Err, Iwd) and where each lands.
- ``stream``: a set of files as a stream of chunks between two ends, each with an exclusive queue
  of its own on the broker, with a bounded window of unacknowledged chunks and a sha256 per file.

Both modules import only the standard library and aio-pika: the owner's shadow, which runs as the
job's owner and knows nothing else of gridbus, imports them too.
"""

# The schedd's OpenTransfer answers Status.USER + OPEN_REFUSED when the job's owner's shadow cannot
# take the transfer (no account, cannot start, cannot load the transfer code): the job is held.
# Any other refusal (the claim no longer runs the job, no answer) sends the job back to Idle.
OPEN_REFUSED = 1
