//! The per-row u8 levels of the int8 kernels' activation quantization: one definition that
//! every kernel's quantizer (`int8.rs`'s and `avx2.rs`'s) uses.

/// A row's quantization from its extremes `lo <= 0 <= hi`: its scale `s = (hi - lo) / 255`,
/// `1 / s` and the zero point `z = round(-lo / s)` (all zero for a row of zeros). Shared by
/// every kernel's quantizer, so they give the same levels.
pub(super) fn row_levels(lo: f32, hi: f32) -> (f32, f32, f32) {
    let scale = (hi - lo) / 255.0;
    if scale > 0.0 {
        (
            scale,
            1.0 / scale,
            (-lo / scale).round_ties_even().clamp(0.0, 255.0),
        )
    } else {
        (0.0, 0.0, 0.0)
    }
}

/// One value's level, 0..=255, as the vector code computes it (one rounding of `v·inv + z`,
/// ties to even): the quantizers' scalar tails.
pub(super) fn level(v: f32, inv: f32, zero: f32) -> f32 {
    v.mul_add(inv, zero).round_ties_even().clamp(0.0, 255.0)
}
