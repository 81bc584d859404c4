//! The Slurm mode (docs/launcher.md, "Slurm"): inside an allocation
//! (`salloc`, `sbatch`), `sperli run -- PROGRAM` takes its hosts from
//! `SLURM_JOB_NODELIST`, their slots from `SLURM_TASKS_PER_NODE` and `-n`
//! from `SLURM_NTASKS`, and starts each rank as one job step:
//! `srun -N1 -n1 --overlap -w NODE`, with the rank's job description on
//! that step's stdin.
//!
//! A rank's host in the job description is the node's address as Slurm
//! knows it (`NodeAddr` from `scontrol show node`; on most clusters the
//! node name itself), so ranks and certificates use the address the node
//! is reached at.

use std::collections::HashMap;
use std::process::{Command, Stdio};

/// The most host names one node list may expand to.
pub const MAX_NODES: usize = 65_536;

/// Why a Slurm variable cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SlurmError {
    /// A node list that is not Slurm's host list syntax.
    #[error("{var}={value:?} is not a Slurm node list ({why})")]
    NodeList {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What is wrong.
        why: &'static str,
    },
    /// A count list (`2(x3),1`) that does not parse.
    #[error("{var}={value:?} is not a list of counts like 2(x3),1")]
    Counts {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
    },
    /// `SLURM_NTASKS` is not a positive number.
    #[error("SLURM_NTASKS={0:?} is not a positive number")]
    Tasks(String),
    /// The task counts do not match the nodes.
    #[error("SLURM_TASKS_PER_NODE gives {counts} counts for {nodes} nodes")]
    CountMismatch {
        /// Nodes in the list.
        nodes: usize,
        /// Counts given.
        counts: usize,
    },
}

fn nodelist_error(value: &str, why: &'static str) -> SlurmError {
    SlurmError::NodeList {
        var: "SLURM_JOB_NODELIST",
        value: value.to_owned(),
        why,
    }
}

/// Splits at commas outside brackets.
fn top_level_items(s: &str) -> Result<Vec<&str>, &'static str> {
    let mut items = Vec::new();
    let mut depth = 0u32;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '[' if depth == 0 => depth = 1,
            '[' => return Err("nested brackets"),
            ']' if depth == 1 => depth = 0,
            ']' => return Err("unbalanced brackets"),
            ',' if depth == 0 => {
                items.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err("unbalanced brackets");
    }
    items.push(&s[start..]);
    Ok(items)
}

/// The numbers of one bracket's range list (`1-3,07,10-11`), each with
/// its zero-padded width.
fn ranges(list: &str, budget: usize) -> Result<Vec<String>, &'static str> {
    let mut out = Vec::new();
    for part in list.split(',') {
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        let digits =
            |t: &str| !t.is_empty() && t.len() <= 9 && t.bytes().all(|b| b.is_ascii_digit());
        if !digits(lo) || !digits(hi) {
            return Err("a range is not digits or digits-digits");
        }
        let width = lo.len();
        let (a, b): (u64, u64) = (lo.parse().unwrap_or(0), hi.parse().unwrap_or(0));
        if a > b {
            return Err("a range runs backwards");
        }
        if (b - a) as usize >= budget.saturating_sub(out.len()) {
            return Err("more than 65536 nodes");
        }
        for n in a..=b {
            out.push(format!("{n:0width$}"));
        }
    }
    Ok(out)
}

/// Expands a Slurm host list: `n[1-3],gpu[01-02]-ib,login` gives `n1 n2
/// n3 gpu01-ib gpu02-ib login`; several bracket groups in one name give
/// every combination, in order.
pub fn expand_nodelist(value: &str) -> Result<Vec<String>, SlurmError> {
    let err = |why| nodelist_error(value, why);
    let mut out: Vec<String> = Vec::new();
    for item in top_level_items(value.trim()).map_err(err)? {
        if item.is_empty() {
            return Err(err("an empty name"));
        }
        // Literal pieces and bracket groups, left to right.
        let mut names = vec![String::new()];
        let mut rest = item;
        while !rest.is_empty() {
            match rest.find('[') {
                Some(open) => {
                    let close = rest[open..]
                        .find(']')
                        .ok_or_else(|| err("unbalanced brackets"))?
                        + open;
                    let lit = &rest[..open];
                    let nums = ranges(&rest[open + 1..close], MAX_NODES).map_err(err)?;
                    if names.len().saturating_mul(nums.len()) > MAX_NODES - out.len() {
                        return Err(err("more than 65536 nodes"));
                    }
                    names = names
                        .iter()
                        .flat_map(|n| nums.iter().map(move |x| format!("{n}{lit}{x}")))
                        .collect();
                    rest = &rest[close + 1..];
                }
                None => {
                    for n in &mut names {
                        n.push_str(rest);
                    }
                    rest = "";
                }
            }
        }
        out.extend(names);
    }
    Ok(out)
}

