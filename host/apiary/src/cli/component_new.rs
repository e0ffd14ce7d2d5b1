//! `apiary component new <hook|trigger|converter> [--lang L] DIR`: a working component project
//! from the templates embedded at build time (`host/apiary/templates/<kind>-<lang>/`).
//!
//! In a template's file names and contents, `{{name}}` is the component's name, `{{name_snake}}`
//! the same with `_` for `-` (a Rust crate's `.wasm` file name), `{{kind}}` the world, and `{{sdk}}`
//! the TOML value of the Rust SDK dependency.

use std::io;
use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use serde::Serialize;

use super::output::{Document, Failed, Human, Outcome};

/// A template's files: `(relative path, contents)`.
type Files = &'static [(&'static str, &'static [u8])];

/// `(template directory, files)`, from build.rs.
const TEMPLATES: &[(&str, Files)] = include!(concat!(env!("OUT_DIR"), "/templates.rs"));

/// Where the Rust SDK is in the checkout this binary was built from (used when it still exists).
const CHECKOUT_SDK: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../guests/apiary-guest-sdk");

/// The SDK version a project depends on when no local SDK is found.
const SDK_VERSION: &str = "0.2";

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Hook,
    Trigger,
    Converter,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Hook => "hook",
            Kind::Trigger => "trigger",
            Kind::Converter => "converter",
        }
    }
}

#[derive(Debug, Args)]
pub struct NewArgs {
    /// The kind of component: hook, trigger or converter.
    pub kind: Kind,
    /// The project directory to create (must not exist, or be empty). Its name is the component's
    /// name unless --name says otherwise.
    pub dir: PathBuf,
    /// The language of the project (rust; others as templates exist, see the error for a list).
    #[arg(long, default_value = "rust")]
    pub lang: String,
    /// The component's name: lowercase letters, digits and `-`, starting with a letter.
    #[arg(long)]
    pub name: Option<String>,
    /// Rust: depend on the guest SDK at this directory (default: the SDK of the apiary checkout
    /// this binary was built from, when present, else apiary-guest-sdk 0.1 from crates.io).
    #[arg(long, value_name = "DIR")]
    pub sdk: Option<PathBuf>,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// The languages with a template for `kind`.
fn languages(kind: Kind) -> Vec<&'static str> {
    TEMPLATES
        .iter()
        .filter_map(|(dir, _)| dir.strip_prefix(kind.as_str())?.strip_prefix('-'))
        .collect()
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    name.len() <= 64
        && chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.ends_with('-')
}

/// `{ path = "…" }` for a local SDK, else the crates.io version.
fn sdk_dependency(sdk: Option<&Path>) -> Result<String, Failed> {
    let local = match sdk {
        Some(dir) => {
            if !dir.join("Cargo.toml").is_file() {
                return Err(Failed::usage(format_args!(
                    "--sdk {}: no Cargo.toml there (give the apiary-guest-sdk directory)",
                    dir.display()
                )));
            }
            Some(dir.to_path_buf())
        }
        None => Some(PathBuf::from(CHECKOUT_SDK)).filter(|d| d.join("Cargo.toml").is_file()),
    };
    Ok(match local {
        Some(dir) => {
            let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
            let path = toml::Value::String(dir.display().to_string());
            format!("{{ path = {path} }}")
        }
        None => format!("\"{SDK_VERSION}\""),
    })
}

fn fill(text: &str, values: &[(&str, &str)]) -> String {
    values
        .iter()
        .fold(text.to_string(), |t, (key, value)| t.replace(key, value))
}

/// `component new`: the project written.
#[derive(Serialize)]
pub(super) struct Created {
    ok: bool,
    kind: Kind,
    lang: String,
    name: String,
    dir: PathBuf,
    files: Vec<String>,
    build: &'static str,
}

