//! Redaction for sharing (`export --redact`, `serve --redact`): secrets in exported text are
//! replaced by stable placeholders such as `[REDACTED:github-token#1]`.
//!
//! What counts as a secret: the API keys and tokens of common providers (OpenAI, Anthropic,
//! GitHub, AWS access key ids, Slack, Google, Stripe), JSON Web Tokens, `Bearer` tokens, PEM
//! private key blocks, the password of a `scheme://user:password@host` URL, and the value of a
//! `KEY=value` assignment whose key names a secret (`…TOKEN`, `…SECRET…`, `…PASSWORD…`,
//! `…API_KEY`, …), plus the user's own regular expressions. Within one [`Redactor`] the same
//! secret always gets the same placeholder and different secrets of one kind get different
//! numbers, so a reader can still tell that two tool calls used the same key.
//!
//! Only the exported text is changed; the stored files are never written.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::Path;

use regex::{Captures, Regex};

use crate::error::CliError;

/// One detection rule: a label for the placeholder and a pattern. When the pattern has a
/// capture group named `secret`, only that group is replaced (the rest of the match, such as
/// `Bearer ` or `user:`, stays); otherwise the whole match is.
struct Rule {
    label: String,
    re: Regex,
    /// For `KEY=value`: the match counts only when the key names a secret.
    env_key: bool,
}

