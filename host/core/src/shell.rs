//! Words shown to the operator as a POSIX shell would read them: what a pack would run on the host
//! (a script hook's command line, a stdio MCP server) is reviewed in this form, by the trust
//! commands and in `apiary up`'s reports alike.

/// One word quoted for a POSIX shell, with anything but printable ASCII escaped (`$'…'`), so that
/// control characters or bidi overrides cannot hide part of it from the reviewer.
pub fn quote(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_./:=@%+,-${}".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        return word.to_string();
    }
    if word.chars().all(|c| c.is_ascii_graphic() || c == ' ') {
        return format!("'{}'", word.replace('\'', r"'\''"));
    }
    let mut out = String::from("$'");
    for c in word.chars() {
        match c {
            '\'' => out.push_str(r"\'"),
            '\\' => out.push_str(r"\\"),
            c if c.is_ascii_graphic() || c == ' ' => out.push(c),
            c => out.extend(c.escape_default()),
        }
    }
    out.push('\'');
    out
}

#[cfg(test)]
mod tests {
    use super::quote;

    #[test]
    fn plain_words_stay_and_others_are_quoted_or_escaped() {
        assert_eq!(quote("./hooks/setup.sh"), "./hooks/setup.sh");
        assert_eq!(quote(""), "''");
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote("x\u{202e}y"), r"$'x\u{202e}y'");
        assert_eq!(quote("a'\\\n"), r"$'a\'\\\n'");
    }
}