/// Expands a count list as Slurm writes `SLURM_TASKS_PER_NODE`:
/// `2(x3),1` gives `[2, 2, 2, 1]`.
pub fn expand_counts(var: &'static str, value: &str) -> Result<Vec<u32>, SlurmError> {
    let err = || SlurmError::Counts {
        var,
        value: value.to_owned(),
    };
    let mut out = Vec::new();
    for part in value.trim().split(',') {
        let (count, times) = match part.split_once("(x") {
            Some((c, t)) => (c, t.strip_suffix(')').ok_or_else(err)?),
            None => (part, "1"),
        };
        let count: u32 = count.parse().map_err(|_| err())?;
        let times: usize = times.parse().map_err(|_| err())?;
        if count == 0 || times == 0 || out.len() + times > MAX_NODES {
            return Err(err());
        }
        out.extend(std::iter::repeat_n(count, times));
    }
    Ok(out)
}

/// A Slurm allocation as its environment describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allocation {
    /// The job id.
    pub job_id: String,
    /// Node names, in the allocation's order.
    pub nodes: Vec<String>,
    /// Tasks (slots) per node.
    pub tasks_per_node: Vec<u32>,
    /// `SLURM_NTASKS` (or the sum of the slots).
    pub ntasks: u32,
}

impl Allocation {
    /// The allocation this process runs in, from `get` (the environment);
    /// `None` outside one (no `SLURM_JOB_ID` or no node list).
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Result<Option<Self>, SlurmError> {
        let Some(job_id) = get("SLURM_JOB_ID").or_else(|| get("SLURM_JOBID")) else {
            return Ok(None);
        };
        let Some(list) = get("SLURM_JOB_NODELIST").or_else(|| get("SLURM_NODELIST")) else {
            return Ok(None);
        };
        let nodes = expand_nodelist(&list)?;
        let tasks_per_node = match get("SLURM_TASKS_PER_NODE") {
            Some(v) => expand_counts("SLURM_TASKS_PER_NODE", &v)?,
            None => vec![1; nodes.len()],
        };
        if tasks_per_node.len() != nodes.len() {
            return Err(SlurmError::CountMismatch {
                nodes: nodes.len(),
                counts: tasks_per_node.len(),
            });
        }
        let ntasks = match get("SLURM_NTASKS").or_else(|| get("SLURM_NPROCS")) {
            Some(v) => match v.trim().parse::<u32>() {
                Ok(n) if n > 0 => n,
                _ => return Err(SlurmError::Tasks(v)),
            },
            None => tasks_per_node.iter().sum(),
        };
        Ok(Some(Self {
            job_id,
            nodes,
            tasks_per_node,
            ntasks,
        }))
    }
}

/// `NodeName` to `NodeAddr` from the output of `scontrol show node -o`
/// (one node per line, `Key=Value` words).
pub fn parse_node_addrs(text: &str) -> HashMap<String, String> {
    let mut out = HashMap::new();
    for line in text.lines() {
        let mut name = None;
        let mut addr = None;
        for word in line.split_whitespace() {
            if let Some(v) = word.strip_prefix("NodeName=") {
                name = Some(v);
            } else if let Some(v) = word.strip_prefix("NodeAddr=") {
                addr = Some(v);
            }
        }
        if let (Some(n), Some(a)) = (name, addr) {
            out.insert(n.to_owned(), a.to_owned());
        }
    }
    out
}

/// The address of each node (`scontrol show node -o`); a node Slurm
/// gives no address for keeps its name.
pub fn node_addrs(nodes: &[String]) -> Vec<String> {
    let known = Command::new("scontrol")
        .args(["show", "node", "-o", &nodes.join(",")])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| parse_node_addrs(&String::from_utf8_lossy(&o.stdout)))
        .unwrap_or_default();
    nodes
        .iter()
        .map(|n| known.get(n).cloned().unwrap_or_else(|| n.clone()))
        .collect()
}

