//! Where a path a plugin manifest lists (`agents`, `skills`, `commands`, …) leads.
//!
//! Collections that materialise components at publish time list paths that name nothing in the
//! plugin folder: `../../agents/x.md` (up into the collection) or `./agents/x.md` meaning the
//! collection's own `agents/x.md`. When the input is a collection (a marketplace root), such a
//! path is looked for there too, but never above the input root: a path that climbs out of it
//! is refused however it is spelt, whatever lies there.

use std::path::Path;

use crate::util::clean_path;

/// A manifest path that names something.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// In the plugin folder, at this plugin-relative path.
    Plugin(String),
    /// Not in the plugin folder but in the collection, at this collection-relative path.
    Collection(String),
}

/// Why a manifest path names nothing the converter may read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Missing {
    /// A clean path inside the plugin that names nothing there (nor in the collection).
    Absent,
    /// A path that leaves the plugin, and the input root too when it is a collection.
    Outside(String),
}

/// The plugin folder, and the collection around it when the input is one.
pub struct Place<'a> {
    pub plugin: &'a Path,
    /// The collection root and the plugin folder's path inside it.
    pub collection: Option<(&'a Path, &'a str)>,
}

impl Place<'_> {
    /// Where `path` leads, `exists` telling whether a (root, relative path) names what the field
    /// wants (a file, a folder or either). The plugin wins; then the path from the plugin
    /// folder within the collection; then the path from the collection root.
    pub fn locate(
        &self,
        path: &str,
        exists: impl Fn(&Path, &str) -> bool,
    ) -> Result<Found, Missing> {
        let clean = clean_path(path);
        if let Ok(rel) = &clean
            && exists(self.plugin, rel)
        {
            return Ok(Found::Plugin(rel.clone()));
        }
        let Some((root, prefix)) = self.collection else {
            return Err(match clean {
                Ok(_) => Missing::Absent,
                Err(why) => Missing::Outside(why),
            });
        };
        let from_plugin = within(prefix, path);
        if let Ok(rel) = &from_plugin
            && exists(root, rel)
        {
            return Ok(Found::Collection(rel.clone()));
        }
        if let Ok(rel) = &clean
            && exists(root, rel)
        {
            return Ok(Found::Collection(rel.clone()));
        }
        Err(match (clean, from_plugin) {
            (Ok(_), _) => Missing::Absent,
            (Err(_), Ok(_)) => Missing::Absent,
            (Err(_), Err(why)) => Missing::Outside(why),
        })
    }
}

/// `path` taken from the folder `prefix` (both relative to one root), `..` allowed while it
/// stays under the root.
pub fn within(prefix: &str, path: &str) -> Result<String, String> {
    let p = path.trim();
    if p.starts_with('/') || p.starts_with('\\') || p.contains(':') {
        return Err(format!("`{path}` is not a relative path"));
    }
    let mut parts: Vec<&str> = prefix.split('/').filter(|s| !s.is_empty()).collect();
    for part in p.split(['/', '\\']) {
        match part {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err(format!("`{path}` leaves the input"));
                }
            }
            other => parts.push(other),
        }
    }
    Ok(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_climb_within_the_input_only() {
        assert_eq!(
            within("plugins/a", "../../agents/x.md").unwrap(),
            "agents/x.md"
        );
        assert_eq!(within("plugins/a", "./x/../y").unwrap(), "plugins/a/y");
        assert!(within("plugins/a", "../../../etc/passwd").is_err());
        assert!(within("", "../x").is_err());
        assert!(within("p", "/etc/passwd").is_err());
    }

    #[test]
    fn a_plugin_alone_never_climbs() {
        let dir = std::env::temp_dir().join(format!("locate-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("plugins/a")).unwrap();
        std::fs::write(dir.join("x.md"), "x").unwrap();
        let exists = |root: &Path, rel: &str| root.join(rel).is_file();
        let alone = Place {
            plugin: &dir.join("plugins/a"),
            collection: None,
        };
        assert!(matches!(
            alone.locate("../../x.md", exists),
            Err(Missing::Outside(_))
        ));
        let plugin = dir.join("plugins/a");
        let in_market = Place {
            plugin: &plugin,
            collection: Some((&dir, "plugins/a")),
        };
        assert_eq!(
            in_market.locate("../../x.md", exists),
            Ok(Found::Collection("x.md".into()))
        );
        assert_eq!(
            in_market.locate("./x.md", exists),
            Ok(Found::Collection("x.md".into()))
        );
        assert_eq!(in_market.locate("./y.md", exists), Err(Missing::Absent));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
