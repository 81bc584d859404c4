//! Checkpoint path names (protocol §9.1:
//! `<dir>/<job>/<epoch>/rank-<n>.ckpt`, `rank-<r>.ckpt.buddy`, `COMMIT`).
//!
//! Pure names: no filesystem access. `<dir>` is the rank's own checkpoint
//! directory (two ranks on one host get two), `<job>` the job id as 32
//! lowercase hex digits, `<epoch>` a decimal number from 1.
//!
//! Every file is first written under [`temp_name`] in the same directory,
//! synced and renamed (protocol §9.4, steps 2 and 4). Temporary
//! names start with `.`, so none of the parsers here ever accepts one as a
//! real file.

use std::path::{Path, PathBuf};

use crate::ids::JobId;

/// The COMMIT file's name in an epoch directory (protocol §9.1).
pub const COMMIT_FILE_NAME: &str = "COMMIT";

const RANK_PREFIX: &str = "rank-";
const RANK_SUFFIX: &str = ".ckpt";
const BUDDY_SUFFIX: &str = ".ckpt.buddy";

/// `<dir>/<job hex>`: the job's directory (protocol §9.1).
pub fn job_dir(dir: impl AsRef<Path>, job: JobId) -> PathBuf {
    dir.as_ref().join(job.to_hex())
}

/// `<dir>/<job hex>/<epoch decimal>`: an epoch's directory (protocol §9.1).
/// Epochs start at 1; epoch 0 ("start from the beginning") has no directory.
pub fn epoch_dir(dir: impl AsRef<Path>, job: JobId, epoch: u64) -> PathBuf {
    job_dir(dir, job).join(epoch.to_string())
}

/// `rank-<n>.ckpt`: rank n's own file (protocol §9.1).
pub fn rank_file_name(rank: u32) -> String {
    format!("{RANK_PREFIX}{rank}{RANK_SUFFIX}")
}

/// `rank-<r>.ckpt.buddy`: the copy of rank r's file that its buddy
/// (r + 1) mod size holds (protocol §9.1).
pub fn buddy_file_name(owner: u32) -> String {
    format!("{RANK_PREFIX}{owner}{BUDDY_SUFFIX}")
}

/// The temporary name a file is written under before its rename into place
/// (protocol §9.4, steps 2 and 4): `.<final_name>.tmp`, in the
/// same directory. A leading `.` and the `.tmp` suffix mean no parser in
/// this module, and no reader looking for `COMMIT`, ever takes it for a real
/// file.
pub fn temp_name(final_name: &str) -> String {
    format!(".{final_name}.tmp")
}

/// Whether `name` is a temporary name made by [`temp_name`].
pub fn is_temp_name(name: &str) -> bool {
    name.strip_prefix('.')
        .and_then(|n| n.strip_suffix(".tmp"))
        .is_some_and(|n| !n.is_empty())
}

/// A canonical decimal: ASCII digits only, no sign, no leading zero (but
/// `0` itself), fits `u64`.
fn parse_canonical_decimal(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.is_empty() || !b.iter().all(u8::is_ascii_digit) || (b.len() > 1 && b[0] == b'0') {
        return None;
    }
    s.parse().ok()
}

/// The epoch of an epoch directory's name (protocol §9.1): decimal, >= 1, no
/// sign, no leading zeros, fits `u64`; anything else is `None`.
pub fn parse_epoch_dir_name(name: &str) -> Option<u64> {
    parse_canonical_decimal(name).filter(|e| *e >= 1)
}

/// The rank of a `rank-<n>.ckpt` name (protocol §9.1): `n` decimal without sign
/// or leading zeros, fits `u32`. A buddy or temporary name is `None`.
pub fn parse_rank_file_name(name: &str) -> Option<u32> {
    let n = name.strip_prefix(RANK_PREFIX)?.strip_suffix(RANK_SUFFIX)?;
    u32::try_from(parse_canonical_decimal(n)?).ok()
}