/// The built-in rules, most specific first (an Anthropic key is also shaped like an OpenAI one;
/// `OPENAI_API_KEY=sk-…` is labelled by the key's shape, not as an environment value).
const BUILTIN: &[(&str, &str)] = &[
    (
        "private-key",
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----",
    ),
    ("anthropic-key", r"\bsk-ant-[A-Za-z0-9_-]{20,}"),
    (
        "openai-key",
        r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]*[A-Za-z0-9]{20,}[A-Za-z0-9_-]*",
    ),
    (
        "github-token",
        r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,}\b",
    ),
    ("github-token", r"\bgithub_pat_[A-Za-z0-9_]{22,}"),
    ("aws-access-key", r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"),
    ("slack-token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
    ("google-api-key", r"\bAIza[0-9A-Za-z_-]{35}"),
    ("stripe-key", r"\b(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{16,}"),
    (
        "jwt",
        r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
    ),
    (
        "bearer-token",
        r"(?i:\bbearer)\s+(?P<secret>[A-Za-z0-9._~+/-]{16,}=*)",
    ),
    (
        "url-password",
        r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@?#]+:(?P<secret>[^\s/@?#]+)@",
    ),
];

/// `KEY=value` (an environment dump, a `.env` file, a query string); the key decides.
const ENV_ASSIGNMENT: &str = r#"\b(?P<key>[A-Za-z_][A-Za-z0-9_]*)[ \t]*=[ \t]*(?:"(?P<dq>[^"\n]+)"|'(?P<sq>[^'\n]+)'|(?P<secret>[^\s"'&;,]+))"#;

/// Whether an assignment's key names a secret: one of its `_`-separated words is `TOKEN`,
/// `SECRET`, `PASSWORD`, `PASSWD`, `PWD`, `APIKEY`, `CREDENTIAL(S)` or `PRIVATE`, or it ends in
/// `API_KEY`, `ACCESS_KEY`, `SECRET_KEY`, `SIGNING_KEY` or `AUTH` (case does not matter).
/// `MAX_TOKENS`, `PATH` and `SORT_KEY` do not.
fn secret_key(key: &str) -> bool {
    let key = key.to_ascii_uppercase();
    let words: Vec<&str> = key.split('_').filter(|w| !w.is_empty()).collect();
    const WORDS: &[&str] = &[
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "PWD",
        "APIKEY",
        "CREDENTIAL",
        "CREDENTIALS",
        "PRIVATE",
    ];
    if words.iter().any(|w| WORDS.contains(w)) {
        return true;
    }
    let n = words.len();
    n >= 2
        && words[n - 1] == "KEY"
        && matches!(
            words[n - 2],
            "API" | "ACCESS" | "SECRET" | "SIGNING" | "MASTER"
        )
        || words.last() == Some(&"AUTH")
}

/// Replaces secrets with numbered placeholders; see the module docs.
pub(crate) struct Redactor {
    rules: Vec<Rule>,
    /// `(label, secret)` → its number within the label.
    seen: BTreeMap<(String, String), usize>,
    /// Secrets numbered so far per label.
    counts: BTreeMap<String, usize>,
    /// Replacements made so far (all labels).
    replaced: usize,
}

impl Redactor {
    /// The built-in rules plus `patterns` (each a regular expression; label `pattern`) and the
    /// patterns of each file in `files` (one per line; blank lines and lines starting with `#`
    /// are skipped).
    ///
    /// # Errors
    /// Usage (exit 2) for a pattern that does not compile (naming the file and line) or one
    /// that matches the empty string; I/O (exit 4) for a file that cannot be read.
    pub(crate) fn new(patterns: &[String], files: &[std::path::PathBuf]) -> Result<Self, CliError> {
        let mut rules = Vec::new();
        for (label, pat) in BUILTIN {
            rules.push(Rule {
                label: (*label).to_owned(),
                re: Regex::new(pat)
                    .map_err(|e| CliError::Usage(format!("built-in pattern: {e}")))?,
                env_key: false,
            });
        }
        rules.push(Rule {
            label: "env-secret".into(),
            re: Regex::new(ENV_ASSIGNMENT)
                .map_err(|e| CliError::Usage(format!("built-in pattern: {e}")))?,
            env_key: true,
        });
        for p in patterns {
            rules.push(user_rule(p, &format!("--redact-pattern {p:?}"))?);
        }
        for f in files {
            rules.extend(read_patterns(f)?);
        }
        Ok(Redactor {
            rules,
            seen: BTreeMap::new(),
            counts: BTreeMap::new(),
            replaced: 0,
        })
    }

    /// How many secrets were replaced so far (occurrences, not distinct secrets).
    pub(crate) fn replaced(&self) -> usize {
        self.replaced
    }

    fn placeholder(&mut self, label: &str, secret: &str) -> String {
        let key = (label.to_owned(), secret.to_owned());
        let n = match self.seen.get(&key) {
            Some(n) => *n,
            None => {
                let c = self.counts.entry(label.to_owned()).or_insert(0);
                *c += 1;
                let n = *c;
                self.seen.insert(key, n);
                n
            }
        };
        self.replaced += 1;
        format!("[REDACTED:{label}#{n}]")
    }

    /// `text` with every secret replaced (borrowed when nothing matched).
    pub(crate) fn redact<'t>(&mut self, text: &'t str) -> Cow<'t, str> {
        let mut cur: Cow<'t, str> = Cow::Borrowed(text);
        for i in 0..self.rules.len() {
            let re = self.rules[i].re.clone();
            if !re.is_match(&cur) {
                continue;
            }
            let label = self.rules[i].label.clone();
            let env_key = self.rules[i].env_key;
            let next = re
                .replace_all(&cur, |c: &Captures<'_>| {
                    self.replace_one(&label, env_key, c)
                })
                .into_owned();
            cur = Cow::Owned(next);
        }
        cur
    }

    fn replace_one(&mut self, label: &str, env_key: bool, c: &Captures<'_>) -> String {
        let Some(whole) = c.get(0) else {
            return String::new();
        };
        if env_key && !c.name("key").is_some_and(|k| secret_key(k.as_str())) {
            return whole.as_str().to_owned();
        }
        let secret = ["secret", "dq", "sq"].iter().find_map(|n| c.name(n));
        let Some(secret) = secret else {
            return self.placeholder(label, whole.as_str());
        };
        if secret.as_str().starts_with("[REDACTED:") {
            return whole.as_str().to_owned();
        }
        let start = secret.start() - whole.start();
        let end = secret.end() - whole.start();
        let w = whole.as_str();
        format!(
            "{}{}{}",
            &w[..start],
            self.placeholder(label, secret.as_str()),
            &w[end..]
        )
    }

    /// JSON text with the secrets inside its string literals replaced: each literal is decoded,
    /// redacted and encoded again only when something changed, so everything else stays as
    /// written. A literal that does not decode (a lone surrogate escape) is redacted as written
    /// when the result still is valid JSON text.
    pub(crate) fn redact_json<'t>(&mut self, text: &'t str) -> Cow<'t, str> {
        let bytes = text.as_bytes();
        let mut out = String::new();
        let mut copied = 0;
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] != b'"' {
                i += 1;
                continue;
            }
            let start = i;
            i += 1;
            while i < bytes.len() && bytes[i] != b'"' {
                i += if bytes[i] == b'\\' { 2 } else { 1 };
            }
            let end = (i + 1).min(bytes.len());
            i = end;
            let Some(lit) = text.get(start..end) else {
                continue;
            };
            let replaced = match serde_json::from_str::<String>(lit) {
                Ok(s) => match self.redact(&s) {
                    Cow::Borrowed(_) => None,
                    Cow::Owned(r) => serde_json::to_string(&r).ok(),
                },
                Err(_) => match self.redact(lit) {
                    Cow::Borrowed(_) => None,
                    Cow::Owned(r) => Some(r),
                },
            };
            if let Some(r) = replaced {
                out.push_str(&text[copied..start]);
                out.push_str(&r);
                copied = end;
            }
        }
        if copied == 0 {
            return Cow::Borrowed(text);
        }
        out.push_str(&text[copied..]);
        Cow::Owned(out)
    }
}

