"""Groups: ordered lists of job ranks."""

from . import state as _state
from .constants import IDENT, PROC_NULL, SIMILAR, UNDEFINED, UNEQUAL
from .errors import ERR_ARG, ERR_GROUP, ERR_RANK, Exception
from .handles import _Handled


class Group(_Handled):
    """A group: an ordered list of job ranks (set operations on the list;
    no message is sent)."""

    _slot = "_g"

    @classmethod
    def _of(cls, ranks):
        return _Handled._of.__func__(cls, tuple(ranks))

    def _ranks(self):
        if self._g is None:
            raise Exception(ERR_GROUP, "GROUP_NULL")
        return self._g

    def Get_size(self):
        """Number of members."""
        return len(self._ranks())

    size = property(Get_size)

    def Get_rank(self):
        """This process's rank in it, or UNDEFINED."""
        me = _state.world_rank()
        g = self._ranks()
        return g.index(me) if me in g else UNDEFINED

    rank = property(Get_rank)

    def Translate_ranks(self, ranks=None, group=None):
        """The ranks in `group` of `ranks` of this group."""
        g1, ranks1, group2 = self._ranks(), ranks, group
        if ranks1 is None:
            ranks1 = range(len(g1))
        out = []
        for r in ranks1:
            if r == PROC_NULL:
                out.append(PROC_NULL)
                continue
            if not 0 <= r < len(g1):
                raise Exception(ERR_RANK)
            if group2 is None:
                out.append(g1[r])
            else:
                g2 = group2._ranks()
                out.append(g2.index(g1[r]) if g1[r] in g2 else UNDEFINED)
        return out

    def Compare(self, other):
        """IDENT, SIMILAR or UNEQUAL."""
        a, b = self._ranks(), other._ranks()
        if a == b:
            return IDENT
        return SIMILAR if sorted(a) == sorted(b) else UNEQUAL

    compare = Compare

    @staticmethod
    def Union(group1, group2):
        """group1's members, then group2's others."""
        a, b = group1._ranks(), group2._ranks()
        return Group._of(list(a) + [r for r in b if r not in a])

    @staticmethod
    def Intersection(group1, group2):
        """group1's members also in group2."""
        b = group2._ranks()
        return Group._of([r for r in group1._ranks() if r in b])

    Intersect = Intersection

    @staticmethod
    def Difference(group1, group2):
        """group1's members not in group2."""
        b = group2._ranks()
        return Group._of([r for r in group1._ranks() if r not in b])

    def Incl(self, ranks):
        """The members at `ranks`."""
        g = self._ranks()
        for r in ranks:
            if not 0 <= r < len(g):
                raise Exception(ERR_RANK)
        if len(set(ranks)) != len(ranks):
            raise Exception(ERR_RANK)
        return Group._of([g[r] for r in ranks])

    def Excl(self, ranks):
        """The members not at `ranks`."""
        g = self._ranks()
        for r in ranks:
            if not 0 <= r < len(g):
                raise Exception(ERR_RANK)
        return Group._of([x for i, x in enumerate(g) if i not in set(ranks)])

    @staticmethod
    def _range(ranges):
        out = []
        for first, last, stride in ranges:
            if stride == 0:
                raise Exception(ERR_ARG)
            out.extend(range(first, last + (1 if stride > 0 else -1), stride))
        return out

    def Range_incl(self, ranks):
        """The members in the (first, last, stride) ranges."""
        return self.Incl(self._range(ranks))

    def Range_excl(self, ranks):
        """The members outside the ranges."""
        return self.Excl(self._range(ranks))

    def Dup(self):
        """A copy."""
        return Group._of(self._ranks())

    def Free(self):
        """Frees it (GROUP_EMPTY cannot be freed)."""
        if self._g is None:
            raise Exception(ERR_GROUP)
        self._g = None

    def Create_from_session_pset(self, *a):
        """Not offered."""
        raise NotImplementedError("sessions are not offered by sperli")


Group._family = Group
GROUP_NULL = Group()
GROUP_EMPTY = Group._of(())