/// The owner of a `rank-<r>.ckpt.buddy` name (protocol §9.1), as
/// [`parse_rank_file_name`] does for own files.
pub fn parse_buddy_file_name(name: &str) -> Option<u32> {
    let n = name.strip_prefix(RANK_PREFIX)?.strip_suffix(BUDDY_SUFFIX)?;
    u32::try_from(parse_canonical_decimal(n)?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const JOB: JobId = JobId([
        0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee,
        0xff,
    ]);

    #[test]
    fn paths() {
        assert_eq!(
            job_dir("/ck", JOB),
            PathBuf::from("/ck/00112233445566778899aabbccddeeff")
        );
        assert_eq!(
            epoch_dir(Path::new("/ck"), JOB, 12),
            PathBuf::from("/ck/00112233445566778899aabbccddeeff/12")
        );
        assert_eq!(rank_file_name(0), "rank-0.ckpt");
        assert_eq!(rank_file_name(4095), "rank-4095.ckpt");
        assert_eq!(buddy_file_name(3), "rank-3.ckpt.buddy");
        assert_eq!(COMMIT_FILE_NAME, "COMMIT");
        assert_eq!(temp_name("rank-1.ckpt"), ".rank-1.ckpt.tmp");
        assert_eq!(temp_name(COMMIT_FILE_NAME), ".COMMIT.tmp");
    }

    #[test]
    fn epoch_names() {
        assert_eq!(parse_epoch_dir_name("1"), Some(1));
        assert_eq!(parse_epoch_dir_name("10"), Some(10));
        assert_eq!(parse_epoch_dir_name("18446744073709551615"), Some(u64::MAX));
        for bad in [
            "",
            "0",
            "00",
            "01",
            "+1",
            "-1",
            " 1",
            "1 ",
            "1a",
            "18446744073709551616",
            "1.0",
            ".1.tmp",
        ] {
            assert_eq!(parse_epoch_dir_name(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn rank_names() {
        assert_eq!(parse_rank_file_name("rank-0.ckpt"), Some(0));
        assert_eq!(parse_rank_file_name("rank-4095.ckpt"), Some(4095));
        assert_eq!(parse_rank_file_name("rank-4294967295.ckpt"), Some(u32::MAX));
        assert_eq!(parse_buddy_file_name("rank-7.ckpt.buddy"), Some(7));
        for bad in [
            "rank-.ckpt",
            "rank-01.ckpt",
            "rank-+1.ckpt",
            "rank-4294967296.ckpt",
            "rank-1.ckpt.buddy",
            ".rank-1.ckpt.tmp",
            "rank-1.ckpt.tmp",
            "Rank-1.ckpt",
            "rank-1.CKPT",
            "COMMIT",
        ] {
            assert_eq!(parse_rank_file_name(bad), None, "{bad:?}");
        }
        for bad in [
            "rank-1.ckpt",
            "rank-01.ckpt.buddy",
            ".rank-1.ckpt.buddy.tmp",
            "rank--1.ckpt.buddy",
        ] {
            assert_eq!(parse_buddy_file_name(bad), None, "{bad:?}");
        }
        assert!(is_temp_name(&temp_name("COMMIT")));
        assert!(!is_temp_name("COMMIT"));
        assert!(!is_temp_name(".tmp"));
    }

    proptest! {
        #[test]
        fn prop_round_trip(n in any::<u32>(), e in 1u64..) {
            prop_assert_eq!(parse_rank_file_name(&rank_file_name(n)), Some(n));
            prop_assert_eq!(parse_buddy_file_name(&buddy_file_name(n)), Some(n));
            prop_assert_eq!(parse_rank_file_name(&buddy_file_name(n)), None);
            prop_assert_eq!(parse_buddy_file_name(&rank_file_name(n)), None);
            prop_assert_eq!(parse_epoch_dir_name(&e.to_string()), Some(e));
            prop_assert_eq!(parse_rank_file_name(&temp_name(&rank_file_name(n))), None);
            prop_assert_eq!(parse_epoch_dir_name(&temp_name(&e.to_string())), None);
            let d = epoch_dir("/x", JOB, e);
            prop_assert_eq!(
                d.file_name().and_then(|s| s.to_str()).and_then(parse_epoch_dir_name),
                Some(e)
            );
        }

        #[test]
        fn prop_arbitrary_names_never_panic(s in ".{0,40}") {
            let _ = parse_epoch_dir_name(&s);
            let _ = parse_rank_file_name(&s);
            let _ = parse_buddy_file_name(&s);
            if let Some(e) = parse_epoch_dir_name(&s) {
                prop_assert_eq!(e.to_string(), s.clone());
            }
            if let Some(n) = parse_rank_file_name(&s) {
                prop_assert_eq!(rank_file_name(n), s);
            }
        }
    }
}
