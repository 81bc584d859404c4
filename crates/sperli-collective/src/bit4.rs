//! HELLO feature bit 4 in the calls that reduce (protocol §17): the one
//! place where a call's element type and reduction are checked before
//! anything is sent, with the table of §8.3 or §17.2 and the bit.

use sperli_wire::element::{ElementType, Reduction};
use sperli_wire::error::ArgumentError;
use sperli_wire::limits::FEATURE_ELEMENT_TYPES;
use sperli_wire::reduce::check_args;

use crate::comm::Comm;
use crate::peers::Peers;

impl<L: Peers> Comm<L> {
    /// Whether the job negotiated feature bit 4: every rank announced it
    /// (protocol §7.1.1, §17.1).
    pub(crate) fn bit4(&self) -> bool {
        self.features & FEATURE_ELEMENT_TYPES != 0
    }

    /// The before-send checks of a call that reduces `len` bytes of `t`
    /// with `r` (protocol §8.4), every failure H1618 on every rank:
    ///
    /// - an element type of code 7..=17 or a reduction of code 11..=13
    ///   without bit 4 on every rank (protocol §17.1):
    ///   [`ArgumentError::WithoutBit4`]; the frames of v1 are then never
    ///   sent with such a code;
    /// - a user-defined reduction (code 13) in a call that folds with a
    ///   built-in one: [`ArgumentError::Reduction`] (protocol §17.4: the
    ///   program's function folds it, not this crate);
    /// - a refused pair (the tables of §8.3 and §17.2) or data that is not
    ///   a whole number of elements ([`check_args`]).
    pub(crate) fn check_reduction(
        &self,
        len: usize,
        t: ElementType,
        r: Reduction,
    ) -> Result<(), ArgumentError> {
        if (t.needs_bit4() || r.needs_bit4()) && !self.bit4() {
            return Err(ArgumentError::WithoutBit4 {
                element_type: t.name(),
                reduction: r.name(),
            });
        }
        if r == Reduction::User {
            return Err(ArgumentError::Reduction { got: r.code() });
        }
        check_args(len, t, r)
    }

    /// The before-send checks of a call that folds `len` bytes of `t`
    /// with a user-defined reduction (code 13, protocol §17.4), H1618 on
    /// every rank: without bit 4 on every rank
    /// [`ArgumentError::WithoutBit4`] (§17.1); data that is not a whole
    /// number of elements ([`check_args`]; every type takes code 13).
    pub(crate) fn check_user_reduction(
        &self,
        len: usize,
        t: ElementType,
    ) -> Result<(), ArgumentError> {
        if !self.bit4() {
            return Err(ArgumentError::WithoutBit4 {
                element_type: t.name(),
                reduction: Reduction::User.name(),
            });
        }
        check_args(len, t, Reduction::User)
    }
}
