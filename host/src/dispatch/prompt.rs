//! The per-message prompt (spec §5, §12): `[Base]` and `[System]` when the agent cannot take a
//! system prompt, then `[Context]` and `[Buzz event: …]`.

use std::path::Path;

use crate::relay::Message;

/// apiary's platform orientation, compiled in.
pub const DEFAULT_BASE: &str = include_str!("base_prompt.md");
/// The largest base prompt file accepted.
const MAX_BASE_FILE: u64 = 1024 * 1024;
/// Each thread-context message is cut to this many characters.
const THREAD_LINE: usize = 2000;

/// The `[Base]` layer: compiled in, replaced by `BUZZ_ACP_BASE_PROMPT_FILE`, or off with
/// `BUZZ_ACP_NO_BASE_PROMPT` (setting both is refused).
pub fn base_from_env(env: &dyn Fn(&str) -> Option<String>) -> Result<Option<String>, String> {
    let off = env("BUZZ_ACP_NO_BASE_PROMPT").is_some_and(|v| !matches!(v.as_str(), "0" | "false"));
    let file = env("BUZZ_ACP_BASE_PROMPT_FILE");
    match (off, file) {
        (true, Some(_)) => Err(
            "BUZZ_ACP_NO_BASE_PROMPT and BUZZ_ACP_BASE_PROMPT_FILE are both set; choose one".into(),
        ),
        (true, None) => Ok(None),
        (false, Some(path)) => {
            let bytes = crate::pack::source::read_limited(Path::new(&path), MAX_BASE_FILE)
                .map_err(|e| format!("BUZZ_ACP_BASE_PROMPT_FILE {path}: {e}"))?;
            let text = String::from_utf8(bytes)
                .map_err(|_| format!("BUZZ_ACP_BASE_PROMPT_FILE {path}: not UTF-8"))?;
            Ok(Some(text.trim().to_string()))
        }
        (false, None) => Ok(Some(DEFAULT_BASE.trim().to_string())),
    }
}

/// Where the message sits, for `[Context]`.
pub struct Context<'a> {
    pub channel_name: &'a str,
    pub persona: &'a str,
    pub publish: bool,
}

/// Assembles one prompt. `prefix` is `Some((base, system))` when the agent lacks `systemPrompt`.
pub fn assemble(
    prefix: Option<(Option<&str>, &str)>,
    ctx: &Context<'_>,
    reason: &str,
    thread: &[Message],
    earlier: &[(Message, String)],
    m: &Message,
) -> String {
    let mut sections = Vec::new();
    if let Some((base, system)) = prefix {
        if let Some(base) = base {
            sections.push(format!("[Base]\n{base}"));
        }
        sections.push(format!("[System]\n{system}"));
    }
    let mut context = String::from("[Context]\n");
    match m.root {
        Some(root) => {
            context.push_str(&format!(
                "Scope: thread\nChannel: {} (#{})\nThread root: {}\n",
                ctx.channel_name,
                m.channel,
                root.to_hex()
            ));
            if let Some(parent) = m.parent.filter(|p| *p != root) {
                context.push_str(&format!("Parent: {}\n", parent.to_hex()));
            }
        }
        None => context.push_str(&format!(
            "Scope: channel\nChannel: {} (#{})\n",
            ctx.channel_name, m.channel
        )),
    }
    context.push_str(&format!("You are: {}\n", ctx.persona));
    if ctx.publish {
        context.push_str(
            "Your final message text is published as your reply by the harness; do not post it yourself.",
        );
    } else {
        context.push_str("The harness does not publish replies: post your answer yourself.");
    }
    sections.push(context);
    if !thread.is_empty() {
        let mut t = format!("[Thread Context ({} messages)]", thread.len());
        for (i, x) in thread.iter().enumerate() {
            let text: String = x.content.chars().take(THREAD_LINE).collect();
            t.push_str(&format!(
                "\n[{}] {} ({}): {}",
                i + 1,
                x.author.to_hex(),
                x.created_at.as_secs(),
                text.replace('\n', " ")
            ));
        }
        sections.push(t);
    }
    if !earlier.is_empty() {
        let mut b = format!(
            "[Buzz events — {} earlier in this burst, answered together with the event below]",
            earlier.len()
        );
        for (i, (x, why)) in earlier.iter().enumerate() {
            b.push_str(&format!(
                "\n--- Event {} ({why}) ---\nEvent ID: {}\nFrom: {}\nTime: {}\nText: {}",
                i + 1,
                x.id.to_hex(),
                x.author.to_hex(),
                x.created_at.as_secs(),
                x.content
            ));
        }
        sections.push(b);
    }
    let tags = serde_json::to_string(&m.tags).unwrap_or_default();
    sections.push(format!(
        "[Buzz event: {reason}]\nEvent ID: {}\nChannel: {} (#{})\nKind: 9\nFrom: {}\nTime: {}\nTags: {tags}\nContent: {}",
        m.id.to_hex(),
        ctx.channel_name,
        m.channel,
        m.author.to_hex(),
        m.created_at.as_secs(),
        m.content
    ));
    sections.join("\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use nostr_sdk::prelude::*;

    #[test]
    fn base_prompt_switches() {
        let none = |_: &str| None;
        assert!(base_from_env(&none).unwrap().unwrap().contains("apiary"));
        let off = |k: &str| (k == "BUZZ_ACP_NO_BASE_PROMPT").then(|| "1".to_string());
        assert_eq!(base_from_env(&off).unwrap(), None);
        let both = |_: &str| Some("1".to_string());
        assert!(base_from_env(&both).is_err());
    }

    #[test]
    fn sections_in_order() {
        let ev = crate::relay::message(&Keys::generate(), "general", "hello @pip", vec![]).unwrap();
        let m = Message::parse(&ev).unwrap();
        let ctx = Context {
            channel_name: "general",
            persona: "pip",
            publish: true,
        };
        let p = assemble(Some((Some("BASE"), "SYS")), &ctx, "mention", &[], &[], &m);
        let b = p.find("[Base]\nBASE").unwrap();
        let s = p.find("[System]\nSYS").unwrap();
        let c = p.find("[Context]\nScope: channel").unwrap();
        let e = p.find("[Buzz event: mention]").unwrap();
        assert!(b < s && s < c && c < e);
        assert!(p.ends_with("Content: hello @pip"));
        let bare = assemble(None, &ctx, "mention", std::slice::from_ref(&m), &[], &m);
        assert!(!bare.contains("[System]") && !bare.contains("[Base]"));
        assert!(bare.contains("[Thread Context (1 messages)]\n[1] "));
    }
}