/// The arguments of `srun` for one rank on `node` (before the program):
/// one node, one task, sharing the allocation's resources with the other
/// steps (`--overlap`: without it the steps queue one after another), the
/// whole environment exported, no MPI plug-in, the step named after the
/// rank.
pub fn srun_args(node: &str, rank: u32) -> Vec<String> {
    vec![
        "-N1".into(),
        "-n1".into(),
        "--overlap".into(),
        "--export=ALL".into(),
        "--mpi=none".into(),
        format!("--job-name=sperli-rank-{rank}"),
        "-w".into(),
        node.into(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_expansions() {
        assert_eq!(
            expand_nodelist("n[1-3],x").unwrap(),
            ["n1", "n2", "n3", "x"]
        );
        assert_eq!(
            expand_nodelist("r[1-2]n[08-9]").unwrap(),
            ["r1n08", "r1n09", "r2n08", "r2n09"]
        );
        assert_eq!(
            expand_counts("SLURM_TASKS_PER_NODE", "2(x3),1").unwrap(),
            [2, 2, 2, 1]
        );
    }

    #[test]
    fn node_lists() {
        let ok = |s: &str| expand_nodelist(s).unwrap();
        assert_eq!(ok("n1"), ["n1"]);
        assert_eq!(ok("n[1-3]"), ["n1", "n2", "n3"]);
        assert_eq!(ok("gpu[08-10,12]"), ["gpu08", "gpu09", "gpu10", "gpu12"]);
        assert_eq!(ok("a[1-2]-ib,b"), ["a1-ib", "a2-ib", "b"]);
        assert_eq!(
            ok("node-1.example,10.0.0.[1-2]"),
            ["node-1.example", "10.0.0.1", "10.0.0.2"]
        );
        for bad in [
            "",
            "n[1-",
            "n[1-3",
            "n]1[",
            "n[a-b]",
            "n[3-1]",
            "n[[1]]",
            "a,,b",
            "n[1-99999999]",
            "x[1-300]y[1-300]",
        ] {
            assert!(expand_nodelist(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn counts() {
        assert_eq!(expand_counts("V", "4,1(x2)").unwrap(), [4, 1, 1]);
        assert_eq!(expand_counts("V", "3").unwrap(), [3]);
        for bad in ["", "0", "2(x0)", "2(x", "x", "2(y3)", "-1"] {
            assert!(expand_counts("V", bad).is_err(), "{bad}");
        }
    }

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn allocations() {
        assert_eq!(Allocation::from_env(env(&[])).unwrap(), None);
        assert_eq!(
            Allocation::from_env(env(&[("SLURM_JOB_ID", "7")])).unwrap(),
            None
        );
        let a = Allocation::from_env(env(&[
            ("SLURM_JOB_ID", "7"),
            ("SLURM_JOB_NODELIST", "n[1-3]"),
            ("SLURM_TASKS_PER_NODE", "4,1(x2)"),
            ("SLURM_NTASKS", "6"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(a.nodes, ["n1", "n2", "n3"]);
        assert_eq!(a.tasks_per_node, [4, 1, 1]);
        assert_eq!(a.ntasks, 6);
        let a = Allocation::from_env(env(&[("SLURM_JOBID", "7"), ("SLURM_NODELIST", "n[1-2]")]))
            .unwrap()
            .unwrap();
        assert_eq!((a.tasks_per_node.clone(), a.ntasks), (vec![1, 1], 2));
        assert!(matches!(
            Allocation::from_env(env(&[
                ("SLURM_JOB_ID", "7"),
                ("SLURM_JOB_NODELIST", "n[1-3]"),
                ("SLURM_TASKS_PER_NODE", "2"),
            ])),
            Err(SlurmError::CountMismatch {
                nodes: 3,
                counts: 1
            })
        ));
        assert!(matches!(
            Allocation::from_env(env(&[
                ("SLURM_JOB_ID", "7"),
                ("SLURM_JOB_NODELIST", "n1"),
                ("SLURM_NTASKS", "0"),
            ])),
            Err(SlurmError::Tasks(_))
        ));
    }

    #[test]
    fn addresses_from_scontrol() {
        let text = "NodeName=n1 Arch=x86_64 NodeAddr=127.0.0.2 NodeHostName=vm\nNodeName=n2 NodeAddr=127.0.0.3\n";
        let m = parse_node_addrs(text);
        assert_eq!(m["n1"], "127.0.0.2");
        assert_eq!(m["n2"], "127.0.0.3");
        assert_eq!(m.len(), 2);
    }
}
