//! The seccomp filter every sandboxed process runs under: the system calls no MCP server
//! needs and that widen the kernel's attack surface (BPF, userfaultfd, the kernel
//! keyring, ptrace, mounts and namespaces, perf, io_uring, modules, kexec, reboot, swap,
//! process accounting) fail with `EPERM`, so a runtime that probes for them falls back
//! instead of dying; `clone3` fails with `ENOSYS` (its flags sit behind a pointer the
//! filter cannot read), so libc falls back to `clone`, whose namespace flags are refused.
//!
//! **Socket families.** `socket` and `socketpair` succeed only for `AF_UNIX`, `AF_INET`,
//! `AF_INET6` (what Python, node and the egress shim use: the shim bridges a loopback TCP
//! port to the proxy's Unix socket) and `AF_NETLINK` with protocol `NETLINK_ROUTE`; every
//! other family fails with `EPERM`. A network namespace confines only the families it
//! owns: `AF_VSOCK` reaches the hypervisor and the machine's vsock ports from any
//! namespace, and `AF_PACKET`, `AF_BLUETOOTH`, `AF_CAN`, `AF_ALG` (the kernel's crypto),
//! `AF_XDP` and the like are kernel surface no server needs. `NETLINK_ROUTE` stays because
//! glibc asks it for the interface addresses (`getaddrinfo` with `AI_ADDRCONFIG`,
//! `if_nameindex`, `getifaddrs`) and it answers only about the sandbox's own network
//! namespace; the other netlink protocols (audit, uevents, netfilter, …) reach host-wide
//! kernel state and are refused.
//!
//! **System calls newer than this list.** A deny-list says nothing about calls added to the
//! kernel after it was written, so a third program answers every system call number above
//! [`HIGHEST_KNOWN`] (the newest this filter was reviewed against, `mseal`) with `ENOSYS`,
//! as a kernel without it would: libc falls back, and a new mount, pidfd or attribute
//! call (`open_tree_attr`, `setxattrat`, `file_setattr`, whatever comes next) is refused
//! until someone reviews it. The same check catches the x32 ABI on x86-64 (numbers with
//! bit 30 set), which the deny-list's numbers would otherwise miss. Newer calls below the
//! cut that mostly widen the kernel's surface (`statmount`, `listmount`) are denied by
//! name.
//!
//! bwrap installs the programs (`--add-seccomp-fd`) last, just before it executes the
//! command: its own namespace and mount setup runs before the filter applies. A system
//! call of another architecture (32-bit `int 0x80` on x86-64) kills the process.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule, TargetArch, sock_filter,
};

/// The highest system call number the filter was reviewed against (`mseal`, Linux 6.10;
/// since Linux 5.1 every architecture numbers new calls alike). Higher numbers fail with
/// `ENOSYS`.
pub const HIGHEST_KNOWN: u32 = 462;
/// `statmount` (Linux 6.8), not yet named by the `libc` crate.
const SYS_STATMOUNT: i64 = 457;
/// `listmount` (Linux 6.8).
const SYS_LISTMOUNT: i64 = 458;

/// The socket families `socket` and `socketpair` may create (`AF_NETLINK` only with
/// [`NETLINK_ROUTE`]).
pub const SOCKET_FAMILIES: &[(&str, i32)] =
    &[("AF_UNIX", libc::AF_UNIX), ("AF_INET", libc::AF_INET), ("AF_INET6", libc::AF_INET6), ("AF_NETLINK", libc::AF_NETLINK)];
/// The one netlink protocol allowed: routes and addresses of the sandbox's own namespace.
const NETLINK_ROUTE: u64 = libc::NETLINK_ROUTE as u64;

/// System calls refused with `EPERM`, by name (for the doctor and the docs).
pub const DENIED: &[(&str, i64)] = &[
    ("bpf", libc::SYS_bpf),
    ("userfaultfd", libc::SYS_userfaultfd),
    ("keyctl", libc::SYS_keyctl),
    ("add_key", libc::SYS_add_key),
    ("request_key", libc::SYS_request_key),
    ("ptrace", libc::SYS_ptrace),
    ("process_vm_readv", libc::SYS_process_vm_readv),
    ("process_vm_writev", libc::SYS_process_vm_writev),
    ("mount", libc::SYS_mount),
    ("umount2", libc::SYS_umount2),
    ("pivot_root", libc::SYS_pivot_root),
    ("move_mount", libc::SYS_move_mount),
    ("open_tree", libc::SYS_open_tree),
    ("fsopen", libc::SYS_fsopen),
    ("fsconfig", libc::SYS_fsconfig),
    ("fsmount", libc::SYS_fsmount),
    ("fspick", libc::SYS_fspick),
    ("mount_setattr", libc::SYS_mount_setattr),
    ("unshare", libc::SYS_unshare),
    ("setns", libc::SYS_setns),
    ("perf_event_open", libc::SYS_perf_event_open),
    ("io_uring_setup", libc::SYS_io_uring_setup),
    ("io_uring_enter", libc::SYS_io_uring_enter),
    ("io_uring_register", libc::SYS_io_uring_register),
    ("kexec_load", libc::SYS_kexec_load),
    ("kexec_file_load", libc::SYS_kexec_file_load),
    ("init_module", libc::SYS_init_module),
    ("finit_module", libc::SYS_finit_module),
    ("delete_module", libc::SYS_delete_module),
    ("reboot", libc::SYS_reboot),
    ("swapon", libc::SYS_swapon),
    ("swapoff", libc::SYS_swapoff),
    ("acct", libc::SYS_acct),
    ("settimeofday", libc::SYS_settimeofday),
    ("clock_settime", libc::SYS_clock_settime),
    ("clock_adjtime", libc::SYS_clock_adjtime),
    ("adjtimex", libc::SYS_adjtimex),
    ("quotactl", libc::SYS_quotactl),
    ("lookup_dcookie", libc::SYS_lookup_dcookie),
    ("name_to_handle_at", libc::SYS_name_to_handle_at),
    ("open_by_handle_at", libc::SYS_open_by_handle_at),
    ("kcmp", libc::SYS_kcmp),
    ("syslog", libc::SYS_syslog),
    ("vhangup", libc::SYS_vhangup),
    ("personality", libc::SYS_personality),
    ("pidfd_getfd", libc::SYS_pidfd_getfd),
    ("fanotify_init", libc::SYS_fanotify_init),
    ("statmount", SYS_STATMOUNT),
    ("listmount", SYS_LISTMOUNT),
];

