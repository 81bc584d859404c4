//! Where a run's ranks may go and how each reaches its host: the Slurm
//! allocation the launcher runs in (inside one, without `-H`,
//! `--hostfile` or `--no-slurm`; every rank an `srun` step), else the host
//! list (default `localhost`; loopback hosts started directly, others
//! through the remote shell, or all of them with `--rsh-local`).

use std::path::Path;

use sperli_wire::refused_hosts::RefusedHosts;

use crate::hosts::{parse_host_list, parse_hostfile, HostSpec};
use crate::slurm::{node_addrs, Allocation};
use crate::spawn::Via;
use crate::supervise::is_local;

/// What the command line says about hosts.
#[derive(Debug, Clone, Copy, Default)]
pub struct HostChoice<'a> {
    /// `-H`.
    pub hosts: Option<&'a str>,
    /// `--hostfile`.
    pub hostfile: Option<&'a Path>,
    /// `--no-slurm`.
    pub no_slurm: bool,
    /// `--rsh-local`.
    pub rsh_local: bool,
}

/// Where a job may run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hosts {
    /// The hosts, refused ones already refused.
    pub specs: Vec<HostSpec>,
    /// How a rank on each host is started.
    pub vias: Vec<Via>,
    /// The rank count of the Slurm allocation (`SLURM_NTASKS`).
    pub allocation_n: Option<u32>,
}

/// The hosts of a run (see the module docs); every host checked against
/// `policy`.
pub fn hosts_of(choice: &HostChoice, policy: &RefusedHosts) -> Result<Hosts, String> {
    let listed = choice.hosts.is_some() || choice.hostfile.is_some();
    let alloc = if listed || choice.no_slurm {
        None
    } else {
        Allocation::from_env(|k| std::env::var(k).ok()).map_err(|e| e.to_string())?
    };
    if let Some(a) = alloc {
        let list = node_addrs(&a.nodes).join(",");
        let mut specs = parse_host_list(&list, policy).map_err(|e| e.to_string())?;
        for (h, slots) in specs.iter_mut().zip(&a.tasks_per_node) {
            h.slots = *slots;
        }
        let vias = a
            .nodes
            .iter()
            .map(|node| Via::Srun { node: node.clone() })
            .collect();
        return Ok(Hosts {
            specs,
            vias,
            allocation_n: Some(a.ntasks),
        });
    }
    let specs = match (choice.hosts, choice.hostfile) {
        (Some(list), _) => parse_host_list(list, policy),
        (None, Some(file)) => match std::fs::read_to_string(file) {
            Ok(text) => parse_hostfile(&text, policy),
            Err(e) => return Err(format!("cannot read hostfile {}: {e}", file.display())),
        },
        (None, None) => parse_host_list("localhost", policy),
    }
    .map_err(|e| e.to_string())?;
    let vias = specs
        .iter()
        .map(|h| {
            if is_local(&h.host) && !choice.rsh_local {
                Via::Direct
            } else {
                Via::Rsh
            }
        })
        .collect();
    Ok(Hosts {
        specs,
        vias,
        allocation_n: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts_are_direct_unless_rsh_local() {
        let p = RefusedHosts::builtin();
        let choice = HostChoice {
            hosts: Some("127.0.0.2,node-b.example"),
            ..HostChoice::default()
        };
        let h = hosts_of(&choice, &p).unwrap();
        assert_eq!(h.vias, [Via::Direct, Via::Rsh]);
        assert_eq!(h.allocation_n, None);
        let h = hosts_of(
            &HostChoice {
                rsh_local: true,
                ..choice
            },
            &p,
        )
        .unwrap();
        assert_eq!(h.vias, [Via::Rsh, Via::Rsh]);
    }
}
