//! Helpers the unit tests of several modules share.

/// The replace-marker endpoint keys of format version `v` (§11.1), spelled out here rather
/// than read from the dialect, so that the tests check the dialect too.
pub fn replace_keys(v: usize) -> (&'static str, &'static str) {
    if v <= 2 {
        ("start", "end")
    } else {
        ("startSeq", "endSeq")
    }
}