/// `clone` flags that create namespaces: refused like `unshare`.
const NAMESPACE_FLAGS: &[u64] = &[
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWNET as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWCGROUP as u64,
];

/// The three BPF programs, as the bytes bwrap reads from `--add-seccomp-fd`: the `EPERM`
/// one, the `ENOSYS` one (for `clone3`) and the one refusing numbers above
/// [`HIGHEST_KNOWN`].
pub fn programs() -> Result<Vec<Vec<u8>>, SeccompError> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(SeccompError::Arch)?;
    let fail = SeccompError::Compile;
    let mut denied: BTreeMap<i64, Vec<SeccompRule>> = DENIED.iter().map(|(_, nr)| (*nr, Vec::new())).collect();
    let mut clone_rules = Vec::new();
    for flag in NAMESPACE_FLAGS {
        let condition = SeccompCondition::new(0, SeccompCmpArgLen::Qword, SeccompCmpOp::MaskedEq(*flag), *flag).map_err(fail)?;
        clone_rules.push(SeccompRule::new(vec![condition]).map_err(fail)?);
    }
    denied.insert(libc::SYS_clone, clone_rules);
    let socket_rules = socket_rules().map_err(fail)?;
    denied.insert(libc::SYS_socket, socket_rules.clone());
    denied.insert(libc::SYS_socketpair, socket_rules);
    let eperm = SeccompFilter::new(denied, SeccompAction::Allow, SeccompAction::Errno(libc::EPERM as u32), arch).map_err(fail)?;
    let clone3 = BTreeMap::from([(libc::SYS_clone3, Vec::new())]);
    let enosys = SeccompFilter::new(clone3, SeccompAction::Allow, SeccompAction::Errno(libc::ENOSYS as u32), arch).map_err(fail)?;
    let mut out = [eperm, enosys]
        .into_iter()
        .map(|filter| BpfProgram::try_from(filter).map(|p| bytes(&p)).map_err(fail))
        .collect::<Result<Vec<_>, _>>()?;
    out.push(bytes(&newer_than_known()));
    Ok(out)
}

/// Why the seccomp programs could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SeccompError {
    /// This machine's architecture has no seccomp filter here.
    #[error("seccomp: {0}")]
    Arch(#[source] seccompiler::BackendError),
    /// A program did not compile.
    #[error("seccomp: {0}")]
    Compile(#[source] seccompiler::BackendError),
}

/// The rules under which `socket(family, type, protocol)` (and `socketpair`) is refused:
/// a family not in [`SOCKET_FAMILIES`], or netlink with a protocol other than
/// `NETLINK_ROUTE`. The conditions of a rule must all hold; any rule refuses.
fn socket_rules() -> Result<Vec<SeccompRule>, seccompiler::BackendError> {
    let family = |op, value: i32| SeccompCondition::new(0, SeccompCmpArgLen::Dword, op, value as u64);
    let other_family = SOCKET_FAMILIES.iter().map(|(_, f)| family(SeccompCmpOp::Ne, *f)).collect::<Result<Vec<_>, _>>()?;
    let other_netlink = vec![
        family(SeccompCmpOp::Eq, libc::AF_NETLINK)?,
        SeccompCondition::new(2, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, NETLINK_ROUTE)?,
    ];
    Ok(vec![SeccompRule::new(other_family)?, SeccompRule::new(other_netlink)?])
}

/// `ENOSYS` for every system call number above [`HIGHEST_KNOWN`], written by hand
/// (seccompiler matches single numbers only). It does not check the architecture: the
/// `EPERM` program kills a call of another one.
fn newer_than_known() -> BpfProgram {
    // BPF_LD|BPF_W|BPF_ABS, BPF_JMP|BPF_JGT|BPF_K, BPF_RET|BPF_K (linux/filter.h).
    const LD_W_ABS: u16 = 0x20;
    const JGT_K: u16 = 0x25;
    const RET_K: u16 = 0x06;
    let insn = |code, jt, jf, k| sock_filter { code, jt, jf, k };
    vec![
        // A = seccomp_data.nr
        insn(LD_W_ABS, 0, 0, 0),
        // if A > HIGHEST_KNOWN: skip 0, else skip 1
        insn(JGT_K, 0, 1, HIGHEST_KNOWN),
        insn(RET_K, 0, 0, libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32),
        insn(RET_K, 0, 0, libc::SECCOMP_RET_ALLOW),
    ]
}

/// A program as the kernel's `struct sock_filter` array.
fn bytes(program: &BpfProgram) -> Vec<u8> {
    let mut out = Vec::with_capacity(program.len() * 8);
    for insn in program {
        out.extend_from_slice(&insn.code.to_ne_bytes());
        out.push(insn.jt);
        out.push(insn.jf);
        out.extend_from_slice(&insn.k.to_ne_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_programs_compile() {
        let programs = super::programs().unwrap();
        assert_eq!(programs.len(), 3);
        assert!(programs.iter().all(|p| !p.is_empty() && p.len() % 8 == 0));
    }
}
