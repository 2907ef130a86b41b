//! Intel AMX tiles for the int8 linear layers of [`super::int8`], where the CPU has them.
//!
//! `tdpbusd` multiplies a 16 × 64 tile of u8 by a 16 × 64 tile of i8 (64 k by 16 columns,
//! four k side by side per column: the packing [`super::int8`] already uses) into a 16 × 16
//! tile of i32 in one instruction: 16 384 multiply-adds, where a `vpdpbusd` does 64. The
//! sums are the same exact i32 sums as the VNNI kernel's, so both paths give bit-identical
//! layers (tested), and the zero-point correction and dequantization stay in
//! [`super::int8`].
//!
//! Rust has no stable AMX intrinsics, so the five instructions used (`ldtilecfg`,
//! `tilezero`, `tileloadd`, `tdpbusd`, `tilestored`, and `tilerelease`) are inline
//! assembly. The compiler never allocates tile registers, so their contents survive between
//! the `asm!` blocks of one [`Tiles`]. Linux hands out the tile state only to a process
//! that asks (`arch_prctl(ARCH_REQ_XCOMP_PERM)`); without that the first tile instruction
//! faults, so [`available`] asks once and says no when refused. `DOCCHAT_EMBED_AMX=0` turns
//! the path off (to compare it with the VNNI kernel).
//!
//! Tile registers: a block of 32 rows × 32 columns at a time, `tmm0`–`tmm3` accumulating
//! its four 16 × 16 quarters, `tmm4`/`tmm5` holding the activations' two 16 × 64 tiles and
//! `tmm6`/`tmm7` the weights' two 64 × 16 tiles.

#![allow(unsafe_code)]

use std::arch::asm;
use std::sync::OnceLock;

/// Rows of the activation blocks handed to [`Tiles::panel`]: two tiles of 16.
pub(crate) const ROWS: usize = 32;
/// Bytes of `k` per tile row: `kp` must be a multiple of it.
pub(crate) const K_STEP: usize = 64;
/// Columns of a panel: four tiles of 16 i32.
pub(crate) const COLS: usize = 64;

/// Whether the AMX path can run here: the CPU has AMX-TILE and AMX-INT8, the kernel gave
/// this process the tile state, and `DOCCHAT_EMBED_AMX` is not `0`. Asked once.
#[expect(
    clippy::disallowed_methods,
    reason = "a CPU kernel switch, read once where the kernels are chosen (the embedder has no Config)"
)]
pub(crate) fn available() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| {
        std::env::var("DOCCHAT_EMBED_AMX").as_deref() != Ok("0")
            && cpu_has_amx_int8()
            && request_tile_state()
    })
}

fn cpu_has_amx_int8() -> bool {
    use std::arch::x86_64::__cpuid_count;
    // Leaf 7, sub-leaf 0: EDX bit 24 is AMX-TILE, bit 25 AMX-INT8.
    let leaf7 = __cpuid_count(7, 0);
    __cpuid_count(0, 0).eax >= 7 && leaf7.edx & (1 << 24) != 0 && leaf7.edx & (1 << 25) != 0
}

/// `arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)`: the tile data state for every
/// thread of this process. Linux only; elsewhere no.
fn request_tile_state() -> bool {
    #[cfg(target_os = "linux")]
    {
        const SYS_ARCH_PRCTL: isize = 158;
        const ARCH_REQ_XCOMP_PERM: usize = 0x1023;
        const XFEATURE_XTILEDATA: usize = 18;
        let ret: isize;
        // SAFETY: a plain system call; it reads no memory of ours and the kernel clobbers
        // only rcx and r11, which are declared.
        unsafe {
            asm!(
                "syscall",
                inlateout("rax") SYS_ARCH_PRCTL => ret,
                in("rdi") ARCH_REQ_XCOMP_PERM,
                in("rsi") XFEATURE_XTILEDATA,
                lateout("rcx") _,
                lateout("r11") _,
                options(nostack),
            );
        }
        ret == 0
    }
    #[cfg(not(target_os = "linux"))]
    false
}

/// The tile configuration `ldtilecfg` reads: palette 1, every tile 16 rows of 64 bytes.
#[repr(C, align(64))]
struct Config {
    palette: u8,
    start_row: u8,
    reserved: [u8; 14],
    colsb: [u16; 16],
    rows: [u8; 16],
}

/// The tiles configured on this thread; released when dropped. Not `Send`: the
/// configuration belongs to the thread that loaded it.
pub(crate) struct Tiles {
    _not_send: std::marker::PhantomData<*const ()>,
}

