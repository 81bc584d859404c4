"""Cartesian topologies (mpi4py's ``Create_cart``, ``Cartcomm``,
``Compute_dims``): the grid is sperli-collective's ``cart`` module, bound
in ``sperli._sperli`` (``Comm.Create_cart``, ``Comm.Cart_sub`` and the
local ``cart_*`` functions). A Cartesian communicator's handle keeps its
grid (``_Handle.topo``: ``("cart", dims, periods)``). Graph and
distributed-graph topologies are not offered (docs/python.md)."""

from .. import _sperli as _s
from .constants import PROC_NULL

CART = 2
GRAPH = 1
DIST_GRAPH = 3


def _flags(periods, n):
    """`periods` as n bools (None: none periodic); ValueError on a length
    other than the dimensions' (mpi4py's check)."""
    if periods is None:
        return [False] * n
    if isinstance(periods, bool):
        return [periods] * n
    p = [bool(x) for x in periods]
    if len(p) != n:
        raise ValueError(f"{len(p)} periods for {n} dimensions")
    return p


def _ints(values):
    return [int(v) for v in values]


def Compute_dims(nnodes, dims):
    """``MPI_Dims_create``: `dims` (a count of dimensions or a list with
    the fixed extents, 0 where free) filled with a balanced factorisation
    of `nnodes`."""
    dims = [0] * int(dims) if isinstance(dims, int) else _ints(dims)
    return _s.dims_create(int(nnodes), dims)


def _create_cart(comm, dims, periods=None, reorder=False):
    """Intracomm.Create_cart: the Cartcomm of the grid (COMM_NULL beyond
    its places)."""
    from .comm import Cartcomm
    dims = _ints(dims)
    periods = _flags(periods, len(dims))
    h = comm._handle()
    c = h.c.Create_cart(dims, periods, bool(reorder))
    if c is None:
        return Cartcomm()
    # Its members: this communicator's first ranks, in their order.
    new = comm._new(c, h.members[:c.Get_size()], Cartcomm)
    new._h.topo = ("cart", dims, periods)
    return new


def _cart_map(comm, dims, periods=None):
    """Intracomm.Cart_map: this rank's place in the grid (ranks keep
    their order), UNDEFINED beyond it."""
    from .constants import UNDEFINED
    dims = _ints(dims)
    _flags(periods, len(dims))
    n = 1
    for d in dims:
        n *= d
    rank = comm.Get_rank()
    return rank if rank < n else UNDEFINED


class _Cart:
    """The calls of a Cartesian communicator (mixed into Cartcomm)."""

    def _grid(self):
        topo = self._handle().topo
        return topo[1], topo[2]

    def Get_dim(self):
        """The number of dimensions."""
        return len(self._grid()[0])

    dim = ndim = property(Get_dim)

    def Get_topo(self):
        """(dims, periods, coords) of this rank."""
        dims, periods = self._grid()
        return (list(dims), list(periods), self.Get_coords(self.Get_rank()))

    topo = property(Get_topo)
    dims = property(lambda self: list(self._grid()[0]), doc="The extents.")
    periods = property(lambda self: list(self._grid()[1]), doc="Which dimensions are periodic.")
    coords = property(lambda self: self.Get_coords(self.Get_rank()), doc="This rank's coordinates.")

    def Get_cart_rank(self, coords):
        """The rank at `coords` (periodic dimensions wrap)."""
        dims, periods = self._grid()
        return _s.cart_rank(dims, periods, _ints(coords))

    def Get_coords(self, rank):
        """The coordinates of `rank`."""
        dims, periods = self._grid()
        return _s.cart_coords(dims, periods, int(rank))

    def Shift(self, direction, disp):
        """(source, dest): the ranks `disp` places back and forth along
        `direction` (PROC_NULL past a non-periodic edge)."""
        dims, periods = self._grid()
        src, dst = _s.cart_shift(dims, periods, self.Get_rank(), int(direction), int(disp))
        return (PROC_NULL if src is None else src, PROC_NULL if dst is None else dst)

    def Sub(self, remain_dims):
        """The sub-grid of the ranks that share this rank's coordinates in
        the dimensions `remain_dims` drops (collective)."""
        dims, periods = self._grid()
        remain = [bool(x) for x in remain_dims]
        h = self._handle()
        c = h.c.Cart_sub(dims, periods, remain)
        sub_dims, sub_periods = _s.cart_sub_grid(dims, periods, remain)
        # Its members: the ranks whose coordinates in the dropped
        # dimensions are this rank's, in their order (the split's key).
        mine = self.Get_coords(self.Get_rank())
        members = [m for r, m in enumerate(h.members)
                   if all(keep or a == b for keep, a, b in zip(remain, self.Get_coords(r), mine))]
        new = self._new(c, members, type(self))
        new._h.topo = ("cart", sub_dims, sub_periods)
        return new

    def _neighbors(self):
        out = []
        for i in range(self.Get_dim()):
            out.extend(self.Shift(i, 1))
        return out

    indegree = outdegree = property(lambda self: 2 * self.Get_dim(), doc="2 per dimension.")
    inedges = outedges = property(_neighbors, doc="Per dimension: the ranks at -1 and +1.")
    inoutedges = property(lambda self: (self._neighbors(), self._neighbors()),
                          doc="(inedges, outedges).")

    def Get_topology(self):
        """CART."""
        self._handle()
        return CART

    topology = property(Get_topology)
    is_topo = property(lambda self: True)