fn user_rule(pattern: &str, what: &str) -> Result<Rule, CliError> {
    let re = Regex::new(pattern).map_err(|e| CliError::Usage(format!("{what}: {e}")))?;
    if re.is_match("") {
        return Err(CliError::Usage(format!(
            "{what}: the pattern matches the empty string"
        )));
    }
    Ok(Rule {
        label: "pattern".into(),
        re,
        env_key: false,
    })
}

fn read_patterns(path: &Path) -> Result<Vec<Rule>, CliError> {
    let text = std::fs::read_to_string(path).map_err(|e| CliError::io(path, e))?;
    let mut rules = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        let what = format!("--redact-patterns {}: line {}", path.display(), n + 1);
        rules.push(user_rule(line, &what)?);
    }
    Ok(rules)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn redactor() -> Redactor {
        Redactor::new(&[], &[]).unwrap()
    }

    /// Real-shaped (fake) secrets: input → exact output.
    const SECRETS: &[(&str, &str)] = &[
        (
            "key sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7cDe0f end",
            "key [REDACTED:openai-key#1] end",
        ),
        (
            "sk-1234567890abcdefghijABCDEFGHIJ",
            "[REDACTED:openai-key#1]",
        ),
        (
            "x-api-key: sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789_-AA",
            "x-api-key: [REDACTED:anthropic-key#1]",
        ),
        (
            "git push https://ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789@github.com/o/r",
            "git push https://[REDACTED:github-token#1]@github.com/o/r",
        ),
        (
            "gho_16C7e42F292c6912E7710c838347Ae178B4a",
            "[REDACTED:github-token#1]",
        ),
        (
            "token github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJ",
            "token [REDACTED:github-token#1]",
        ),
        ("AKIAIOSFODNN7EXAMPLE", "[REDACTED:aws-access-key#1]"),
        (
            "SLACK xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
            "SLACK [REDACTED:slack-token#1]",
        ),
        (
            "key=AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q&x",
            "key=[REDACTED:google-api-key#1]&x",
        ),
        (
            "stripe sk_live_4eC39HqLyjWDarjtT1zdp7dc",
            "stripe [REDACTED:stripe-key#1]",
        ),
        (
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
            "[REDACTED:jwt#1]",
        ),
        (
            "Authorization: Bearer abcdef0123456789ABCDEF.xyz",
            "Authorization: Bearer [REDACTED:bearer-token#1]",
        ),
        (
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\nnext",
            "[REDACTED:private-key#1]\nnext",
        ),
        (
            "-----BEGIN PRIVATE KEY-----\nMIIEvQ\n-----END PRIVATE KEY-----",
            "[REDACTED:private-key#1]",
        ),
        (
            "postgres://admin:s3cr3t-P4ss@db.internal:5432/app",
            "postgres://admin:[REDACTED:url-password#1]@db.internal:5432/app",
        ),
        (
            "DATABASE_PASSWORD=hunter2\nPATH=/usr/bin",
            "DATABASE_PASSWORD=[REDACTED:env-secret#1]\nPATH=/usr/bin",
        ),
        (
            "export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "export AWS_SECRET_ACCESS_KEY=[REDACTED:env-secret#1]",
        ),
        (
            "MY_API_KEY=\"quoted value\" AUTH_TOKEN='abc123'",
            "MY_API_KEY=\"[REDACTED:env-secret#1]\" AUTH_TOKEN='[REDACTED:env-secret#2]'",
        ),
        (
            "OPENAI_API_KEY=sk-1234567890abcdefghijABCDEFGHIJ",
            "OPENAI_API_KEY=[REDACTED:openai-key#1]",
        ),
        (
            "https://example.com/cb?client_secret=zzTopSecret9&page=2",
            "https://example.com/cb?client_secret=[REDACTED:env-secret#1]&page=2",
        ),
    ];

    /// Near-misses that must stay exactly as they are.
    const KEEP: &[&str] = &[
        "task-1234567890abcdefghijABCDEFGHIJ",
        "sk-short",
        "the ghp_ prefix marks a personal token",
        "ghp_tooShort123",
        "AKIA is the prefix of an access key id",
        "AKIAIOSFODNN7EXAMPL",
        "Bearer token authentication",
        "https://example.com:8080/path?q=1",
        "ssh://git@github.com/o/r.git",
        "MAX_TOKENS=4096 PATH=/usr/bin HOME=/root SORT_KEY=name",
        "PASSWORD=",
        "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----",
        "eyJhbGciOiJIUzI1NiJ9 alone is a header",
        "xoxo hugs",
        "risk_live_demo",
        "[REDACTED:github-token#1]",
    ];

    #[test]
    fn real_shaped_secrets_are_replaced() {
        for (input, want) in SECRETS {
            let got = redactor().redact(input).into_owned();
            assert_eq!(&got, want, "input: {input}");
        }
    }

    #[test]
    fn near_misses_stay() {
        for input in KEEP {
            let mut r = redactor();
            assert_eq!(r.redact(input), *input, "input: {input}");
            assert_eq!(r.replaced(), 0, "input: {input}");
        }
    }

    #[test]
    fn same_secret_same_placeholder_across_calls() {
        let a = "ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789";
        let b = "ghp_ZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZ";
        let mut r = redactor();
        assert_eq!(
            r.redact(&format!("{a} {b}")),
            "[REDACTED:github-token#1] [REDACTED:github-token#2]"
        );
        assert_eq!(
            r.redact(&format!("again {b} {a}")),
            "again [REDACTED:github-token#2] [REDACTED:github-token#1]"
        );
        assert_eq!(r.replaced(), 4);
    }

    #[test]
    fn user_patterns_and_files() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("pats");
        std::fs::write(&f, "# comment\n\ninternal-[0-9]{4}\r\n").unwrap();
        let mut r = Redactor::new(&["ACME-[A-Z]+".into()], std::slice::from_ref(&f)).unwrap();
        assert_eq!(
            r.redact("ACME-WIDGET and internal-1234 and ACME-WIDGET"),
            "[REDACTED:pattern#1] and [REDACTED:pattern#2] and [REDACTED:pattern#1]"
        );
        std::fs::write(&f, "ok\n(unclosed\n").unwrap();
        let e = Redactor::new(&[], &[f]).err().unwrap();
        assert!(
            matches!(&e, CliError::Usage(m) if m.contains(": line 2: ")),
            "{e:?}"
        );
        let e = Redactor::new(&["a*".into()], &[]).err().unwrap();
        assert!(
            matches!(&e, CliError::Usage(m) if m.contains("empty string")),
            "{e:?}"
        );
    }

    #[test]
    fn json_literals_are_redacted_in_place() {
        let mut r = redactor();
        let text =
            r#"{"a":"tok ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789\n","b":"\u00e9 plain","n":1}"#;
        assert_eq!(
            r.redact_json(text),
            r#"{"a":"tok [REDACTED:github-token#1]\n","b":"\u00e9 plain","n":1}"#
        );
        let split = r#"{"env":"A=1\nDB_PASSWORD=p\"w\nB=2"}"#;
        let got = r.redact_json(split).into_owned();
        let v: serde_json::Value = serde_json::from_str(&got).unwrap();
        assert_eq!(v["env"], "A=1\nDB_PASSWORD=[REDACTED:env-secret#1]\"w\nB=2");
        let untouched = r#"{"a":"nothing here"}"#;
        assert!(matches!(r.redact_json(untouched), Cow::Borrowed(_)));
    }
}