impl Tiles {
    /// Configures the tiles on this thread. None when [`available`] says no.
    pub(crate) fn configure() -> Option<Tiles> {
        if !available() {
            return None;
        }
        let mut cfg = Config {
            palette: 1,
            start_row: 0,
            reserved: [0; 14],
            colsb: [0; 16],
            rows: [0; 16],
        };
        for t in 0..8 {
            cfg.colsb[t] = K_STEP as u16;
            cfg.rows[t] = 16;
        }
        // SAFETY: AMX is present and this process holds the tile state (`available`);
        // `cfg` is a valid 64-byte palette-1 configuration.
        unsafe { asm!("ldtilecfg [{}]", in(reg) &cfg, options(nostack, readonly)) };
        Some(Tiles {
            _not_send: std::marker::PhantomData,
        })
    }

    /// `c = a · b` for one block: `a` is 32 rows of `kp` quantized activations, rows `lda`
    /// bytes apart; `b` one packed panel (`[kp / 4][64][4]`); `c` the 32 × 64 i32 result,
    /// row-major. `kp` must be a multiple of [`K_STEP`].
    ///
    /// Two passes of 32 columns, each with four accumulators (two row tiles × two column
    /// tiles), so every tile loaded serves two products.
    pub(crate) fn panel(&self, a: &[u8], lda: usize, kp: usize, b: &[i8], c: &mut [i32]) {
        assert!(
            kp.is_multiple_of(K_STEP)
                && lda >= kp
                && a.len() >= (ROWS - 1) * lda + kp
                && b.len() == kp * COLS
                && c.len() == ROWS * COLS
        );
        // 16 rows of the panel (64 k) are 16 rows of 256 bytes; the 16 columns of column
        // tile j are bytes j·64 .. j·64 + 64 of each.
        const B_STRIDE: usize = COLS * 4;
        const C_STRIDE: usize = COLS * 4;
        const TILE_ROWS: usize = 16;
        let (a0, b0, c0) = (a.as_ptr(), b.as_ptr(), c.as_mut_ptr());
        let a_lower = TILE_ROWS * lda;
        for half in 0..2 {
            // SAFETY (the three blocks): the tiles are configured on this thread (`self`
            // exists); by the assertion above every load reads 16 rows of 64 bytes inside
            // `a` or `b` and every store writes 16 rows of 64 bytes inside `c`:
            // - a: rows r = 0..32 at `step·64 + r·lda`, the last byte `31·lda + kp − 1`;
            // - b: rows at `step·16·256 + r·256 + half·128 + j·64` (j = 0, 1), the last
            //   byte `kp·64 − 1`;
            // - c: rows r = 0..32 at `r·256 + half·128 + j·64`, the last byte `32·256 − 1`.
            unsafe {
                asm!(
                    "tilezero tmm0",
                    "tilezero tmm1",
                    "tilezero tmm2",
                    "tilezero tmm3",
                    options(nostack, nomem)
                );
                for step in 0..kp / K_STEP {
                    let a = a0.add(step * K_STEP);
                    let b = b0.add(step * (K_STEP / 4) * B_STRIDE + half * 128);
                    asm!(
                        "tileloadd tmm4, [{a} + {lda} * 1]",
                        "tileloadd tmm6, [{b} + {ldb} * 1]",
                        "tdpbusd tmm0, tmm4, tmm6",
                        "tileloadd tmm7, [{b} + {ldb} * 1 + 64]",
                        "tdpbusd tmm1, tmm4, tmm7",
                        "tileloadd tmm5, [{a2} + {lda} * 1]",
                        "tdpbusd tmm2, tmm5, tmm6",
                        "tdpbusd tmm3, tmm5, tmm7",
                        a = in(reg) a,
                        a2 = in(reg) a.add(a_lower),
                        lda = in(reg) lda,
                        b = in(reg) b,
                        ldb = in(reg) B_STRIDE,
                        options(nostack, readonly)
                    );
                }
                let c = c0.add(half * 32);
                asm!(
                    "tilestored [{c} + {ldc} * 1], tmm0",
                    "tilestored [{c} + {ldc} * 1 + 64], tmm1",
                    "tilestored [{c2} + {ldc} * 1], tmm2",
                    "tilestored [{c2} + {ldc} * 1 + 64], tmm3",
                    c = in(reg) c,
                    c2 = in(reg) c.add(TILE_ROWS * COLS),
                    ldc = in(reg) C_STRIDE,
                    options(nostack)
                );
            }
        }
    }
}

impl Drop for Tiles {
    fn drop(&mut self) {
        // SAFETY: the tiles were configured on this thread; releasing returns them to
        // their initial state.
        unsafe { asm!("tilerelease", options(nostack, nomem)) };
    }
}
