//! The helper's seccomp filters (compiled by `seccompiler`, pure Rust). Everything is
//! allowed except what is listed here, which fails with `EPERM`, so a program sees a clean
//! error instead of being killed:
//!
//! - `socket` / `socketpair` for any family but `AF_UNIX` (no network of any kind);
//! - kernel attack surface and escape routes: `ptrace`, `process_vm_readv/writev`,
//!   `mount` and the new mount API, `umount2`, `pivot_root`, `chroot`, `unshare`, `setns`,
//!   the key ring (`keyctl`, `add_key`, `request_key`), `bpf`, `perf_event_open`,
//!   `userfaultfd`, `io_uring_*`, `kexec_*`, module loading, `reboot`, `swapon/off`,
//!   `open_by_handle_at`, `acct`, `quotactl`, `syslog`, `vhangup`, `kcmp`, `pidfd_getfd`;
//! - `personality` other than a query or `PER_LINUX` (no `ADDR_NO_RANDOMIZE` and the like);
//! - `clone` with any namespace flag, and `clone3` with `ENOSYS` (its flags sit in memory a
//!   filter cannot read; glibc then falls back to `clone`, whose flags are checked).
//!
//! Calls of another architecture's ABI (i386 on x86_64) kill the process (seccompiler's
//! architecture check), and on x86_64 the x32 ABI's numbers are refused as well.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, sock_filter,
};

/// Syscalls refused whatever their arguments.
const DENIED: &[libc::c_long] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_open_tree,
    libc::SYS_move_mount,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_reboot,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_open_by_handle_at,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_syslog,
    libc::SYS_vhangup,
    libc::SYS_kcmp,
    libc::SYS_pidfd_getfd,
];

/// `clone` flags that create namespaces (`CLONE_NEWTIME` exists only for `clone3` and
/// `unshare`; in `clone` its bit is part of the exit signal).
const NAMESPACE_FLAGS: &[u64] = &[
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWCGROUP as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
];

/// `personality(0xffffffff)` only reads the persona.
const PERSONALITY_QUERY: u64 = 0xffff_ffff;

/// The filters, in the order they are installed (any of them refusing a call refuses it).
pub fn filters() -> Result<Vec<BpfProgram>, String> {
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|e| format!("seccomp: {e:?}"))?;
    let cond = |arg: u8, len: SeccompCmpArgLen, op: SeccompCmpOp, value: u64| {
        SeccompCondition::new(arg, len, op, value).map_err(|e| format!("seccomp: {e}"))
    };
    let rule = |conditions: Vec<SeccompCondition>| {
        SeccompRule::new(conditions).map_err(|e| format!("seccomp: {e}"))
    };
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        DENIED.iter().map(|nr| (*nr, Vec::new())).collect();
    let not_unix = || -> Result<Vec<SeccompRule>, String> {
        Ok(vec![rule(vec![cond(
            0,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Ne,
            libc::AF_UNIX as u64,
        )?])?])
    };
    rules.insert(libc::SYS_socket, not_unix()?);
    rules.insert(libc::SYS_socketpair, not_unix()?);
    rules.insert(
        libc::SYS_clone,
        NAMESPACE_FLAGS
            .iter()
            .map(|flag| {
                rule(vec![cond(
                    0,
                    SeccompCmpArgLen::Qword,
                    SeccompCmpOp::MaskedEq(*flag),
                    *flag,
                )?])
            })
            .collect::<Result<_, _>>()?,
    );
    rules.insert(
        libc::SYS_personality,
        vec![rule(vec![
            cond(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, 0)?,
            cond(
                0,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::Ne,
                PERSONALITY_QUERY,
            )?,
        ])?],
    );
    let compile = |rules: BTreeMap<i64, Vec<SeccompRule>>, errno: i32| {
        SeccompFilter::new(
            rules,
            SeccompAction::Allow,
            SeccompAction::Errno(errno as u32),
            arch,
        )
        .and_then(BpfProgram::try_from)
        .map_err(|e| format!("seccomp: {e}"))
    };
    let mut filters = Vec::with_capacity(3);
    if cfg!(target_arch = "x86_64") {
        filters.push(x32_refused());
    }
    filters.push(compile(rules, libc::EPERM)?);
    filters.push(compile(
        BTreeMap::from([(libc::SYS_clone3, Vec::new())]),
        libc::ENOSYS,
    )?);
    Ok(filters)
}

/// On x86_64: syscall numbers with the x32 bit (0x40000000) fail with EPERM, so the x32 ABI
/// is no way around the other filters' numbers.
fn x32_refused() -> BpfProgram {
    const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
    const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
    const JGE_K: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
    const RET_K: u16 = 0x06; // BPF_RET | BPF_K
    const AUDIT_ARCH_X86_64: u32 = 62 | 0x8000_0000 | 0x4000_0000;
    const X32_SYSCALL_BIT: u32 = 0x4000_0000;
    let op = |code, jt, jf, k| sock_filter { code, jt, jf, k };
    vec![
        op(LD_W_ABS, 0, 0, 4), // seccomp_data.arch
        op(JEQ_K, 0, 3, AUDIT_ARCH_X86_64),
        op(LD_W_ABS, 0, 0, 0), // seccomp_data.nr
        op(JGE_K, 0, 1, X32_SYSCALL_BIT),
        op(RET_K, 0, 0, 0x0005_0000 | libc::EPERM as u32), // SECCOMP_RET_ERRNO
        op(RET_K, 0, 0, 0x7fff_0000),                      // SECCOMP_RET_ALLOW
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filters_compile_for_this_architecture() {
        let filters = filters().unwrap();
        assert!(filters.len() >= 2);
        assert!(filters.iter().all(|f| !f.is_empty() && f.len() < 4096));
    }
}
