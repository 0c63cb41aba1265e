"""The file-transfer knobs, read by the schedd (for the owner's shadow) and the startd."""

from gridbus.config import knob
from gridbus.transfer.directio import DIRECT_IO_MIN
from gridbus.transfer.stream import STALL_TIMEOUT

knob("TRANSFER_STALL_TIMEOUT", STALL_TIMEOUT,
     "seconds a file transfer may go without a message from its other end before it has failed")
knob("KEEP_SANDBOX_ON_HOLD", False, "keep a job's scratch directory under EXECUTE when the job is held (to look at)")
knob("TRANSFER_OPEN_TIMEOUT", 30.0, "seconds the startd waits for the schedd to open a transfer (OpenTransfer)")
knob("MAX_INLINE_TRANSFER_KB", 256,
     "KiB (1024 bytes) a job's input sandbox, and its output sandbox, may hold to travel inside the activation and the "
     "exit report instead of a transfer of their own (0: every sandbox is streamed)")
knob("TRANSFER_DIRECT_IO_MIN_MB", DIRECT_IO_MIN >> 20,
     "MiB: a transferred file at least this big is written, and read where it is not in the page cache, around the "
     "page cache (O_DIRECT; where the file system refuses it, as usual); 0: every file goes through the cache")
