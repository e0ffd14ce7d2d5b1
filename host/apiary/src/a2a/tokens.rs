//! The operator's bearer tokens for A2A clients: a file of `<client> sha256:<hex>` lines (the
//! token itself is never stored), one client a line; `#` starts a comment. A request's
//! `Authorization: Bearer <token>` names its client when the token's SHA-256 is listed.

use std::collections::HashMap;
use std::path::Path;

use sha2::{Digest, Sha256};

/// The file is read up to this size.
const MAX_FILE_BYTES: u64 = 1024 * 1024;

#[derive(Debug, Default, Clone)]
pub struct Tokens {
    /// Digest (hex) → client name.
    by_digest: HashMap<String, String>,
}

/// The digest a tokens file lists for `token`.
pub fn digest(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

impl Tokens {
    /// Reads the file; a line that is not `<client> sha256:<64 hex>` is an error naming it.
    pub fn load(path: &Path) -> Result<Tokens, String> {
        let bytes =
            crate::safe_fs::read_regular(path, crate::safe_fs::FinalLink::Follow, MAX_FILE_BYTES)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let text =
            String::from_utf8(bytes).map_err(|_| format!("{} is not UTF-8", path.display()))?;
        Tokens::parse(&text).map_err(|(line, why)| format!("{}:{line}: {why}", path.display()))
    }

    fn parse(text: &str) -> Result<Tokens, (usize, String)> {
        let mut tokens = Tokens::default();
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let bad = |why: &str| (i + 1, why.to_string());
            let (client, hash) = line
                .split_once(char::is_whitespace)
                .ok_or_else(|| bad("expected `<client> sha256:<64 hex digits>`"))?;
            let hex = hash
                .trim()
                .strip_prefix("sha256:")
                .ok_or_else(|| bad("the digest must start with `sha256:`"))?;
            if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(bad(
                    "the digest must be 64 hex digits (`printf %s TOKEN | sha256sum`)",
                ));
            }
            if !client
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.@".contains(c))
            {
                return Err(bad("a client name holds letters, digits and - _ . @ only"));
            }
            tokens
                .by_digest
                .insert(hex.to_ascii_lowercase(), client.to_string());
        }
        Ok(tokens)
    }

    pub fn is_empty(&self) -> bool {
        self.by_digest.is_empty()
    }

    /// The client an `Authorization` header value names, if its bearer token is listed.
    pub fn client(&self, authorization: Option<&str>) -> Option<&str> {
        let token = authorization?.strip_prefix("Bearer ")?.trim();
        if token.is_empty() || token.len() > 4096 {
            return None;
        }
        self.by_digest.get(&digest(token)).map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listed_token_names_its_client_and_nothing_else_does() {
        let text = format!(
            "# clients\nreviewer sha256:{}\n\nci-bot sha256:{}  # the CI\n",
            digest("s3cret"),
            digest("other")
        );
        let t = Tokens::parse(&text).unwrap();
        assert_eq!(t.client(Some("Bearer s3cret")), Some("reviewer"));
        assert_eq!(t.client(Some("Bearer other")), Some("ci-bot"));
        assert_eq!(t.client(Some("Bearer wrong")), None);
        assert_eq!(t.client(Some("s3cret")), None);
        assert_eq!(t.client(None), None);
        assert_eq!(Tokens::parse("x sha256:12").unwrap_err().0, 1);
        assert_eq!(Tokens::parse("\nx 12").unwrap_err().0, 2);
    }
}
