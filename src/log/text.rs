//! Small text helpers for finding messages.

use std::borrow::Cow;

/// At most `max` characters of `s`, with `…` when cut.
pub fn clip(s: &str, max: usize) -> Cow<'_, str> {
    match s.char_indices().nth(max) {
        None => Cow::Borrowed(s),
        Some((i, _)) => Cow::Owned(format!("{}…", &s[..i])),
    }
}

/// A list of seqs for a message: `4, 5, 6` (at most `max` shown).
pub fn seq_list(seqs: &[u64], max: usize) -> String {
    seq_list_counted(seqs, seqs.len() as u64, max)
}

/// [`seq_list`] of a list of `total` seqs of which only the first ones are at hand.
pub fn seq_list_counted(first: &[u64], total: u64, max: usize) -> String {
    let mut out: Vec<String> = first.iter().take(max).map(u64::to_string).collect();
    if total > max as u64 {
        out.push(format!("… ({total} in all)"));
    }
    out.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clip_respects_char_boundaries() {
        assert_eq!(clip("héllo", 2), "hé…");
        assert_eq!(clip("abc", 3), "abc");
        assert_eq!(seq_list(&[1, 2, 3], 2), "1, 2, … (3 in all)");
    }
}
