"""The job this process joined: set once by ``environment._start`` (the
package's world Comm and the handles of COMM_WORLD and COMM_SELF) and the
environment's flags."""

from .constants import THREAD_SERIALIZED

world = None  # the package's world Comm
world_h = None  # COMM_WORLD's _Handle
self_h = None  # COMM_SELF's _Handle (None if its Split failed)
flags = {"initialized": False, "finalized": False, "thread": THREAD_SERIALIZED}


def world_rank():
    """This process's rank in the job (0 before the job is joined)."""
    return world.Get_rank() if world is not None else 0
