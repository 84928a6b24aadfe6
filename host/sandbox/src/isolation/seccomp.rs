//! The seccomp filter every sandboxed process runs under: the system calls no MCP server
//! needs and that widen the kernel's attack surface (BPF, userfaultfd, the kernel
//! keyring, ptrace, mounts and namespaces, perf, io_uring, modules, kexec, reboot, swap,
//! process accounting) fail with `EPERM`, so a runtime that probes for them falls back
//! instead of dying; `clone3` fails with `ENOSYS` (its flags sit behind a pointer the
//! filter cannot read), so libc falls back to `clone`, whose namespace flags are refused.
//!
//! bwrap installs the programs (`--add-seccomp-fd`) last, just before it executes the
//! command: its own namespace and mount setup runs before the filter applies. A system
//! call of another architecture (32-bit `int 0x80` on x86-64) kills the process.

use std::collections::BTreeMap;

use seccompiler::{BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule, TargetArch};

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

/// The two BPF programs, as the bytes bwrap reads from `--add-seccomp-fd`: the `EPERM`
/// one and the `ENOSYS` one (for `clone3`).
pub fn programs() -> Result<Vec<Vec<u8>>, String> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(|e| format!("seccomp: {e}"))?;
    let fail = |e: seccompiler::BackendError| format!("seccomp: {e}");
    let mut denied: BTreeMap<i64, Vec<SeccompRule>> = DENIED.iter().map(|(_, nr)| (*nr, Vec::new())).collect();
    let mut clone_rules = Vec::new();
    for flag in NAMESPACE_FLAGS {
        let condition = SeccompCondition::new(0, SeccompCmpArgLen::Qword, SeccompCmpOp::MaskedEq(*flag), *flag).map_err(fail)?;
        clone_rules.push(SeccompRule::new(vec![condition]).map_err(fail)?);
    }
    denied.insert(libc::SYS_clone, clone_rules);
    let eperm = SeccompFilter::new(denied, SeccompAction::Allow, SeccompAction::Errno(libc::EPERM as u32), arch).map_err(fail)?;
    let clone3 = BTreeMap::from([(libc::SYS_clone3, Vec::new())]);
    let enosys = SeccompFilter::new(clone3, SeccompAction::Allow, SeccompAction::Errno(libc::ENOSYS as u32), arch).map_err(fail)?;
    [eperm, enosys].into_iter().map(|filter| BpfProgram::try_from(filter).map(|p| bytes(&p)).map_err(fail)).collect()
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
        assert_eq!(programs.len(), 2);
        assert!(programs.iter().all(|p| !p.is_empty() && p.len() % 8 == 0));
    }
}
