//! The Kubernetes manifests in `deploy/base` validate offline against the Kubernetes schemas
//! (`kubernetes-validate --strict`, from PyPI), agree with each other (the shard count is the
//! StatefulSet's replicas, the probes hit the ops endpoints, the keys come from the Secret), and a
//! broken manifest is caught.

use std::path::{Path, PathBuf};
use std::process::Command;

use apiary_e2e::{ci_python, repo_root};

fn base() -> PathBuf {
    repo_root().join("deploy/base")
}

/// The files `kustomization.yaml` lists under `resources:`.
fn resources() -> Vec<PathBuf> {
    let text = std::fs::read_to_string(base().join("kustomization.yaml")).unwrap();
    let mut listed = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        if !line.starts_with(' ') && !line.starts_with('-') {
            inside = line.trim_end() == "resources:";
            continue;
        }
        if inside && let Some(item) = line.trim().strip_prefix("- ") {
            listed.push(base().join(item.trim()));
        }
    }
    listed
}

fn validate(files: &[PathBuf]) -> std::process::Output {
    Command::new(ci_python())
        .args(["-m", "kubernetes_validate", "--strict", "--quiet"])
        .args(files)
        .output()
        .expect("run kubernetes-validate")
}

#[test]
fn the_manifests_validate_against_the_kubernetes_schemas() {
    let files = resources();
    assert!(files.len() >= 4, "{files:?}");
    // Every manifest beside the kustomization is one of its resources.
    for entry in std::fs::read_dir(base()).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().unwrap() != "kustomization.yaml" {
            assert!(files.contains(&path), "{} is not listed", path.display());
        }
    }
    let out = validate(&files);
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_manifests_agree_with_each_other_and_with_up() {
    let script = r#"
import sys, yaml
docs = [d for f in sys.argv[1:] for d in yaml.safe_load_all(open(f)) if d]
by_kind = {d["kind"]: d for d in docs}
config = by_kind["ConfigMap"]["data"]
sts = by_kind["StatefulSet"]
spec = sts["spec"]["template"]["spec"]
up = spec["containers"][0]
env = {e["name"]: e for e in up["env"]}
count = int(config["shard"].split("/")[1])
assert config["shard"].startswith("auto/"), config["shard"]
assert sts["spec"]["replicas"] == count, (sts["spec"]["replicas"], count)
assert env["APIARY_SHARD"]["valueFrom"]["configMapKeyRef"]["key"] == "shard"
assert env["APIARY_KEYS_DIR"]["value"] == "/etc/apiary/keys"
mounts = {m["name"]: m for m in up["volumeMounts"]}
assert mounts["keys"]["mountPath"] == "/etc/apiary/keys" and mounts["keys"]["readOnly"]
volumes = {v["name"]: v for v in spec["volumes"]}
assert volumes["keys"]["secret"]["secretName"] == by_kind["Secret"]["metadata"]["name"]
assert "--ops-addr" in up["args"] and "--relay" in up["args"], up["args"]
assert up["readinessProbe"]["httpGet"]["path"] == "/readyz"
assert up["livenessProbe"]["httpGet"]["path"] == "/healthz"
assert up["resources"]["requests"]["memory"]
assert spec["securityContext"]["runAsNonRoot"] is True
assert sts["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == mounts["data"]["name"]
# The install step runs on a read-only root filesystem too: it gets a writable /tmp.
init = spec["initContainers"][0]
assert init["securityContext"]["readOnlyRootFilesystem"] is True
init_mounts = {m["mountPath"]: m["name"] for m in init["volumeMounts"]}
assert "emptyDir" in volumes[init_mounts["/tmp"]], init_mounts
print("ok")
"#;
    let out = Command::new(ci_python())
        .arg("-c")
        .arg(script)
        .args(resources())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The image runs as a user, not root, and has git for git sources; the build context leaves
    // the build output out.
    let dockerfile = std::fs::read_to_string(repo_root().join("deploy/Dockerfile")).unwrap();
    let runtime = dockerfile.split("AS runtime").nth(1).unwrap();
    assert!(runtime.contains(" git "), "{runtime}");
    let ignore =
        std::fs::read_to_string(repo_root().join("deploy/Dockerfile.dockerignore")).unwrap();
    assert!(ignore.lines().any(|l| l.trim() == "target/"), "{ignore}");
    assert!(
        dockerfile
            .lines()
            .any(|l| l.starts_with("USER ") && !l.contains("root") && !l.contains(" 0")),
        "{dockerfile}"
    );
}

#[test]
fn a_broken_manifest_fails_validation() {
    let tmp = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(base().join("statefulset.yaml")).unwrap();
    let broken = Path::new(tmp.path()).join("statefulset.yaml");
    // A typo in a field name (strict mode refuses unknown fields) and a wrong type.
    std::fs::write(
        &broken,
        text.replace("replicas: 3", "replicas: three")
            .replace("readinessProbe:", "readynessProbe:"),
    )
    .unwrap();
    let out = validate(&[broken]);
    assert!(!out.status.success());
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("replicas"), "{said}");
}
