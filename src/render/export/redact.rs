//! Secrets masked in an exported page (CLI.md "export"): API keys and tokens of the common
//! providers, bearer tokens, private key blocks, passwords in URLs.
//!
//! The patterns run over JSON text (the page's data), so a match never ends inside an escape
//! and its replacement holds no character JSON would need escaped: the text stays valid JSON
//! and reads as written around the mask. A key often follows an escaped newline (`\n`) or
//! quote (`\"`): those count as a boundary before it, and are kept.

use std::sync::LazyLock;

use std::borrow::Cow;

use aho_corasick::{AhoCorasick, MatchKind};
use regex::{Captures, Regex, RegexSet};

/// (name shown in the mask, pattern). `pre`, when present, is kept: it is context, not secret.
const PATTERNS: &[(&str, &str)] = &[
    (
        "private-key",
        r#"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----(?:[^"]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|(?:[A-Za-z0-9+/=]|\\[nr])*)"#,
    ),
    (
        "anthropic-key",
        r"(?P<pre>^|[^A-Za-z0-9_\\-]|\\[nrt])sk-ant-[A-Za-z0-9_-]{20,}",
    ),
    (
        "api-key",
        r"(?P<pre>^|[^A-Za-z0-9_\\-]|\\[nrt])sk-(?:proj-|svcacct-|or-v1-)?[A-Za-z0-9_-]{20,}",
    ),
    (
        "github-token",
        r"(?P<pre>^|[^A-Za-z0-9_\\]|\\[nrt])(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
    ),
    (
        "aws-key",
        r"(?P<pre>^|[^A-Za-z0-9_\\]|\\[nrt])(?:AKIA|ASIA)[0-9A-Z]{16}(?-u:\b)",
    ),
    (
        "google-key",
        r"(?P<pre>^|[^A-Za-z0-9_\\]|\\[nrt])AIza[0-9A-Za-z_-]{35}",
    ),
    (
        "slack-token",
        r"(?P<pre>^|[^A-Za-z0-9_\\]|\\[nrt])xox[abposr]-[A-Za-z0-9-]{10,}",
    ),
    (
        "stripe-key",
        r"(?P<pre>^|[^A-Za-z0-9_\\]|\\[nrt])(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}",
    ),
    (
        "huggingface-token",
        r"(?P<pre>^|[^A-Za-z0-9_\\]|\\[nrt])hf_[A-Za-z0-9]{30,}",
    ),
    (
        "jwt",
        r"(?P<pre>^|[^A-Za-z0-9_\\]|\\[nrt])eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
    ),
    (
        "bearer-token",
        r"(?P<pre>(?-u:\b)[Bb]earer )[A-Za-z0-9._~+/-]{16,}=*",
    ),
    (
        "url-password",
        r#"(?P<pre>(?-u:\b)[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@"\\]+:)[^\s:/@"\\]+@"#,
    ),
];

static SET: LazyLock<Vec<(&'static str, Regex)>> = LazyLock::new(|| {
    PATTERNS
        .iter()
        .map(|(name, p)| {
            (
                *name,
                Regex::new(p).expect("the redaction patterns compile"),
            )
        })
        .collect()
});

/// Literals of which every match of some pattern holds one (each pattern starts with, or
/// has after its context, one of these): text without any holds no secret, which a
/// multi-literal search says many times faster than the patterns themselves.
const LITERALS: &[&str] = &[
    "-----BEGIN ",
    "sk-",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "AKIA",
    "ASIA",
    "AIza",
    "xox",
    "_live_",
    "_test_",
    "hf_",
    "eyJ",
    "earer ",
    "://",
];

/// Leftmost-first: whether any is found is all that counts, and it lets the search use its
/// vector (Teddy) form, five times faster here than the standard automaton.
static LITERAL: LazyLock<AhoCorasick> = LazyLock::new(|| {
    AhoCorasick::builder()
        .match_kind(MatchKind::LeftmostFirst)
        .build(LITERALS)
        .expect("the redaction literals build")
});

/// All the patterns at once: most text holds no secret, and one pass says so.
static ANY: LazyLock<RegexSet> = LazyLock::new(|| {
    RegexSet::new(PATTERNS.iter().map(|(_, p)| *p)).expect("the redaction patterns compile")
});

