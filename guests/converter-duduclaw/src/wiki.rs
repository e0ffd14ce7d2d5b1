//! The expert pack's `wiki/<namespace>/*.md` pages (the DuDuClaw Expert Pack Format v1.0, §2
//! Layout: shared-knowledge pages) as one persona pack skill, so they reach the agents: every
//! persona gets the skill, whose `SKILL.md` lists the pages and whose files are the pages at their
//! wiki paths. The manifest block records the skill's name (`x-expert.wiki_skill`) and the way back
//! writes its pages under `wiki/` again.

use convert_kit::{Map, Report, Skill, Value, frontmatter};

use crate::expert::MANIFEST;

/// The preferred skill name; `expert-wiki`, then `wiki-2`, … when the pack has a skill so named.
const NAME: &str = "wiki";
/// The wiki folder of an expert pack.
pub const DIR: &str = "wiki/";

/// Whether `path` (pack-relative) is a wiki page the skill carries: any file under `wiki/`.
pub fn is_page(path: &str) -> bool {
    path.strip_prefix(DIR).is_some_and(|rest| !rest.is_empty())
}

/// The skill holding `pages` (`(wiki path, bytes)`), named so it collides with none of `taken`.
pub fn skill(
    pages: &[(String, Vec<u8>)],
    title: &str,
    taken: &[&str],
    report: &mut Report,
) -> Skill {
    let name = [NAME.to_string(), format!("expert-{NAME}")]
        .into_iter()
        .chain((2..).map(|n| format!("{NAME}-{n}")))
        .find(|n| !taken.contains(&n.as_str()))
        .unwrap_or_default();
    let description = format!(
        "Shared knowledge pages of {title} ({} page{}): read the page that matches the question before answering from memory.",
        pages.len(),
        if pages.len() == 1 { "" } else { "s" }
    );
    let mut body = String::from(
        "\n# Shared knowledge\n\nThe team's wiki pages, by namespace. Each is a file beside this one:\n\n",
    );
    let mut files = Vec::new();
    for (path, bytes) in pages {
        let rel = &path[DIR.len()..];
        body.push_str(&format!("- `{rel}`: {}\n", heading(bytes).unwrap_or(rel)));
        files.push((rel.to_string(), bytes.clone()));
    }
    let mut fm = Map::new();
    fm.insert("name".into(), name.clone().into());
    fm.insert("description".into(), description.clone().into());
    files.insert(
        0,
        (
            "SKILL.md".to_string(),
            frontmatter::render(&fm, &body).into_bytes(),
        ),
    );
    report.reinterpreted(
        "wiki-as-skill",
        MANIFEST,
        "wiki",
        format!(
            "{} wiki page{} reach every persona as the skill `{name}` (skills/{name}/<namespace>/<page>); the way back restores them under wiki/",
            pages.len(),
            if pages.len() == 1 { "" } else { "s" }
        ),
    );
    Skill {
        name,
        description,
        files,
    }
}

/// The page's first Markdown heading, for the listing.
fn heading(bytes: &[u8]) -> Option<&str> {
    let text = std::str::from_utf8(bytes).ok()?;
    text.lines()
        .map(str::trim)
        .find_map(|l| {
            l.strip_prefix('#')
                .map(|h| h.trim_start_matches('#').trim())
        })
        .filter(|h| !h.is_empty())
}

/// The way back: the wiki skill's pages as `(wiki path, bytes)`, without its generated SKILL.md.
pub fn pages_of(skill: &Skill) -> Vec<(String, Vec<u8>)> {
    skill
        .files
        .iter()
        .filter(|(rel, _)| rel != "SKILL.md")
        .map(|(rel, bytes)| (format!("{DIR}{rel}"), bytes.clone()))
        .collect()
}

/// The wiki skill's name recorded in the `x-expert` block, if any.
pub fn recorded(ext: &Map<String, Value>) -> Option<&str> {
    ext.get("wiki_skill").and_then(Value::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_become_one_skill_and_come_back() {
        let pages = vec![
            (
                "wiki/clinic/hours.md".to_string(),
                b"# Opening hours\nMon-Fri".to_vec(),
            ),
            ("wiki/clinic/prices.md".to_string(), b"no heading".to_vec()),
        ];
        let mut report = Report::default();
        let skill = skill(&pages, "Demo", &["wiki"], &mut report);
        assert_eq!(skill.name, "expert-wiki");
        let md = String::from_utf8(skill.files[0].1.clone()).unwrap();
        assert!(md.contains("name: expert-wiki"), "{md}");
        assert!(md.contains("`clinic/hours.md`: Opening hours"), "{md}");
        assert!(md.contains("`clinic/prices.md`: clinic/prices.md"), "{md}");
        assert_eq!(pages_of(&skill), pages);
        assert!(is_page("wiki/a.md") && !is_page("wiki/") && !is_page("hooks/a.sh"));
    }
}
