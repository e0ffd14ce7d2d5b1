//! Bindings per supported WIT version of `apiary:plugin` (one module each, Zed's `since_v0_X`
//! pattern), and the one place that knows which versions exist: [`identify`] reads a component's
//! exports and picks its world and version, or refuses it naming the supported range.

use semver::Version;
use wasmtime::Engine;
use wasmtime::component::Component;

use super::SandboxError;

pub mod v0_1;
pub mod v0_2;

/// The WIT package every apiary plugin is built against.
pub const PACKAGE: &str = "apiary:plugin";

/// Human-readable supported range, used in refusals and `--help`.
pub const SUPPORTED_RANGE: &str =
    "apiary:plugin@0.2.x (>=0.2.0, <0.3.0) and, deprecated, 0.1.x (>=0.1.0, <0.2.0)";

/// The releases a component can be built against; each front end calls a component through the
/// bindings of its release.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub enum Release {
    /// `0.1.x`: deprecated, still run.
    #[serde(rename = "0.1")]
    V0_1,
    /// `0.2.x`: the current release.
    #[serde(rename = "0.2")]
    V0_2,
}

/// The three kinds of plugin component, one WIT world each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum World {
    Hook,
    Trigger,
    Converter,
}

impl World {
    /// The interface a component of this world exports.
    pub fn interface(self) -> &'static str {
        match self {
            World::Hook => "lifecycle",
            World::Trigger => "matcher",
            World::Converter => "format-converter",
        }
    }

    fn from_interface(name: &str) -> Option<World> {
        [World::Hook, World::Trigger, World::Converter]
            .into_iter()
            .find(|w| w.interface() == name)
    }
}

impl std::fmt::Display for World {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            World::Hook => "hook",
            World::Trigger => "trigger",
            World::Converter => "converter",
        })
    }
}

/// What a component is, read from its type.
#[derive(Debug, Clone)]
pub struct Identity {
    pub world: World,
    pub version: Version,
    pub imports: Vec<String>,
    pub exports: Vec<String>,
}

impl Identity {
    /// The release the component was built against (identify refuses the others).
    pub fn release(&self) -> Release {
        release(&self.version).unwrap_or(Release::V0_2)
    }
}

fn release(version: &Version) -> Option<Release> {
    match (version.major, version.minor, version.pre.is_empty()) {
        (0, 1, true) => Some(Release::V0_1),
        (0, 2, true) => Some(Release::V0_2),
        _ => None,
    }
}

/// Finds the world and WIT version of a compiled component, refusing versions outside
/// [`SUPPORTED_RANGE`] and components that export no apiary interface.
pub fn identify(
    engine: &Engine,
    name: &str,
    component: &Component,
) -> Result<Identity, SandboxError> {
    let ty = component.component_type();
    let imports: Vec<String> = ty.imports(engine).map(|(n, _)| n.to_string()).collect();
    let exports: Vec<String> = ty.exports(engine).map(|(n, _)| n.to_string()).collect();
    let mut found = None;
    for export in &exports {
        let Some(rest) = export
            .strip_prefix(PACKAGE)
            .and_then(|r| r.strip_prefix('/'))
        else {
            continue;
        };
        let (interface, version) = rest.split_once('@').unwrap_or((rest, ""));
        let version = Version::parse(version).map_err(|_| SandboxError::UnsupportedVersion {
            name: name.to_string(),
            found: format!("{PACKAGE}/{rest}"),
        })?;
        if release(&version).is_none() {
            return Err(SandboxError::UnsupportedVersion {
                name: name.to_string(),
                found: format!("{PACKAGE}@{version}"),
            });
        }
        if let Some(world) = World::from_interface(interface) {
            found = Some((world, version));
        }
    }
    let Some((world, version)) = found else {
        return Err(SandboxError::NotAPlugin {
            name: name.to_string(),
            exports: if exports.is_empty() {
                "nothing".to_string()
            } else {
                exports.join(", ")
            },
        });
    };
    Ok(Identity {
        world,
        version,
        imports,
        exports,
    })
}
