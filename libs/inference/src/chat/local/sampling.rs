//! Sampling: a generation's settings, the repeat penalty and the top-k / top-p draw.

use super::sketch::SKETCH_CANDIDATES;

/// Sampling settings of one generation.
#[derive(Debug, Clone)]
pub struct GenParams {
    pub max_tokens: usize,
    /// 0 = greedy.
    pub temperature: f32,
    /// Sampling keeps the `top_k` likeliest tokens (64 by default)...
    pub top_k: usize,
    /// ...and of those the fewest whose probabilities reach `top_p` (0.95).
    pub top_p: f32,
    pub seed: u64,
    /// Whether control tokens (`<eos>`, `<end_of_turn>`, ...) end the generation; when not,
    /// the likeliest other token is taken instead (benchmarks use it to decode a fixed
    /// number of tokens).
    pub stop_at_control: bool,
    /// Score the whole vocabulary exactly for every token instead of shortlisting the
    /// likeliest [`SHORTLIST`] (or `top_k`) with the 4-bit sketch of the embedding; slower.
    pub exact_logits: bool,
    /// The logits of the tokens generated in the last [`REPEAT_WINDOW`] are divided by this
    /// (multiplied, when negative), as llama.cpp's repeat penalty does; 1 turns it off.
    /// Small models decoding greedily otherwise fall into loops ("paperpaperpaper...").
    pub repeat_penalty: f32,
}

/// How many of the latest generated tokens the repeat penalty looks at.
pub const REPEAT_WINDOW: usize = 64;

/// The repeat penalty of chat completions (llama.cpp's default).
pub const CHAT_REPEAT_PENALTY: f32 = 1.1;

/// Tokens shortlisted by the 4-bit sketch of the output embedding and then scored exactly,
/// at least.
pub const SHORTLIST: usize = SKETCH_CANDIDATES;

impl GenParams {
    pub fn greedy(max_tokens: usize) -> GenParams {
        GenParams {
            max_tokens,
            temperature: 0.0,
            top_k: 64,
            top_p: 0.95,
            seed: 0,
            stop_at_control: true,
            exact_logits: false,
            repeat_penalty: 1.0,
        }
    }

    /// A chat completion's: the caller's length and temperature, the repeat penalty on.
    pub fn chat(max_tokens: usize, temperature: f32, seed: u64) -> GenParams {
        GenParams {
            temperature,
            seed,
            repeat_penalty: CHAT_REPEAT_PENALTY,
            ..GenParams::greedy(max_tokens)
        }
    }
}

/// Applies the repeat `penalty` to `logits` once for each distinct token of `recent`.
pub(super) fn penalize_repeats(logits: &mut [f32], recent: &[u32], penalty: f32) {
    if penalty == 1.0 {
        return;
    }
    let mut seen: Vec<u32> = Vec::with_capacity(recent.len());
    for &t in recent {
        if seen.contains(&t) {
            continue;
        }
        seen.push(t);
        if let Some(l) = logits.get_mut(t as usize).filter(|l| l.is_finite()) {
            *l = if *l > 0.0 { *l / penalty } else { *l * penalty };
        }
    }
}

/// A small seeded generator (SplitMix64) for sampling.
pub(super) struct SplitMix64(pub(super) u64);

impl SplitMix64 {
    fn next_f32(&mut self) -> f32 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z >> 40) as f32 / (1u64 << 24) as f32
    }
}