pub(super) fn new(args: &NewArgs) -> Result<Created, Failed> {
    let langs = languages(args.kind);
    let template = format!("{}-{}", args.kind.as_str(), args.lang);
    let Some((_, files)) = TEMPLATES.iter().find(|(dir, _)| *dir == template) else {
        return Err(Failed::usage(format_args!(
            "no {} template for a {}; available: {}",
            args.lang,
            args.kind.as_str(),
            if langs.is_empty() {
                "none".to_string()
            } else {
                langs.join(", ")
            }
        )));
    };
    let name = match &args.name {
        Some(n) => n.clone(),
        None => args
            .dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
    };
    if !valid_name(&name) {
        return Err(Failed::usage(format_args!(
            "`{name}` cannot name a component: use lowercase letters, digits and `-`, starting with a letter (at most 64; give --name to pick one other than the directory's)"
        )));
    }
    if std::fs::read_dir(&args.dir).is_ok_and(|mut d| d.next().is_some()) {
        return Err(Failed::error(format_args!(
            "{} exists and is not empty; component new writes only into a new or empty directory",
            args.dir.display()
        )));
    }
    let sdk = sdk_dependency(args.sdk.as_deref())?;
    let snake = name.replace('-', "_");
    let values = [
        ("{{name_snake}}", snake.as_str()),
        ("{{name}}", name.as_str()),
        ("{{kind}}", args.kind.as_str()),
        ("{{sdk}}", sdk.as_str()),
    ];
    let mut written = Vec::new();
    for (relative, contents) in *files {
        let relative = fill(relative, &values);
        let path = args.dir.join(&relative);
        let contents = match std::str::from_utf8(contents) {
            Ok(text) => fill(text, &values).into_bytes(),
            Err(_) => contents.to_vec(),
        };
        let result = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&path, contents));
        if let Err(e) = result {
            return Err(Failed::error(format_args!(
                "cannot write {}: {e}",
                path.display()
            )));
        }
        written.push(relative);
    }
    Ok(Created {
        ok: true,
        kind: args.kind,
        lang: args.lang.clone(),
        name,
        dir: args.dir.clone(),
        files: written,
        build: build_command(&args.lang, files),
    })
}

/// The one command that builds a project of this language (shown after `new`).
fn build_command(lang: &str, files: Files) -> &'static str {
    let npm = files.iter().any(|(path, _)| *path == "package.json");
    match lang {
        "js" if npm => "npm install && npm run build",
        "rust" => "cargo build --release --target wasm32-wasip2",
        _ => "see the project's README.md",
    }
}

impl Outcome for Created {
    fn human(&self, to: &mut Human<'_>) -> io::Result<()> {
        writeln!(
            to.out,
            "✓ wrote {} {} ({}) in {}: {}",
            self.kind.as_str(),
            self.name,
            self.lang,
            self.dir.display(),
            self.files.join(", ")
        )?;
        writeln!(
            to.out,
            "  build:   cd {} && {}",
            self.dir.display(),
            self.build
        )?;
        writeln!(
            to.out,
            "  then:    apiary component inspect FILE.wasm; apiary component test FILE.wasm --fixtures {}/fixtures",
            self.dir.display()
        )
    }

    fn json(&self) -> Option<&dyn Document> {
        Some(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_and_every_kind_has_a_rust_template() {
        assert!(valid_name("my-hook2"));
        for bad in [
            "",
            "My",
            "1x",
            "a/b",
            "../x",
            "x-",
            "{{name}}",
            &"a".repeat(65),
        ] {
            assert!(!valid_name(bad), "{bad}");
        }
        for kind in [Kind::Hook, Kind::Trigger, Kind::Converter] {
            assert!(languages(kind).contains(&"rust"), "{kind:?}");
        }
        assert!(languages(Kind::Converter).contains(&"js"));
        let (_, js) = TEMPLATES
            .iter()
            .find(|(d, _)| *d == "converter-js")
            .unwrap();
        // The frozen WIT reaches the project through the template's link to it.
        assert!(
            js.iter()
                .any(|(p, _)| *p == "wit/deps/apiary-plugin@0.1.0/converter.wit")
        );
        assert_eq!(build_command("js", js), "npm install && npm run build");
    }
}