/// `text` with every secret masked, and how many were.
pub fn redact(text: &str) -> (Cow<'_, str>, u64) {
    if !LITERAL.is_match(text) || !ANY.is_match(text) {
        return (Cow::Borrowed(text), 0);
    }
    let mut out = text.to_owned();
    let mut count = 0u64;
    for (name, re) in SET.iter() {
        if !re.is_match(&out) {
            continue;
        }
        let replaced = re.replace_all(&out, |c: &Captures<'_>| {
            count += 1;
            let pre = c.name("pre").map_or("", |m| m.as_str());
            // A URL keeps its `@` (the host follows).
            let at = if *name == "url-password" { "@" } else { "" };
            format!("{pre}[redacted {name}]{at}")
        });
        out = replaced.into_owned();
    }
    (Cow::Owned(out), count)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn masked(text: &str) -> (String, u64) {
        let (out, n) = redact(text);
        (out.into_owned(), n)
    }

    #[test]
    fn known_shapes_are_masked() {
        let cases = [
            ("key sk-proj-abcdefghijklmnopqrstuvwxyz0123", "api-key"),
            ("sk-0123456789abcdef0123456789abcdef", "api-key"),
            ("sk-ant-api03-abcdefghijklmnopqrstuvwxyz", "anthropic-key"),
            ("ghp_abcdefghijklmnopqrstuvwxyz0123456789", "github-token"),
            ("github_pat_11ABCDEFG0123456789_abcdefghij", "github-token"),
            ("AKIAIOSFODNN7EXAMPLE", "aws-key"),
            ("AIzaSyA-abcdefghijklmnopqrstuvwxyz012345", "google-key"),
            ("xoxb-1234567890-abcdefghij", "slack-token"),
            ("sk_live_abcdefghijklmnop1234", "stripe-key"),
            ("hf_abcdefghijklmnopqrstuvwxyz012345", "huggingface-token"),
            (
                "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
                "jwt",
            ),
            (
                "Authorization: Bearer abc.def-ghi_jkl.mnopqrstu",
                "bearer-token",
            ),
        ];
        for (text, name) in cases {
            let (out, n) = masked(text);
            assert_eq!(n, 1, "{text:?} -> {out:?}");
            assert!(
                out.contains(&format!("[redacted {name}]")),
                "{text:?} -> {out:?}"
            );
        }
    }

    /// The literal search may only skip text the patterns would not match: every pattern,
    /// each of its shapes, matches over one of [`LITERALS`].
    #[test]
    fn every_pattern_match_holds_a_literal() {
        let shapes = [
            "-----BEGIN RSA PRIVATE KEY-----\\nMIIEpAIBAAKCAQEA\\n-----END RSA PRIVATE KEY-----",
            "-----BEGIN PRIVATE KEY-----abc",
            "sk-ant-api03-abcdefghijklmnopqrstuvwxyz",
            "sk-proj-abcdefghijklmnopqrstuvwxyz0123",
            "sk-0123456789abcdef0123456789abcdef",
            "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
            "gho_abcdefghijklmnopqrstuvwxyz0123456789",
            "ghu_abcdefghijklmnopqrstuvwxyz0123456789",
            "ghs_abcdefghijklmnopqrstuvwxyz0123456789",
            "ghr_abcdefghijklmnopqrstuvwxyz0123456789",
            "github_pat_11ABCDEFG0123456789_abcdefghij",
            "AKIAIOSFODNN7EXAMPLE",
            "ASIAIOSFODNN7EXAMPLE",
            "AIzaSyA-abcdefghijklmnopqrstuvwxyz012345",
            "xoxa-1234567890-abcdefghij",
            "xoxp-1234567890-abcdefghij",
            "sk_live_abcdefghijklmnop1234",
            "rk_test_abcdefghijklmnop1234",
            "hf_abcdefghijklmnopqrstuvwxyz012345",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
            "Authorization: Bearer abc.def-ghi_jkl.mnopqrstu",
            "bearer abcdefghijklmnopqrstu",
            "https://alice:hunter2secret@example.com/",
        ];
        let mut matched = vec![false; PATTERNS.len()];
        for shape in shapes {
            let mut any = false;
            for (i, (name, re)) in SET.iter().enumerate() {
                for m in re.find_iter(shape) {
                    any = true;
                    matched[i] = true;
                    assert!(
                        LITERALS.iter().any(|l| m.as_str().contains(l)),
                        "{name} matches {:?} without a literal",
                        m.as_str()
                    );
                }
            }
            assert!(any, "{shape:?} matches no pattern");
            assert!(redact(shape).1 > 0, "{shape:?} is not masked");
        }
        for (i, (name, _)) in PATTERNS.iter().enumerate() {
            assert!(matched[i], "no shape of {name} here: add one");
        }
    }

    #[test]
    fn context_around_a_secret_is_kept() {
        let (out, n) = masked(r#"{"text":"line\nsk-0123456789abcdef0123456789abcdef\nnext"}"#);
        assert_eq!(n, 1);
        assert_eq!(out, r#"{"text":"line\n[redacted api-key]\nnext"}"#);
        let (out, n) = masked("clone https://alice:hunter2secret@example.com/repo.git");
        assert_eq!(n, 1);
        assert_eq!(
            out,
            "clone https://alice:[redacted url-password]@example.com/repo.git"
        );
        let (out, _) = masked(r#"{"args":"{\"key\":\"sk-0123456789abcdef0123456789abcdef\"}"}"#);
        assert_eq!(out, r#"{"args":"{\"key\":\"[redacted api-key]\"}"}"#);
        assert!(serde_json::from_str::<serde_json::Value>(&out).is_ok());
    }

    #[test]
    fn private_key_blocks_are_masked_whole() {
        let text = r#"{"t":"-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\nabc=\n-----END RSA PRIVATE KEY-----\nafter"}"#;
        let (out, n) = masked(text);
        assert_eq!(n, 1);
        assert_eq!(out, r#"{"t":"[redacted private-key]\nafter"}"#);
        // Cut off before its end line: the body still goes, and the JSON stays valid.
        let text = r#"{"t":"-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\"x"}"#;
        let (out, n) = masked(text);
        assert_eq!(n, 1);
        assert!(
            serde_json::from_str::<serde_json::Value>(&out).is_ok(),
            "{out}"
        );
    }

    #[test]
    fn ordinary_text_is_not_masked() {
        for text in [
            "sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "commit 3bb2cb0d77c3bd0123456789abcdef0123456789",
            "id 0b9f3c1e-5d2a-4c8e-9f7a-1234567890ab",
            "![a diagram of the task-queue](data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==)",
            "the task-abcdefghijklmnopqrstuvwxyz runs; mask-0123456789abcdefghijk",
            "https://example.com/path:with:colons@notes",
            "bearer of bad news",
            "a password: see the vault",
        ] {
            let (out, n) = masked(text);
            assert_eq!((out.as_str(), n), (text, 0));
        }
    }
}