/// The next token: the argmax at temperature 0, else a draw from the top-k / top-p
/// distribution at that temperature.
pub(super) fn sample(logits: &mut [f32], params: &GenParams, rng: &mut SplitMix64) -> u32 {
    let argmax = logits
        .iter()
        .enumerate()
        .fold((0usize, f32::NEG_INFINITY), |best, (i, &v)| {
            if v > best.1 { (i, v) } else { best }
        })
        .0;
    if params.temperature <= 0.0 || params.top_k <= 1 {
        return argmax as u32;
    }
    // Only scored tokens can be drawn: with a shortlist, a thousand of the vocabulary.
    let mut idx: Vec<u32> = (0..logits.len() as u32)
        .filter(|&i| logits[i as usize] > f32::NEG_INFINITY)
        .collect();
    if idx.is_empty() {
        return argmax as u32;
    }
    let k = params.top_k.min(idx.len());
    idx.select_nth_unstable_by(k - 1, |&a, &b| {
        logits[b as usize].total_cmp(&logits[a as usize])
    });
    idx.truncate(k);
    idx.sort_by(|&a, &b| logits[b as usize].total_cmp(&logits[a as usize]));
    let max = logits[idx[0] as usize];
    let mut probs: Vec<f32> = idx
        .iter()
        .map(|&i| ((logits[i as usize] - max) / params.temperature).exp())
        .collect();
    let sum: f32 = probs.iter().sum();
    let mut cum = 0.0;
    let mut keep = probs.len();
    for (j, p) in probs.iter_mut().enumerate() {
        *p /= sum;
        cum += *p;
        if cum >= params.top_p {
            keep = j + 1;
            break;
        }
    }
    let total: f32 = probs[..keep].iter().sum();
    let mut r = rng.next_f32() * total;
    for (j, &p) in probs[..keep].iter().enumerate() {
        if r < p {
            return idx[j];
        }
        r -= p;
    }
    idx[keep - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_repeat_penalty_lowers_recent_tokens_only_once_each() {
        let mut logits = vec![2.0, 1.9, -1.0, 0.5, f32::NEG_INFINITY];
        // Token 0 twice in the window: penalized once; token 4 stays unscored.
        penalize_repeats(&mut logits, &[0, 2, 0, 4], 1.1);
        assert_eq!(logits[0], 2.0 / 1.1);
        assert_eq!(logits[2], -1.1);
        assert_eq!(logits[1], 1.9);
        assert_eq!(logits[4], f32::NEG_INFINITY);
        // Greedy now leaves the repeated token for the next best one.
        let mut rng = SplitMix64(1);
        assert_eq!(sample(&mut logits, &GenParams::greedy(1), &mut rng), 1);
        // 1 is off.
        let mut same = vec![2.0, 1.9];
        penalize_repeats(&mut same, &[0, 0], 1.0);
        assert_eq!(same, [2.0, 1.9]);
    }

    #[test]
    fn chat_completions_penalize_repeats_and_greedy_runs_do_not() {
        let chat = GenParams::chat(32, 0.3, 7);
        assert_eq!(chat.repeat_penalty, CHAT_REPEAT_PENALTY);
        assert_eq!((chat.max_tokens, chat.temperature, chat.seed), (32, 0.3, 7));
        assert_eq!(GenParams::greedy(32).repeat_penalty, 1.0);
    }

    #[test]
    fn greedy_picks_argmax_and_sampling_stays_in_top_k() {
        let mut logits = vec![0.0, 3.0, 1.0, 2.9, -5.0];
        let mut rng = SplitMix64(7);
        assert_eq!(sample(&mut logits, &GenParams::greedy(1), &mut rng), 1);
        let params = GenParams {
            temperature: 1.0,
            top_k: 2,
            top_p: 1.0,
            ..GenParams::greedy(1)
        };
        let mut seen = [0usize; 5];
        for _ in 0..2000 {
            seen[sample(&mut logits, &params, &mut rng) as usize] += 1;
        }
        assert_eq!(seen[0] + seen[2] + seen[4], 0);
        assert!(seen[1] > 800 && seen[3] > 800, "{seen:?}");
        // Tokens a shortlist left unscored are never drawn, even when top_k reaches them.
        let mut short = vec![
            f32::NEG_INFINITY,
            1.0,
            f32::NEG_INFINITY,
            1.0,
            f32::NEG_INFINITY,
        ];
        let wide = GenParams { top_k: 5, ..params };
        let mut seen = [0usize; 5];
        for _ in 0..200 {
            seen[sample(&mut short, &wide, &mut rng) as usize] += 1;
        }
        // Both scored tokens are drawn (fewer scored tokens than top_k still samples).
        assert_eq!(seen[0] + seen[2] + seen[4], 0);
        assert!(seen[1] > 50 && seen[3] > 50, "{seen:?}");
    }
}
